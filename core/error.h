// dts::Error: the one exception type every layer throws. Its kind tells the harness how to
// report it (unsupported -> SKIP, timeout -> exit 3, invalid_argument -> exit 2, ...).
#pragma once
#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dts {

class Error : public std::runtime_error {
 public:
  enum class Kind { invalid_argument, unsupported, backend, timeout, mismatch, io };

  Error(Kind kind, const std::string& message,
        std::source_location where = std::source_location::current());

  Kind kind() const { return kind_; }
  // "file.cpp:123" of the throw site, for trace lines.
  const std::string& where() const { return where_; }

 private:
  Kind kind_;
  std::string where_;
};

std::string_view name(Error::Kind kind);

}  // namespace dts
