// text_to_root: length, then bytes, point to point; agree: two all_reduces, then text_to_root.
#include "comm/text.h"

#include <algorithm>
#include <cstring>
#include <mutex>

namespace dts {

std::vector<std::string> all_gather_texts(Communicator& comm, const std::string& text, size_t max_bytes) {
  const size_t slot_bytes = max_bytes + 1;  // NUL-terminated in a fixed slot per rank
  std::vector<char> slot(slot_bytes, 0), all(slot_bytes * static_cast<size_t>(comm.size()), 0);
  std::copy_n(text.begin(), std::min(text.size(), max_bytes), slot.begin());
  comm.all_gather(slot.data(), all.data(), slot_bytes, DType::u8);
  std::vector<std::string> texts;
  for (int r = 0; r < comm.size(); ++r) {
    const char* at = all.data() + slot_bytes * static_cast<size_t>(r);
    texts.emplace_back(at, strnlen(at, slot_bytes));
  }
  return texts;
}

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

std::pair<int, std::string> agree(Communicator& comm, int status, const std::string& message) {
  int worst = 0;
  comm.all_reduce(&status, &worst, 1, DType::i32, ReduceOp::max);
  if (worst == 0) return {0, {}};
  const int mine = status == worst ? comm.rank() : comm.size();
  int first = comm.size();
  comm.all_reduce(&mine, &first, 1, DType::i32, ReduceOp::min);
  std::string text = text_to_root(comm, first, message);
  if (first != 0 && !text.empty()) text = "rank " + std::to_string(first) + ": " + text;
  return {worst, text};
}

namespace {
std::mutex listener_mutex;
FailureListener& failure_listener() {
  static FailureListener listener;
  return listener;
}
}  // namespace

void set_failure_listener(FailureListener listener) {
  std::lock_guard lock(listener_mutex);
  failure_listener() = std::move(listener);
}

void notify_failure(const std::exception_ptr& failure) {
  FailureListener listener;
  {
    std::lock_guard lock(listener_mutex);
    listener = failure_listener();
  }
  if (failure && listener) listener(failure);
}

void leave_together(Communicator& comm, const std::exception_ptr& failure) {
  notify_failure(failure);
  int kind = 0;  // 0 none, 1 unsupported, 2 anything else: the harness's own order
  std::string message;
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const Error& e) {
      kind = e.kind() == Error::Kind::unsupported ? 1 : 2;
      message = e.what();
    } catch (const std::exception& e) {
      kind = 2;
      message = e.what();
    }
  }
  const auto [worst, text] = agree(comm, kind, message);
  if (worst == 0) return;
  if (failure && kind == worst) std::rethrow_exception(failure);
  const Error::Kind as = worst == 1 ? Error::Kind::unsupported : Error::Kind::backend;
  throw Error(as, comm.rank() == 0 ? text : "another rank of the case failed");
}


}  // namespace dts
