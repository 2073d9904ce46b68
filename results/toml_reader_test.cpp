// Tests of TomlReader's depth limit (results/toml_reader.h): a document nested past kTomlMaxDepth
// is one line "PATH:LINE: ..." before toml++ parses it (a 32,000-part dotted key overflowed
// toml++'s stack), and the scan counts every level of text toml++ accepts, never text in strings
// or comments.
//   build/results/results_test --gtest_filter='TomlDepth*'
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"
#include "results/toml_reader.h"

namespace {

using dts::kTomlMaxDepth;
using dts::toml_depth;

// "a.a.a" of `parts` parts.
std::string dotted(int parts) {
  std::string key = "a";
  for (int i = 1; i < parts; ++i) key += ".a";
  return key;
}

// The message TomlReader::parse refuses `text` with ("" when it parses).
std::string refusal(const std::string& text) {
  try {
    (void)dts::TomlReader("x.toml").parse(text);
  } catch (const dts::Error& e) {
    EXPECT_EQ(e.kind(), dts::Error::Kind::invalid_argument);
    return e.what();
  }
  return "";
}

const std::string kTooDeep = "nested deeper than " + std::to_string(kTomlMaxDepth) + " levels";

// The crashes of issue 35: 32,000 parts (64,003 bytes, under the 64 KiB line limit) as a key and
// as both kinds of header. Each is now refused at its line, before toml++ sees it.
TEST(TomlDepth, TheKeysAndHeadersThatCrashedAreRefusedAtTheirLine) {
  const std::string deep = dotted(32000);
  ASSERT_EQ((deep + " = 1").size(), 64003u);
  for (const std::string& line : {deep + " = 1", "[" + deep + "]", "[[" + deep + "]]"}) {
    const std::string message = refusal("[profile]\n" + line + "\n");
    EXPECT_EQ(message.rfind("x.toml:2: " + kTooDeep, 0), 0u) << message.substr(0, 200);
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
}

// The limit is exact: kTomlMaxDepth levels parse, one more does not, whichever way it is reached.
TEST(TomlDepth, TheLimitIsExactForEveryWayToNest) {
  const int n = kTomlMaxDepth;
  const auto nest = [](int levels, const std::string& open, const std::string& inner, const std::string& close) {
    std::string text;
    for (int i = 0; i < levels; ++i) text += open;
    text += inner;
    for (int i = 0; i < levels; ++i) text += close;
    return text;
  };
  const auto cases = [&](int depth) {
    return std::vector<std::string>{
        dotted(depth) + " = 1\n",
        "[" + dotted(depth) + "]\n",
        "[[" + dotted(depth) + "]]\n",
        // a header's parts add to its keys'
        "[" + dotted(depth / 2) + "]\n" + dotted(depth - depth / 2) + " = 1\n",
        "[[" + dotted(depth / 2) + "]]\n" + dotted(depth - depth / 2) + " = 1\n",
        // the key's level, then an array each
        "a = " + nest(depth - 1, "[", "", "]") + "\n",
        // each inline table, and the key inside it (an empty table innermost makes it even)
        "a = " + nest((depth - 1) / 2, "{ a = ", depth % 2 == 0 ? "{}" : "1", "}") + "\n",
        // a dotted key inside an inline table inside an array, over several lines
        "a = [\n  1.5,\n  { " + dotted(depth - 3) + " = 2 },\n]\n",
    };
  };
  for (const std::string& text : cases(n)) {
    EXPECT_EQ(toml_depth(text).depth, n) << text;
    EXPECT_EQ(refusal(text), "") << text;
  }
  for (const std::string& text : cases(n + 1)) {
    EXPECT_EQ(toml_depth(text).depth, n + 1) << text;
    EXPECT_NE(refusal(text).find(kTooDeep), std::string::npos) << text;
  }
}

// Dots, brackets and braces inside strings and comments are text, not levels: each of these is
// one level deep, however many it holds.
TEST(TomlDepth, StringsAndCommentsAreNotCounted) {
  const std::string dots = dotted(200), brackets(200, '['), braces(200, '{');
  for (const std::string& text : {
           "\"" + dots + "\" = 1\n",                                      // a quoted key with dots is one part
           "'" + dots + "' = 1\n",
           "[\"" + dots + "\"]\n",
           "a = \"" + dots + brackets + braces + "\"\n",                  // basic string
           "a = '" + dots + brackets + "'\n",                             // literal string
           "a = \"\"\"\n" + dots + "\n" + brackets + "\"\"\"\n",          // multi-line basic
           "a = '''\n" + dots + "\n" + brackets + "'''\n",                // multi-line literal
           "a = \"\\\"" + brackets + "\\\\\"\n",                          // escaped quote and backslash
           "a = \"\"\"\\\"\"\"" + brackets + "\"\"\"\n",                  // \""" is text, not the end
           "# " + dots + brackets + "\na = 1 # " + braces + "\n",         // comments
           std::string("a = 1.5\nb = 1979-05-27T07:32:00.999\n"),  // a number's dot is no level
       }) {
    EXPECT_EQ(toml_depth(text).depth, 1) << text;
    EXPECT_EQ(refusal(text), "") << text;
  }
}

// Where a string ends decides what is counted after it: each string here ends just before a deep
// inline table, which the scan must still see (a scan that ended the string anywhere else would
// take the table for text and pass it to toml++, whose stack it could overflow).
TEST(TomlDepth, ALevelAfterATrickyStringEndIsCounted) {
  const std::string deep = "{ " + dotted(kTomlMaxDepth) + " = 1 }";
  for (const std::string& text : {
           "a = [ \"\"\"q\"\"\"\", " + deep + " ]\n",  // """ closes after one quote of text
           "a = [ \"\"\"q\"\"\"\"\", " + deep + " ]\n",  // ... after two
           "a = [ '''q'''', " + deep + " ]\n",
           "a = [ \"\\\\\", " + deep + " ]\n",  // "\\": the backslash escapes a backslash, not the quote
           "a = [ '\\', " + deep + " ]\n",      // a literal string has no escapes
           "a = [ \"\", " + deep + " ]\n",      // "" is an empty string, not a multi-line one
           "a = [ # ]\n " + deep + " ]\n",      // a comment ends at its line
           "\xEF\xBB\xBF[" + dotted(kTomlMaxDepth + 1) + "]\n",  // a header after the byte-order mark toml++ skips
       }) {
    EXPECT_GT(toml_depth(text).depth, kTomlMaxDepth) << text;
    EXPECT_NE(refusal(text).find(kTooDeep), std::string::npos) << text;
  }
}

// The line named is where the limit is first passed; the scan stops there (a megabyte of '['
// is refused at level kTomlMaxDepth + 1, its memory bounded by the limit, not by the text).
TEST(TomlDepth, TheLineIsWhereTheLimitIsPassedAndTheScanStopsThere) {
  const std::string text = "[profile]\nname = \"x\"\n\na = [\n" + std::string(1 << 20, '[');
  const dts::TomlDepth depth = toml_depth(text);
  EXPECT_EQ(depth.depth, kTomlMaxDepth + 1);
  EXPECT_EQ(depth.line, 5);
  EXPECT_EQ(refusal(text).rfind("x.toml:5: " + kTooDeep, 0), 0u);
}

// The files dtsuite ships nest a few levels: the limit is far above any of them.
TEST(TomlDepth, ShippedFilesAreFarBelowTheLimit) {
  int files = 0;
  for (const char* dir : {DTS_EXPECTATIONS_DIR, DTS_PROFILES_DIR}) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".toml") continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      EXPECT_LE(toml_depth(text.str()).depth, 4) << entry.path();  // [[expect]] or [[threshold]], a key, a list
      ++files;
    }
  }
  EXPECT_GE(files, 4);  // two expectation files, two profiles
}

}  // namespace
