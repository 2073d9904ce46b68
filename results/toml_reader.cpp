#include "results/toml_reader.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "results/record.h"

namespace dts {

namespace {

// One pass over the text, no recursion: the depth reached so far, and the open inline tables and
// arrays (at most stop_above + 1 of them, since the scan stops there).
class DepthScanner {
 public:
  DepthScanner(std::string_view text, int stop_above) : text_(text), stop_above_(stop_above) {}

  TomlDepth run() {
    while (at_ < text_.size() && reached_.depth <= stop_above_) step(text_[at_]);
    return reached_;
  }

 private:
  struct Open {
    int level;
    bool is_table;  // an inline table, whose entries are keys; else an array, of values
  };

  void step(char c) {
    switch (c) {
      case '\n': new_line(); break;
      case '#': skip_comment(); break;
      case '"': case '\'': skip_string(c); break;
      case '[': open_bracket(); break;
      case '{': open(true); break;
      case ']': case '}': close(); break;
      case ',': next_entry(); break;
      case '=': key_done(); break;
      case '.':
        // A dot outside a key belongs to a number or a time (1.5, 07:32:00.25).
        if (!in_value_) reach(level_ + ++dots_ + 1);
        ++at_;
        break;
      default: ++at_; break;  // key or value text, whitespace, a byte-order mark
    }
  }

  void reach(int depth) {
    if (depth > reached_.depth) reached_ = {depth, line_};
  }

  // A line ends a key/value pair or a header unless an inline table or array is still open.
  void new_line() {
    ++at_;
    ++line_;
    if (!open_.empty()) return;
    in_value_ = false;
    in_header_ = false;
    level_ = header_level_;
    dots_ = 0;
  }

  void skip_comment() {
    while (at_ < text_.size() && text_[at_] != '\n') ++at_;
  }

  // Past a basic ("), literal ('), multi-line basic (""") or multi-line literal (''') string. A
  // multi-line one ends at a run of three or more quotes (up to two of them are its text); a
  // single-line one at its quote, or before a line break (then it is invalid, and toml++ says so).
  void skip_string(char quote) {
    const bool multi_line = text_.substr(at_, 3) == (quote == '"' ? R"(""")" : "'''");
    at_ += multi_line ? 3 : 1;
    while (at_ < text_.size()) {
      const char c = text_[at_];
      if (c == '\n') {
        if (!multi_line) return;
        ++line_;
      } else if (c == '\\' && quote == '"') {
        // An escape: the next character is text, whatever it is (a line break: a line-ending backslash).
        if (at_ + 1 < text_.size() && text_[at_ + 1] == '\n') {
          if (!multi_line) return;
          ++line_;
        }
        at_ += 2;
        continue;
      } else if (c == quote && !multi_line) {
        ++at_;
        return;
      } else if (c == quote) {
        size_t run = 0;
        while (at_ < text_.size() && text_[at_] == quote) ++at_, ++run;
        if (run >= 3) return;
        continue;
      }
      ++at_;
    }
  }

  // '[' where a key may start (a line's first, after whatever toml++ skips there) opens a
  // [table] or [[array]] header; in a value, an array.
  void open_bracket() {
    if (!open_.empty() || in_value_) {
      open(false);
      return;
    }
    at_ += text_.compare(at_, 2, "[[") == 0 ? 2 : 1;
    in_header_ = true;
    level_ = 0;
    dots_ = 0;
  }

  void open(bool is_table) {
    ++at_;
    reach(++level_);
    open_.push_back({level_, is_table});
    in_value_ = !is_table;
    dots_ = 0;
  }

  void close() {
    ++at_;
    if (in_header_ && open_.empty()) {  // ']' (or the first of "]]") ends the header's key
      header_level_ = dots_ + 1;
      reach(header_level_);
      in_header_ = false;
      in_value_ = true;  // nothing more to count on this line
      return;
    }
    if (!open_.empty()) open_.pop_back();
    level_ = open_.empty() ? header_level_ : open_.back().level;
    in_value_ = true;
  }

  // ',' between the entries of an inline table (a key comes next) or of an array (a value).
  void next_entry() {
    ++at_;
    if (open_.empty()) return;
    level_ = open_.back().level;
    in_value_ = !open_.back().is_table;
    dots_ = 0;
  }

  // '=' after a key: its parts are levels, and its value sits at the last one.
  void key_done() {
    ++at_;
    level_ += dots_ + 1;
    reach(level_);
    dots_ = 0;
    in_value_ = true;
  }

  std::string_view text_;
  int stop_above_;
  size_t at_ = 0;
  int line_ = 1;
  TomlDepth reached_;
  std::vector<Open> open_;
  int header_level_ = 0;  // parts of the last [table] or [[array]] header: its keys start there
  int level_ = 0;         // the level the key or value being read starts from
  int dots_ = 0;          // dots in the key being read
  bool in_value_ = false, in_header_ = false;
};

}  // namespace

TomlDepth toml_depth(std::string_view text, int stop_above) { return DepthScanner(text, stop_above).run(); }

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
  const TomlDepth nesting = toml_depth(text);
  if (nesting.depth > kTomlMaxDepth) {
    fail(nesting.line, "nested deeper than " + std::to_string(kTomlMaxDepth) +
                           " levels (each part of a dotted key or table header, and each inline table or array, is one)");
  }
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
