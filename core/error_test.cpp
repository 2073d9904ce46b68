// Tests of core/error: quoted_input, the one way an error message quotes user input (cut, one
// line, control bytes escaped).
#include "core/error.h"

#include <gtest/gtest.h>

#include <string>

namespace dts {
namespace {

TEST(QuotedInput, ShortTextIsQuotedWhole) {
  EXPECT_EQ(quoted_input("ring(mpi)"), "'ring(mpi)'");
  EXPECT_EQ(quoted_input(""), "''");
  EXPECT_EQ(quoted_input(std::string(kQuotedChars, 'a')), "'" + std::string(kQuotedChars, 'a') + "'");  // fits exactly
}

TEST(QuotedInput, LongTextIsCutWithItsLength) {
  const std::string long_text(100'000, 'x');
  EXPECT_EQ(quoted_input(long_text), "'" + std::string(kQuotedChars, 'x') + "'... (100000 characters)");
  // One past the limit is cut too.
  EXPECT_EQ(quoted_input(std::string(kQuotedChars + 1, 'y')),
            "'" + std::string(kQuotedChars, 'y') + "'... (" + std::to_string(kQuotedChars + 1) + " characters)");
}

TEST(QuotedInput, ControlBytesAreEscapedOnOneLine) {
  EXPECT_EQ(quoted_input("ri\nng(mpi)"), "'ri\\nng(mpi)'");
  EXPECT_EQ(quoted_input("a\tb\rc"), "'a\\tb\\rc'");
  EXPECT_EQ(quoted_input(std::string("\x1b[2J\x7f", 5)), "'\\x1b[2J\\x7f'");
  EXPECT_EQ(quoted_input(std::string("a\0b", 3)), "'a\\x00b'");
  EXPECT_EQ(quoted_input("back\\slash"), "'back\\\\slash'");  // so "\n" typed as two characters differs from a newline
  // Escapes count as one character of the limit each; the quote never holds a raw control byte.
  const std::string quote = quoted_input(std::string(1000, '\n'));
  EXPECT_EQ(quote.find('\n'), std::string::npos);
  EXPECT_EQ(quote, "'" + [] { std::string s; for (size_t i = 0; i < kQuotedChars; ++i) s += "\\n"; return s; }() +
                       "'... (1000 characters)");
}

TEST(QuotedInput, Utf8IsKeptAndNeverCutInsideACharacter) {
  EXPECT_EQ(quoted_input("größe"), "'größe'");
  // kQuotedChars - 1 ASCII characters, then a 3-byte character: it fits whole as the last one.
  const std::string text = std::string(kQuotedChars - 1, 'a') + "\xe2\x82\xac" + "tail";
  EXPECT_EQ(quoted_input(text), "'" + std::string(kQuotedChars - 1, 'a') + "\xe2\x82\xac" + "'... (" +
                                    std::to_string(text.size()) + " characters)");
  // A lead byte without its continuation, or a stray continuation byte, is not UTF-8: escaped.
  EXPECT_EQ(quoted_input("a\xe2\x82"), "'a\\xe2\\x82'");
  EXPECT_EQ(quoted_input("\x80z"), "'\\x80z'");
}

}  // namespace
}  // namespace dts
