#include "results/expectations.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "core/error.h"
#include "results/catalog.h"
#include "results/toml_reader.h"

namespace dts {

namespace {

bool contains(const std::vector<std::string>& items, std::string_view item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

constexpr std::string_view kUnclassified = "wrong value";

// Nothing but white space, ASCII or Unicode's (no-break and the typographic spaces, the zero
// widths, the byte order mark): a citation of these cites nothing.
bool blank(std::string_view text) {
  static const std::string_view kUnicodeBlanks[] = {
      "\u00a0", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004", "\u2005", "\u2006", "\u2007",
      "\u2008", "\u2009", "\u200a", "\u200b", "\u200c", "\u200d", "\u2028", "\u2029", "\u202f", "\u205f",
      "\u2060", "\u3000", "\ufeff"};
  while (!text.empty()) {
    if (std::isspace(static_cast<unsigned char>(text.front()))) {
      text.remove_prefix(1);
      continue;
    }
    const auto* blank = std::find_if(std::begin(kUnicodeBlanks), std::end(kUnicodeBlanks),
                                     [&](std::string_view b) { return text.substr(0, b.size()) == b; });
    if (blank == std::end(kUnicodeBlanks)) return false;
    text.remove_prefix(blank->size());
  }
  return true;
}

// Levenshtein distance, two rows: kinds are a few dozen characters.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

// Each kind the catalog's checks name, with the rows that can carry it ("f32/min", "u8/none").
using KindRows = std::map<std::string, std::set<std::string>>;

std::string row_class(std::string_view dtype, std::string_view redop) { return std::string(dtype) + "/" + std::string(redop); }

const KindRows& waivable_kinds() {
  static const KindRows vocabulary = [] {
    KindRows kinds;
    for (const DeviationKind& k : catalog_deviation_kinds()) kinds[k.kind].insert(row_class(k.dtype, k.redop));
    return kinds;
  }();
  return vocabulary;
}

std::string joined(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

class Loader : public TomlReader {
 public:
  using TomlReader::TomlReader;

  ExpectationFile load(std::string_view text) const {
    const toml::table root = parse(text);
    ExpectationFile file;
    file.path = path();
    for (const auto& [key_ptr, node_ptr] : in_file_order(root)) {
      const toml::key& key = *key_ptr;
      const toml::node& node = *node_ptr;
      const std::string name(key.str());
      if (name == "expectations") {
        for (const auto& [k, n] : in_file_order(table_of(node, "[expectations]"))) {
          if (k->str() != "description") fail(*k, "unknown key '" + std::string(k->str()) + "' in [expectations] (expected description)");
          file.description = string_of(*n, "[expectations] description");
        }
      } else if (name == "expect") {
        const toml::array* array = node.as_array();
        if (!array || !array->is_array_of_tables()) fail(node, "'expect' must be an array of tables ([[expect]])");
        for (const toml::node& element : *array) {
          file.entries.push_back(read_entry(*element.as_table(), static_cast<int>(file.entries.size()) + 1));
        }
      } else {
        fail(key, "unknown key '" + name + "' (expected [expectations] and [[expect]] tables)");
      }
    }
    if (file.entries.empty()) fail(1, "no [[expect]] table: an expectation file must expect something");
    return file;
  }

 private:
  Expectation read_entry(const toml::table& table, int index) const {
    Expectation e;
    e.index = index;
    e.line = static_cast<int>(table.source().begin.line);
    const std::string where = "[[expect]] #" + std::to_string(index);
    static const std::vector<std::string_view> kKeys{
        "library", "backend", "collective", "redop", "dtype", "mpi_datatype", "placement", "bytes", "min_bytes",
        "max_bytes", "world_size", "min_world_size", "max_world_size", "config", "suite", "metric",
        "deviation", "citation", "note"};
    static const std::vector<std::string_view> kRedops{"sum", "prod", "min", "max", "avg"};
    for (const auto& [key_ptr, node_ptr] : in_file_order(table)) {
      const toml::key& key = *key_ptr;
      const toml::node& node = *node_ptr;
      const std::string name(key.str());
      const std::string what = "'" + name + "' of " + where;
      if (name == "op" || name == "strategy" || name == "device") {
        fail(key, "'" + name + "' is no key of " + where +
                      (name == "op" ? ": say collective (the rows' op column) or redop (the reduction)" : "") +
                      " (expected one of " + join_names(kKeys) + ")");
      }
      if (name == "collective") {
        e.ops = names_of(node, what, "collective", known_collectives());
      } else if (name == "backend") {
        e.backend_patterns = strings_of(node, what);
      } else if (read_selector_key(*this, name, node, where, e)) {
        continue;
      } else if (name == "library") {
        e.libraries = strings_of(node, what);
        for (const auto& pattern : e.libraries) check_library(node, what, pattern);
      } else if (name == "redop") {
        e.redops = names_of(node, what, "redop", kRedops);
      } else if (name == "mpi_datatype") {
        e.mpi_datatypes = strings_of(node, what);
        for (const auto& item : e.mpi_datatypes) {
          if (item.rfind("MPI_", 0) != 0) fail(node, what + ": '" + item + "' is not an MPI datatype name (MPI_...)");
        }
      } else if (name == "metric") {
        e.metric = string_of(node, what);
      } else if (name == "deviation") {
        e.deviations = strings_of(node, what);
        for (const auto& kind : e.deviations) check_kind(node, what, kind);
      } else if (name == "citation") {
        e.citation = string_of(node, what);
        if (blank(e.citation)) fail(node, what + " is blank: cite an upstream issue, or a sentence of the standard");
      } else if (name == "note") {
        e.note = string_of(node, what);
      } else {
        fail(key, "unknown key '" + name + "' in " + where + " (expected one of " + join_names(kKeys) + ")");
      }
    }
    // A waiver without the stack's identity would hide the deviation on every stack.
    if (e.libraries.empty()) fail(e.line, where + " has no library: say which stack (e.g. library = \"Open MPI 4.1.*\")");
    if (e.deviations.empty()) fail(e.line, where + " has no deviation: name the kinds it expects, as the check names them");
    if (e.citation.empty()) fail(e.line, where + " has no citation: an upstream issue, or a sentence of the standard");
    check_selector(*this, e.line, where, e);
    return e;
  }

  // A library pattern names the library: one that starts with a wildcard ("*", "*MPI*") would
  // waive the deviation on stacks nobody measured.
  void check_library(const toml::node& node, const std::string& what, const std::string& pattern) const {
    if (blank(pattern) || pattern.front() == '*' || pattern.front() == '?' || std::isspace(static_cast<unsigned char>(pattern.front()))) {
      fail(node, what + ": '" + pattern + "' does not name a library: start with its name (e.g. \"Open MPI 4.1.*\"), " +
                     "an entry for every library would hide a fault on stacks nobody measured");
    }
  }

  // Only a kind the checks classify may be waived: "wrong value" (what a check says of a failure
  // it cannot classify: a bit flip, a lost update) never, and a misspelt kind is refused here
  // rather than left to look stale.
  void check_kind(const toml::node& node, const std::string& what, const std::string& kind) const {
    if (kind == kUnclassified || kind.rfind(std::string(kUnclassified) + " ", 0) == 0) {
      fail(node, what + ": '" + kind + "' is a failure the check could not classify: it is never waivable");
    }
    if (vocabulary_.empty()) fail(node, what + ": this build has no check that classifies deviations: nothing can be waived");
    if (vocabulary_.count(kind) > 0) return;
    fail(node, what + ": '" + kind + "' is no deviation kind a check names" + nearest(kind) +
                   " (results/expectations/README.md lists them)");
  }

  // "; did you mean 'NaN dropped by min'?" for the known kind closest in edit distance, when it is
  // close (a third of the kind's length or less).
  std::string nearest(const std::string& kind) const {
    size_t best = std::string::npos;
    const std::string* best_kind = nullptr;
    for (const auto& [known, rows] : vocabulary_) {
      const size_t distance = edit_distance(kind, known);
      if (distance < best) {
        best = distance;
        best_kind = &known;
      }
    }
    if (!best_kind || best > std::max<size_t>(1, kind.size() / 3)) return "";
    return "; did you mean '" + *best_kind + "'?";
  }

  const KindRows& vocabulary_ = waivable_kinds();
};

// Whether the row's config holds `key` with one of `values` (any, when `values` is empty).
bool config_in(const Record& record, std::string_view key, const std::vector<std::string>& values) {
  if (values.empty()) return true;
  const auto value = config_value(record.labels.config, key);
  return value && contains(values, *value);
}

bool same_stack(const Expectation& e, const std::string& library, const std::string& backend) {
  // "ring" is the backend ring(mpi): its name, before any bracket; or a glob on the whole spec.
  const std::string backend_name = backend.substr(0, backend.find('('));
  if (!e.backend_patterns.empty() &&
      std::none_of(e.backend_patterns.begin(), e.backend_patterns.end(), [&](const std::string& pattern) {
        return pattern == backend_name || glob_match(pattern, backend);
      })) {
    return false;
  }
  return std::any_of(e.libraries.begin(), e.libraries.end(),
                     [&](const std::string& pattern) { return glob_match(pattern, library); });
}

// "openmpi-4.1.toml #3 (https://...)".
std::string cite(const ExpectationFile& file, const Expectation& e) {
  return file.file_name() + " #" + std::to_string(e.index) + " (" + e.citation + ")";
}

}  // namespace

std::string ExpectationFile::file_name() const {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

InputLimits expectation_limits(double timeout_seconds) {
  InputLimits limits;
  limits.max_bytes = kExpectationsMaxBytes;
  limits.max_line = kExpectationsMaxLine;
  limits.timeout_seconds = timeout_seconds;
  return limits;
}

ExpectationFile parse_expectations(std::string_view text, const std::string& path) { return Loader(path).load(text); }

ExpectationFile load_expectations(const std::string& path, double timeout_seconds) {
  return parse_expectations(read_input_file(path, "expectation file", expectation_limits(timeout_seconds)), path);
}

std::string stack_library(const Labels& labels) {
  std::string words = short_mpi(labels.backend_version.empty() ? labels.mpi_version : labels.backend_version);
  // "Open MPI v4.1.4" -> "Open MPI 4.1.4": a version is digits, however a library prefixes it.
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    const bool word_start = i == 0 || words[i - 1] == ' ';
    if (word_start && words[i] == 'v' && std::isdigit(static_cast<unsigned char>(words[i + 1]))) words.erase(i, 1);
  }
  return words;
}

bool glob_match(std::string_view pattern, std::string_view text) {
  // Iterative matching with one backtrack point (the last '*'): linear in practice, never
  // exponential on hostile patterns.
  size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<std::string> deviation_kinds(std::string_view detail) {
  // Segments "KIND inputs: N wrong (HOW): LIST" separated by "; " (suites/collectives: the wrong
  // row's detail, results/SCHEMA.md); LIST is "KIND: COUNT, KIND: COUNT", where a KIND may hold
  // ", " inside parentheses.
  std::vector<std::string> kinds;
  size_t start = 0;
  while (start <= detail.size()) {
    size_t end = detail.find("; ", start);
    if (end == std::string_view::npos) end = detail.size();
    const std::string_view segment = detail.substr(start, end - start);
    start = end + 2;
    const size_t marker = segment.find(" inputs: ");
    const size_t open = segment.find(" wrong (");
    if (marker == std::string_view::npos || open == std::string_view::npos || marker > open) continue;
    size_t i = open + 7, depth = 0;  // at the '(' of HOW
    for (; i < segment.size(); ++i) {
      if (segment[i] == '(') ++depth;
      if (segment[i] == ')' && --depth == 0) break;
    }
    if (i >= segment.size() || segment.substr(i + 1, 2) != ": ") continue;
    std::string_view list = segment.substr(i + 3);
    size_t item_start = 0;
    depth = 0;
    for (size_t j = 0; j <= list.size(); ++j) {
      const bool at_end = j == list.size();
      if (!at_end && list[j] == '(') ++depth;
      if (!at_end && list[j] == ')' && depth > 0) --depth;
      if (at_end || (depth == 0 && list.substr(j, 2) == ", ")) {
        const std::string_view item = list.substr(item_start, j - item_start);
        const size_t colon = item.rfind(": ");
        if (colon != std::string_view::npos && colon > 0) {
          std::string kind(item.substr(0, colon));
          if (!contains(kinds, kind)) kinds.push_back(std::move(kind));
        }
        item_start = j + 2;
      }
    }
    if (end == detail.size()) break;
  }
  return kinds;
}

ExpectationJudge::ExpectationJudge(std::vector<ExpectationFile> files) : files_(std::move(files)) {
  for (const ExpectationFile& file : files_) {
    for (const Expectation& e : file.entries) {
      tallies_.push_back(Tally{&file, &e, false, 0, 0, std::vector<int64_t>(e.deviations.size()),
                               std::vector<int64_t>(e.deviations.size())});
    }
  }
}

void ExpectationJudge::apply(Record& record) {
  if (record.suite == "expect") return;
  if (record.verdict != Verdict::pass && record.verdict != Verdict::fail && record.verdict != Verdict::xfail) return;
  const std::string library = stack_library(record.labels);
  if (library_.empty() && backend_.empty()) {
    library_ = library;
    backend_ = record.labels.backend;
  }
  std::vector<Tally*> matching;
  for (Tally& t : tallies_) {
    const Expectation& e = *t.entry;
    if (!same_stack(e, library, record.labels.backend)) continue;
    t.this_stack = true;
    if (record.metric != e.metric || !matches(static_cast<const RecordSelector&>(e), record) ||
        !config_in(record, "redop", e.redops) || !config_in(record, "mpi_datatype", e.mpi_datatypes)) {
      continue;
    }
    ++t.selected;
    matching.push_back(&t);
  }
  if (matching.empty()) return;
  const std::string row = row_class(record.labels.dtype, config_value(record.labels.config, "redop").value_or("none"));
  const std::vector<std::string> kinds =
      record.verdict == Verdict::pass ? std::vector<std::string>{} : deviation_kinds(record.detail);
  for (Tally* t : matching) {
    for (size_t k = 0; k < t->entry->deviations.size(); ++k) {
      const std::string& kind = t->entry->deviations[k];
      const auto carriers = waivable_kinds().find(kind);
      const bool showed = contains(kinds, kind);
      if (showed || (carriers != waivable_kinds().end() && carriers->second.count(row) > 0)) ++t->could_show[k];
      if (showed) ++t->showed[k];
    }
  }
  if (record.verdict == Verdict::pass) return;
  if (kinds.empty()) return;  // a failure the check did not classify: not what any entry names
  std::vector<std::string> unexpected, cites;
  for (const std::string& kind : kinds) {
    bool covered = false;
    for (Tally* t : matching) covered = covered || contains(t->entry->deviations, kind);
    if (!covered) unexpected.push_back(kind);
  }
  for (Tally* t : matching) {
    const bool seen = std::any_of(kinds.begin(), kinds.end(),
                                  [&](const std::string& kind) { return contains(t->entry->deviations, kind); });
    if (!seen) continue;
    ++t->seen;
    cites.push_back(cite(*t->file, *t->entry));
  }
  if (unexpected.empty()) {
    if (record.verdict != Verdict::xfail) {
      record.verdict = Verdict::xfail;
      record.detail = "expected: " + joined(cites, "; ") + " | " + record.detail;
    }
    ++xfailed_;
  } else {
    record.verdict = Verdict::fail;
    record.detail = "not expected: " + joined(unexpected) + " | " + record.detail;
  }
}

std::vector<Record> ExpectationJudge::summary() const {
  std::vector<Record> records;
  size_t first = 0;
  for (const ExpectationFile& file : files_) {
    int64_t others = 0;
    for (size_t i = first; i < first + file.entries.size(); ++i) {
      const Tally& t = tallies_[i];
      const Expectation& e = *t.entry;
      if (!t.this_stack) {
        ++others;
        continue;
      }
      Record r;
      r.suite = "expect";
      r.case_id = file.file_name() + "#" + std::to_string(e.index);
      r.metric = "check";
      r.unit = "rows";
      r.value = static_cast<double>(t.seen);
      std::vector<std::string> parts = describe_parts(e);
      if (!e.backend_patterns.empty()) parts.insert(parts.begin(), "backend " + joined(e.backend_patterns, "|"));
      if (!e.redops.empty()) parts.push_back("redop " + joined(e.redops, "|"));
      if (!e.mpi_datatypes.empty()) parts.push_back(joined(e.mpi_datatypes, "|"));
      const std::string what = joined(e.deviations, " / ") + " in " + (parts.empty() ? "every row" : joined(parts));
      std::vector<std::string> stale, carried;
      for (size_t k = 0; k < e.deviations.size(); ++k) {
        if (t.could_show[k] == 0) continue;
        carried.push_back(e.deviations[k]);
        if (t.showed[k] == 0) stale.push_back(e.deviations[k] + " (0 of " + std::to_string(t.could_show[k]) + " rows)");
      }
      if (t.selected == 0 || carried.empty()) {
        r.verdict = Verdict::skip;
        r.detail = t.selected == 0 ? "unused: selects no row of this run (" + what + ")"
                                   : "unused: none of the " + std::to_string(t.selected) +
                                         " rows it selects has a dtype and redop that can show " + what;
      } else if (!stale.empty()) {
        r.verdict = Verdict::xpass;
        r.detail = "XPASS: of the " + std::to_string(t.selected) + " rows it selects, none that could shows " +
                   joined(stale, "; ") + " (" + what + "): the deviation is gone, or the entry is wrong; update " +
                   file.file_name() + " (line " + std::to_string(e.line) + ")";
      } else {
        r.verdict = Verdict::info;
        r.detail = "known deviation, on " + std::to_string(t.seen) + " of " + std::to_string(t.selected) +
                   " selected rows: " + what + "; " + e.citation;
      }
      records.push_back(std::move(r));
    }
    first += file.entries.size();
    if (others > 0) {
      Record r;
      r.suite = "expect";
      r.case_id = file.file_name();
      r.metric = "check";
      r.unit = "entries";
      r.value = static_cast<double>(others);
      r.verdict = Verdict::info;
      r.detail = std::to_string(others) + " of its " + std::to_string(file.entries.size()) +
                 " entries are for another stack (this run: " + (library_.empty() ? "no judged row" : library_ + ", backend " + backend_) + ")";
      records.push_back(std::move(r));
    }
  }
  return records;
}

}  // namespace dts
