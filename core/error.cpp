// dts::Error implementation: keeps the throw site so multi-rank failures can be traced.
#include "core/error.h"

namespace dts {

namespace {
std::string base_name(const char* path) {
  std::string_view p(path);
  auto slash = p.find_last_of('/');
  return std::string(slash == std::string_view::npos ? p : p.substr(slash + 1));
}
}  // namespace

Error::Error(Kind kind, const std::string& message, std::source_location where)
    : std::runtime_error(message),
      kind_(kind),
      where_(base_name(where.file_name()) + ":" + std::to_string(where.line())) {}

std::string_view name(Error::Kind kind) {
  switch (kind) {
    case Error::Kind::invalid_argument: return "invalid_argument";
    case Error::Kind::unsupported: return "unsupported";
    case Error::Kind::backend: return "backend";
    case Error::Kind::timeout: return "timeout";
    case Error::Kind::mismatch: return "mismatch";
    case Error::Kind::io: return "io";
  }
  return "unknown";
}

}  // namespace dts
