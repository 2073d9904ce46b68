#include "results/toml_reader.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/error.h"
#include "results/record.h"

namespace dts {

std::string toml_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date or time";
  }
}

std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& table) {
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (auto&& [key, node] : table) entries.emplace_back(&key, &node);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    const auto& x = a.first->source().begin;
    const auto& y = b.first->source().begin;
    return x.line != y.line ? x.line < y.line : x.column < y.column;
  });
  return entries;
}

std::string join_names(const std::vector<std::string_view>& items) {
  std::string text;
  for (auto item : items) text += (text.empty() ? "" : ", ") + std::string(item);
  return text;
}

toml::table TomlReader::parse(std::string_view text) const {
  try {
    return toml::parse(text, std::string_view(path_));
  } catch (const toml::parse_error& e) {
    fail(static_cast<int>(e.source().begin.line), "TOML syntax error: " + std::string(e.description()));
  }
}

void TomlReader::fail(int line, const std::string& reason) const {
  throw Error(Error::Kind::invalid_argument, path_ + ":" + std::to_string(line) + ": " + printable(reason));
}
void TomlReader::fail(const toml::node& node, const std::string& reason) const {
  fail(static_cast<int>(node.source().begin.line), reason);
}
void TomlReader::fail(const toml::key& key, const std::string& reason) const {
  fail(static_cast<int>(key.source().begin.line), reason);
}

const toml::table& TomlReader::table_of(const toml::node& node, const std::string& what) const {
  const toml::table* table = node.as_table();
  if (!table) fail(node, what + " must be a table, not " + toml_type_name(node));
  return *table;
}

std::string TomlReader::string_of(const toml::node& node, const std::string& what) const {
  const auto value = node.value_exact<std::string>();
  if (!value) fail(node, what + " must be a string, not " + toml_type_name(node));
  if (value->empty()) fail(node, what + " must not be empty");
  return *value;
}

double TomlReader::number_of(const toml::node& node, const std::string& what) const {
  if (!node.is_number()) fail(node, what + " must be a number, not " + toml_type_name(node));
  const double value = *node.value<double>();
  // A bound of +-inf could never be met (or always is): a typo, not a threshold.
  if (!std::isfinite(value)) fail(node, what + " must be a finite number");
  return value;
}

int64_t TomlReader::integer_of(const toml::node& node, const std::string& what) const {
  const auto value = node.value_exact<int64_t>();
  if (!value) fail(node, what + " must be an integer, not " + toml_type_name(node));
  return *value;
}

bool TomlReader::boolean_of(const toml::node& node, const std::string& what) const {
  const auto value = node.value_exact<bool>();
  if (!value) fail(node, what + " must be a boolean (true or false), not " + toml_type_name(node));
  return *value;
}

std::vector<std::string> TomlReader::strings_of(const toml::node& node, const std::string& what) const {
  std::vector<std::string> items;
  if (const toml::array* array = node.as_array()) {
    if (array->empty()) fail(node, what + " must not be an empty array");
    for (const toml::node& item : *array) items.push_back(string_of(item, what + " items"));
  } else if (node.is_string()) {
    items.push_back(string_of(node, what));
  } else {
    fail(node, what + " must be a string or an array of strings, not " + toml_type_name(node));
  }
  return items;
}

std::vector<std::string> TomlReader::names_of(const toml::node& node, const std::string& what, const std::string& noun,
                                              const std::vector<std::string_view>& known) const {
  auto items = strings_of(node, what);
  for (const auto& item : items) {
    if (std::find(known.begin(), known.end(), item) == known.end()) {
      fail(node, "unknown " + noun + " '" + item + "' (expected one of " + join_names(known) + ")");
    }
  }
  return items;
}

int64_t TomlReader::bytes_of(const toml::node& node, const std::string& what) const {
  if (node.is_integer()) {
    const int64_t value = *node.value_exact<int64_t>();
    if (value < 0) fail(node, what + " must not be negative");
    return value;
  }
  if (!node.is_string()) fail(node, what + " must be an integer or a size such as \"256M\", not " + toml_type_name(node));
  const std::string text = *node.value_exact<std::string>();
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string suffix = text.substr(digits);
  int shift = -1;
  if (suffix.empty() || suffix == "B") shift = 0;
  else if (suffix == "K" || suffix == "k" || suffix == "KB" || suffix == "KiB") shift = 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MB" || suffix == "MiB") shift = 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GB" || suffix == "GiB") shift = 30;
  if (digits == 0 || digits > 12 || shift < 0) {
    fail(node, "bad size '" + text + "' for " + what + " (expected e.g. 8, 64K, 256M, 1G)");
  }
  const int64_t value = std::stoll(text.substr(0, digits));
  if (value > (int64_t{1} << (50 - shift))) fail(node, "size '" + text + "' for " + what + " is too large");
  return value << shift;
}

}  // namespace dts
