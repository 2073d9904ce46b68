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

// User input as an error message quotes it: in single quotes, at most kQuotedChars characters of
// it, then "... (N characters)" when cut; control bytes, backslashes and bytes that are not UTF-8
// escaped (\n, \t, \\, \x1b). A generated spec can be megabytes and one with a newline in it would
// split the harness's one-line error; 80 characters hold every real one whole
// ("faulty(bitflip,ring(mpi))" is 25, "hybrid(dp=2,tp=2,pp=2,zero=1,mb=8,schedule=1f1b)" 48).
inline constexpr size_t kQuotedChars = 80;
std::string quoted_input(std::string_view text);

}  // namespace dts
