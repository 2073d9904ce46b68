// Checks the fuzz targets (fuzz/) make of a parser's result beyond "no crash": a failed check
// prints what was expected and aborts, which libFuzzer reports as a crash with the input.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string_view>

#define DTS_FUZZ_CHECK(condition, what)                                           \
  do {                                                                            \
    if (!(condition)) {                                                           \
      std::fprintf(stderr, "fuzz check failed at %s:%d: %s\n", __FILE__, __LINE__, what); \
      std::abort();                                                               \
    }                                                                             \
  } while (false)

namespace dts::fuzz {

// Errors are one line on stderr (exit 2): a message with a line break breaks that promise.
inline void check_one_line(std::string_view message) {
  if (message.find('\n') != std::string_view::npos) {
    std::fprintf(stderr, "fuzz check failed: an error message spans lines: %.*s\n",
                 static_cast<int>(message.size()), message.data());
    std::abort();
  }
}

}  // namespace dts::fuzz
