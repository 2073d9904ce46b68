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

  // The whole text parsed; a syntax error is fail() at its line.
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
