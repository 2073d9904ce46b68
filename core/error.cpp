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

std::string quoted_input(std::string_view text) {
  std::string out = "'";
  size_t used = 0, shown = 0;  // bytes of `text` taken, characters of it in the quote
  while (used < text.size() && shown < kQuotedChars) {
    const auto c = static_cast<unsigned char>(text[used]);
    // A UTF-8 sequence is kept whole (a cut never splits one); a stray byte is escaped.
    const size_t length = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    bool sequence = length > 1 && used + length <= text.size();
    for (size_t k = 1; sequence && k < length; ++k) sequence = (static_cast<unsigned char>(text[used + k]) & 0xc0) == 0x80;
    if (sequence) {
      out.append(text.substr(used, length));
      used += length;
    } else if (c == '\\') {
      out += "\\\\";
      ++used;
    } else if (c == '\n' || c == '\t' || c == '\r') {
      out += c == '\n' ? "\\n" : c == '\t' ? "\\t" : "\\r";
      ++used;
    } else if (c < 0x20 || c >= 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
      ++used;
    } else {
      out += static_cast<char>(c);
      ++used;
    }
    ++shown;
  }
  out += "'";
  if (used < text.size()) out += "... (" + std::to_string(text.size()) + " characters)";
  return out;
}

}  // namespace dts
