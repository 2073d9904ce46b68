// text_to_root: length, then bytes, point to point.
#include "comm/text.h"

namespace dts {

std::string text_to_root(Communicator& comm, int from, const std::string& text) {
  if (from == 0) return comm.rank() == 0 ? text : std::string();
  if (comm.rank() == from) {
    const auto length = static_cast<int64_t>(text.size());
    comm.send(&length, 1, DType::i64, 0);
    comm.send(text.data(), text.size(), DType::u8, 0);
    return {};
  }
  if (comm.rank() != 0) return {};
  int64_t length = 0;
  comm.recv(&length, 1, DType::i64, from);
  std::string out(static_cast<size_t>(length), '\0');
  comm.recv(out.data(), out.size(), DType::u8, from);
  return out;
}

}  // namespace dts
