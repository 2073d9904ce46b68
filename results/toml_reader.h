// Reading hand-written TOML files (acceptance profiles, expectation files): every problem is one
// line "PATH:LINE: reason", because such a file is edited by hand and reviewed by others. Built on
// toml++; the typed getters check a node's type and say what it should have been.
#pragma once
#include <toml++/toml.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dts {

// The deepest a TOML file dtsuite reads may nest. Each part of a dotted key or of a [table] or
// [[array]] header is one level, and so is each inline table or array a value opens:
// `a.b = { c = [1] }` under `[x]` reaches 6. toml++ 3.3.0 recurses once per level and has no
// limit of its own on dotted keys: a 30,773-part key (or 30,784-part header) overflows the 8 MiB
// main stack, and 3,791 parts the 1 MiB that is the least any thread of dtsuite gets
// (harness/thread_stack.cpp). 64 is about 60 times under that, with room to spare for the two
// nodes an [[array]] part becomes, and far over what a file written by hand needs (the shipped
// profiles and expectation files reach 3).
inline constexpr int kTomlMaxDepth = 64;

// How deep `text` nests, counted as kTomlMaxDepth says, and the line where it first gets that
// deep; the scan stops at the first level past `stop_above`. One pass, no recursion, memory
// bounded by `stop_above`; text in strings and comments is skipped. Exact for text that toml++
// accepts; for text it refuses, toml++ says why once the depth is in bounds.
struct TomlDepth {
  int depth = 0;
  int line = 1;
};
TomlDepth toml_depth(std::string_view text, int stop_above = kTomlMaxDepth);

// "a string", "an integer", ...: a node's type in an error message.
std::string toml_type_name(const toml::node& node);

// A table's entries in the order they appear in the file (toml++ keeps them sorted by key), so
// that the first problem reported is the first one a reader meets.
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& table);

// "a, b, c".
std::string join_names(const std::vector<std::string_view>& items);

class TomlReader {
 public:
  explicit TomlReader(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  // The whole text parsed; a syntax error is fail() at its line, and so is nesting deeper than
  // kTomlMaxDepth, found before toml++ parses (which would overflow the stack).
  toml::table parse(std::string_view text) const;

  // Error{invalid_argument} "PATH:LINE: reason"; the reason passes through printable(), so that
  // quoted file text stays one line and safe on a terminal.
  [[noreturn]] void fail(int line, const std::string& reason) const;
  [[noreturn]] void fail(const toml::node& node, const std::string& reason) const;
  [[noreturn]] void fail(const toml::key& key, const std::string& reason) const;

  const toml::table& table_of(const toml::node& node, const std::string& what) const;
  std::string string_of(const toml::node& node, const std::string& what) const;  // non-empty
  double number_of(const toml::node& node, const std::string& what) const;       // finite
  int64_t integer_of(const toml::node& node, const std::string& what) const;
  bool boolean_of(const toml::node& node, const std::string& what) const;
  // A string, or a non-empty array of strings.
  std::vector<std::string> strings_of(const toml::node& node, const std::string& what) const;
  // strings_of(), each one of `known`; `noun` names a value in messages ("unknown op 'x'").
  std::vector<std::string> names_of(const toml::node& node, const std::string& what, const std::string& noun,
                                    const std::vector<std::string_view>& known) const;
  // Bytes: an integer, or a string with the command line's suffixes (K, M, G: powers of 1024).
  int64_t bytes_of(const toml::node& node, const std::string& what) const;

 private:
  std::string path_;
};

}  // namespace dts
