// Fuzz target: parse_backend_spec (comm/communicator.h), the parser of `run --backend`. Every
// input parses or throws Error{invalid_argument}; a spec that parses is exactly its parts again,
// and its arguments are parsed in turn, as the factories of make_communicator() nest.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "comm/communicator.h"
#include "core/error.h"
#include "fuzz/fuzz_check.h"

namespace {

void parse_nested(std::string_view spec, int depth) {
  const dts::BackendSpec parsed = dts::parse_backend_spec(spec);
  // NAME, or NAME(ARG,...,ARG): nothing dropped, nothing added.
  std::string rebuilt = parsed.name;
  if (!parsed.args.empty()) {
    rebuilt += '(';
    for (size_t i = 0; i < parsed.args.size(); ++i) rebuilt += (i ? "," : "") + parsed.args[i];
    rebuilt += ')';
  }
  DTS_FUZZ_CHECK(rebuilt == spec, "the parts do not make up the spec");
  DTS_FUZZ_CHECK(depth <= dts::kMaxBackendSpecDepth, "a spec nested past the limit was accepted");
  for (const std::string& arg : parsed.args) {
    if (arg.find('(') != std::string::npos) parse_nested(arg, depth + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    parse_nested(std::string_view(reinterpret_cast<const char*>(data), size), 1);
  } catch (const dts::Error& e) {
    DTS_FUZZ_CHECK(e.kind() == dts::Error::Kind::invalid_argument, "a bad spec is not invalid_argument");
    dts::fuzz::check_one_line(e.what());
  }
  return 0;
}
