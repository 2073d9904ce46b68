// Acceptance profiles: the TOML loader (toml++), the selector matcher, and the judge that turns
// a matching record's value into pass/fail with a detail citing the threshold. Every loader
// error names PATH:LINE, because a profile is edited by hand and reviewed by others.
#include "suites/profiles/profile.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "core/dtype.h"
#include "core/error.h"
#include "core/input_file.h"
#include "results/catalog.h"
#include "results/selector.h"
#include "results/toml_reader.h"

namespace dts {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const std::vector<std::string_view> kStatistics{"value", "min", "p05", "median", "p95", "max"};

bool contains(const std::vector<std::string_view>& items, std::string_view item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

// Exact text for a value handed to the command line.
std::string exact_text(double value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof(text), value);
  return std::string(text, result.ptr);
}

// The [run] keys: the `run` flags a profile may set, by long name ("suites": the positional list),
// each with the TOML type it takes. An allow-list, kept in step with `dtsuite run --help` by
// harness/profile_e2e_test.cpp: every run flag is either here or in kCommandLineOnly.
enum class RunKind { list, specs, size, number, integer, text, boolean, any };
struct RunKey {
  std::string_view name;
  RunKind kind;
};
const std::vector<RunKey> kRunKeys{
    // What runs, where, how often.
    {"suites", RunKind::list}, {"backend", RunKind::text}, {"device", RunKind::text}, {"iters", RunKind::integer},
    {"warmup_iters", RunKind::integer}, {"check", RunKind::integer}, {"timeout", RunKind::number},
    {"seed", RunKind::integer}, {"repeat", RunKind::integer}, {"quick", RunKind::boolean},
    {"chunk-bytes", RunKind::size}, {"fault-rank", RunKind::integer}, {"fault-after", RunKind::integer},
    {"fault-rate", RunKind::number},
    // Collectives.
    {"minbytes", RunKind::size}, {"maxbytes", RunKind::size}, {"stepfactor", RunKind::number},
    {"datatype", RunKind::list}, {"op", RunKind::list}, {"collective", RunKind::list}, {"root", RunKind::integer},
    {"mpi-names", RunKind::text},
    // Training suites (equivalence, scaling).
    {"strategy", RunKind::specs}, {"steps", RunKind::integer}, {"batch", RunKind::integer},
    {"layers", RunKind::integer}, {"width", RunKind::integer}, {"input", RunKind::integer},
    {"classes", RunKind::integer}, {"accumulation", RunKind::integer}, {"microbatches", RunKind::integer},
    {"optimizer", RunKind::list}, {"straggler", RunKind::text},
    // Scaling.
    {"scaling-mode", RunKind::any}, {"rank-batch", RunKind::any}, {"scaling-bytes", RunKind::any},
    // Convergence.
    {"data", RunKind::any}, {"epochs", RunKind::any}, {"base-batch", RunKind::any}, {"base-lr", RunKind::any},
    {"scale", RunKind::any}, {"scan-scales", RunKind::any}, {"warmup-epochs", RunKind::any},
    {"scaled-lr", RunKind::any}, {"sweep", RunKind::any}, {"group-ranks", RunKind::any},
    {"target-accuracy", RunKind::any},
    // Topology.
    {"p2p-bytes", RunKind::any}, {"p2p-sweep", RunKind::any}, {"latency-bytes", RunKind::any},
    {"link-bytes", RunKind::any}, {"link-speed", RunKind::any},
    // Hardware.
    {"gemm-size", RunKind::any}, {"triad-bytes", RunKind::any},
    // Replay (a profile may name a trace to replay, checked, as a workload of its own).
    {"trace", RunKind::any}, {"check-every", RunKind::any},
    // The planner verified.
    {"measurements", RunKind::list}, {"verify", RunKind::any}, {"memory-per-rank", RunKind::any}};

// Run flags that are the command line's alone, each with the reason its refusal gives.
constexpr std::string_view kOutputsAndListeners = "outputs and listeners are command-line decisions, not profile keys";
const std::vector<std::pair<std::string_view, std::string_view>> kCommandLineOnly{
    {"csv", kOutputsAndListeners},
    {"junit", kOutputsAndListeners},
    {"prom", kOutputsAndListeners},
    {"push", kOutputsAndListeners},
    {"metrics-port", kOutputsAndListeners},
    {"metrics-address", kOutputsAndListeners},
    {"record-trace", kOutputsAndListeners},
    {"profile", "a profile cannot name another profile"},
    {"expect", "expectation files (--expect) are the command line's: a profile says what a stack must show, not "
               "which of its deviations are known"},
    {"node", "a rank's node name is the command line's or DTS_NODE's (every rank reads one profile), not a profile key"},
    {"help", "not a profile key"}};

// Reads one profile; every error is "PATH:LINE: reason".
class Loader : public TomlReader {
 public:
  using TomlReader::TomlReader;

  Profile load(std::string_view text) {
    const toml::table root = parse(text);
    Profile profile;
    profile.path = path();
    for (const auto& [key_ptr, node_ptr] : in_file_order(root)) {
      const toml::key& key = *key_ptr;
      const toml::node& node = *node_ptr;
      const std::string name(key.str());
      if (name == "profile") {
        read_profile_table(table_of(node, "[profile]"), profile);
      } else if (name == "run") {
        read_run_table(table_of(node, "[run]"), profile);
      } else if (name == "threshold") {
        for (const toml::table* table : tables_of(node, "threshold")) {
          profile.thresholds.push_back(read_threshold(*table, static_cast<int>(profile.thresholds.size()) + 1));
        }
      } else if (name == "spec") {
        for (const toml::table* table : tables_of(node, "spec")) profile.specs.push_back(read_spec(*table, profile));
      } else if (name == "measured") {
        for (const toml::table* table : tables_of(node, "measured")) profile.measured.push_back(read_measured(*table));
      } else {
        fail(static_cast<int>(key.source().begin.line),
             "unknown key '" + name + "' (expected [profile], [run], [[spec]], [[measured]] and [[threshold]] tables)");
      }
    }
    if (profile.thresholds.empty()) fail(1, "no [[threshold]] table: a profile must judge something");
    // Spec references, once every table is read (a [[spec]] may follow the threshold naming it).
    const auto spec_named = [&](const std::string& spec) -> const SpecFigure* {
      for (const SpecFigure& f : profile.specs) {
        if (f.name == spec) return &f;
      }
      return nullptr;
    };
    for (Threshold& t : profile.thresholds) {
      if (t.spec.empty()) continue;
      const std::string where = "[[threshold]] #" + std::to_string(t.index);
      const SpecFigure* figure = spec_named(t.spec);
      if (!figure) fail(t.line, where + " names spec '" + t.spec + "', which no [[spec]] table defines");
      t.min = *t.fraction * figure->value;
      if (t.max && *t.min > *t.max) {
        fail(t.line, where + ": min " + format_number(*t.min) + " (" + format_number(*t.fraction, "%g") + " of " +
                         figure->name + ") > max " + format_number(*t.max) + ": nothing can pass");
      }
      t.source += " (" + format_number(*t.fraction, "%g") + " of " + figure->name + " " + format_number(figure->value) +
                  " " + figure->unit + ": " + figure->source + ")";
    }
    for (const MeasuredFraction& m : profile.measured) {
      if (!spec_named(m.spec)) fail(m.line, "[[measured]] names spec '" + m.spec + "', which no [[spec]] table defines");
    }
    return profile;
  }

 private:
  void read_profile_table(const toml::table& table, Profile& profile) const {
    for (const auto& [key_ptr, node_ptr] : in_file_order(table)) {
      const toml::key& key = *key_ptr;
      const toml::node& node = *node_ptr;
      const std::string name(key.str());
      if (name == "name") profile.name = string_of(node, "[profile] name");
      else if (name == "description") profile.description = string_of(node, "[profile] description");
      else if (name == "parts") profile.parts = strings_of(node, "[profile] parts");
      else fail(static_cast<int>(key.source().begin.line),
                "unknown key '" + name + "' in [profile] (expected name, description, parts)");
    }
  }

  // [run]: defaults for `run` flags, by the flags' long names. Only the keys of kRunKeys are taken
  // (an allow-list: a flag added later is no profile key until it is listed there); their types
  // are checked here, at their line, and their values by the flag's own checks when the command
  // line applies them.
  void read_run_table(const toml::table& table, Profile& profile) const {
    for (const auto& [key_ptr, node_ptr] : in_file_order(table)) {
      const toml::key& key = *key_ptr;
      const toml::node& node = *node_ptr;
      const std::string flag(key.str());
      const std::string what = "[run] " + flag;
      const auto known = std::find_if(kRunKeys.begin(), kRunKeys.end(), [&](const RunKey& k) { return k.name == flag; });
      if (known == kRunKeys.end()) {
        const auto refused = std::find_if(kCommandLineOnly.begin(), kCommandLineOnly.end(),
                                          [&](const auto& entry) { return entry.first == flag; });
        if (refused != kCommandLineOnly.end()) fail(static_cast<int>(key.source().begin.line), what + ": " + std::string(refused->second));
        fail(static_cast<int>(key.source().begin.line), what + " is not a profile key (suites/profiles/README.md lists them)");
      }
      RunDefault d;
      d.flag = flag;
      d.line = static_cast<int>(node.source().begin.line);
      switch (known->kind) {
        case RunKind::list: {
          // "f32,f16" or ["f32", "f16"]; each item checked against the names the flag accepts.
          for (const auto& entry : strings_of(node, what)) {
            std::stringstream parts(entry);
            for (std::string item; std::getline(parts, item, ',');) d.items.push_back(item);
          }
          for (size_t i = 0; i < d.items.size(); ++i) {
            check_run_item(node, flag, d.items[i]);
            // As on the command line: a repeated item would run (and write) its cases twice.
            if (std::find(d.items.begin(), d.items.begin() + static_cast<std::ptrdiff_t>(i), d.items[i]) !=
                d.items.begin() + static_cast<std::ptrdiff_t>(i)) {
              fail(node, what + " names '" + d.items[i] + "' twice");
            }
          }
          for (const auto& item : d.items) d.value += (d.value.empty() ? "" : ",") + item;
          break;
        }
        case RunKind::specs:
          // Strategy specs hold commas of their own ("hybrid(dp=2,tp=2)"): joined as written and
          // checked whole by the flag's parser (unknown names, layouts, repeats).
          for (const auto& entry : strings_of(node, what)) d.value += (d.value.empty() ? "" : ",") + entry;
          break;
        case RunKind::size:
          bytes_of(node, what);
          d.value = node.is_integer() ? std::to_string(*node.value_exact<int64_t>()) : *node.value_exact<std::string>();
          break;
        case RunKind::number: d.value = exact_text(number_of(node, what)); break;
        case RunKind::integer: d.value = std::to_string(integer_of(node, what)); break;
        case RunKind::text: d.value = string_of(node, what); break;
        case RunKind::boolean: {
          const auto value = node.value_exact<bool>();
          if (!value) fail(node, what + " must be true or false, not " + toml_type_name(node));
          d.value = *value ? "true" : "false";
          break;
        }
        case RunKind::any:
          // A suite's own flag: the text the command line would take, checked by the flag itself.
          if (node.is_array()) {
            for (const auto& entry : strings_of(node, what)) d.value += (d.value.empty() ? "" : ",") + entry;
          } else if (node.is_string()) {
            d.value = string_of(node, what);
          } else if (node.is_integer()) {
            d.value = std::to_string(*node.value_exact<int64_t>());
          } else if (node.is_floating_point()) {
            d.value = exact_text(*node.value_exact<double>());
          } else if (node.is_boolean()) {
            d.value = *node.value_exact<bool>() ? "true" : "false";
          } else {
            fail(node, what + " must be a string, a number or a boolean, not " + toml_type_name(node));
          }
          break;
      }
      if (d.items.empty()) d.items.push_back(d.value);
      profile.run.push_back(std::move(d));
    }
  }

  void check_run_item(const toml::node& node, const std::string& flag, const std::string& item) const {
    const std::string what = "[run] " + flag;
    if (item.empty()) fail(node, "empty item in " + what);
    if (item == "all" && flag != "suites") return;
    try {
      if (flag == "datatype") parse_dtype(item);
      if (flag == "op") parse_reduce_op(item);
    } catch (const Error& e) {
      fail(node, what + ": " + e.what());
    }
    if (flag == "collective" && !contains(known_collectives(), item)) {
      fail(node, "unknown collective '" + item + "' in " + what + " (expected one of " + join_names(known_collectives()) + ", or all)");
    }
    if (flag == "suites" && !contains(known_suites(), item)) {
      fail(node, "unknown suite '" + item + "' in " + what + " (expected one of " + join_names(known_suites()) + ")");
    }
  }

  Threshold read_threshold(const toml::table& table, int index) const {
    Threshold t;
    t.index = index;
    t.line = static_cast<int>(table.source().begin.line);
    const std::string where = "[[threshold]] #" + std::to_string(index);
    static const std::vector<std::string_view> kKeys = [] {
      std::vector<std::string_view> keys{"metric"};
      keys.insert(keys.end(), kSelectorKeys.begin(), kSelectorKeys.end());
      for (std::string_view key : {"min", "max", "statistic", "source", "optional", "spec", "fraction"}) {
        keys.push_back(key);
      }
      return keys;
    }();
    for (const auto& [key_ptr, node_ptr] : in_file_order(table)) {
      const toml::key& key = *key_ptr;
      const toml::node& node = *node_ptr;
      const std::string name(key.str());
      const std::string what = "'" + name + "' of " + where;
      if (read_selector_key(*this, name, node, where, t)) continue;
      if (name == "metric") {
        t.metric = string_of(node, what);
        if (!contains(known_metrics(), t.metric)) {
          fail(node, "unknown metric '" + t.metric + "' in " + where + " (expected one of " + join_names(known_metrics()) + ")");
        }
      } else if (name == "min") {
        t.min = number_of(node, what);
      } else if (name == "max") {
        t.max = number_of(node, what);
      } else if (name == "statistic") {
        if (!node.is_string()) fail(node, what + " must be a string, not " + toml_type_name(node));
        t.statistic = names_of(node, what, "statistic", kStatistics).front();
      } else if (name == "source") {
        t.source = string_of(node, what);
      } else if (name == "optional") {
        t.optional = boolean_of(node, what);
      } else if (name == "spec") {
        t.spec = string_of(node, what);
      } else if (name == "fraction") {
        t.fraction = number_of(node, what);
        if (!(*t.fraction > 0)) fail(node, what + " must be above 0");
      } else {
        fail(key, "unknown key '" + name + "' in " + where + " (expected one of " + join_names(kKeys) + ")");
      }
    }
    if (t.metric.empty()) fail(t.line, where + " has no metric");
    if (t.spec.empty() != !t.fraction) fail(t.line, where + ": spec and fraction go together (min = fraction * the spec's value)");
    if (!t.spec.empty() && t.min) fail(t.line, where + " sets min and spec: min is fraction * the spec's value");
    if (!t.spec.empty()) return finish_threshold(t, where);
    if (!t.min && !t.max) fail(t.line, where + " has no bound: set min, max or both");
    if (t.min && t.max && *t.min > *t.max) {
      fail(t.line, where + ": min " + format_number(*t.min) + " > max " + format_number(*t.max) + ": nothing can pass");
    }
    return finish_threshold(t, where);
  }

  // The checks every threshold gets, its min from a spec or not (load() sets a spec's min once
  // every [[spec]] is read, and checks it against max then).
  Threshold finish_threshold(Threshold& t, const std::string& where) const {
    check_selector(*this, t.line, where, t);
    if (t.source.empty()) fail(t.line, where + " has no source: say where the number comes from");
    return t;
  }

  // [[NAME]] as an array of tables, each table in file order.
  std::vector<const toml::table*> tables_of(const toml::node& node, const std::string& name) const {
    const toml::array* array = node.as_array();
    if (!array || !array->is_array_of_tables()) fail(node, "'" + name + "' must be an array of tables ([[" + name + "]])");
    std::vector<const toml::table*> tables;
    for (const toml::node& element : *array) tables.push_back(element.as_table());
    return tables;
  }

  SpecFigure read_spec(const toml::table& table, const Profile& profile) const {
    SpecFigure f;
    f.line = static_cast<int>(table.source().begin.line);
    const std::string where = "[[spec]] at line " + std::to_string(f.line);
    bool has_value = false;
    for (const auto& [key_ptr, node_ptr] : in_file_order(table)) {
      const std::string name(key_ptr->str());
      const std::string what = "'" + name + "' of " + where;
      if (name == "name") f.name = string_of(*node_ptr, what);
      else if (name == "value") {
        f.value = number_of(*node_ptr, what);
        has_value = true;
        if (!(f.value > 0)) fail(*node_ptr, what + " must be above 0");
      } else if (name == "unit") f.unit = string_of(*node_ptr, what);
      else if (name == "source") f.source = string_of(*node_ptr, what);
      else fail(*key_ptr, "unknown key '" + name + "' in " + where + " (expected name, value, unit, source)");
    }
    if (f.name.empty() || !has_value || f.unit.empty()) fail(f.line, where + " needs name, value and unit");
    if (f.source.empty()) fail(f.line, where + " (" + f.name + ") has no source: name the datasheet");
    for (const SpecFigure& other : profile.specs) {
      if (other.name == f.name) fail(f.line, where + ": spec '" + f.name + "' is defined twice (also line " + std::to_string(other.line) + ")");
    }
    return f;
  }

  MeasuredFraction read_measured(const toml::table& table) const {
    MeasuredFraction m;
    m.line = static_cast<int>(table.source().begin.line);
    const std::string where = "[[measured]] at line " + std::to_string(m.line);
    bool has_fraction = false;
    for (const auto& [key_ptr, node_ptr] : in_file_order(table)) {
      const std::string name(key_ptr->str());
      const std::string what = "'" + name + "' of " + where;
      if (name == "spec") m.spec = string_of(*node_ptr, what);
      else if (name == "fraction") {
        m.fraction = number_of(*node_ptr, what);
        has_fraction = true;
        if (!(m.fraction > 0)) fail(*node_ptr, what + " must be above 0");
      } else if (name == "on") m.on = string_of(*node_ptr, what);
      else if (name == "source") m.source = string_of(*node_ptr, what);
      else fail(*key_ptr, "unknown key '" + name + "' in " + where + " (expected spec, fraction, on, source)");
    }
    if (m.spec.empty() || !has_fraction || m.on.empty() || m.source.empty()) {
      fail(m.line, where + " needs spec, fraction, on (the part measured) and source");
    }
    return m;
  }
};

// "busbw of all_reduce, f32, bytes >= 268435456": what a threshold is about, for summaries.
std::string describe(const Threshold& t) {
  std::string text = t.metric;
  const std::vector<std::string> parts = describe_parts(t);
  for (size_t i = 0; i < parts.size(); ++i) text += (i == 0 ? " of " : ", ") + parts[i];
  if (t.statistic != "value") text += "; statistic " + t.statistic;
  if (t.min) text += "; min " + format_number(*t.min);
  if (t.max) text += "; max " + format_number(*t.max);
  return text;
}

// The number a threshold judges, and how the citation names it (" (max of 10)" for a statistic).
std::pair<double, std::string> judged_value(const Threshold& t, const Record& record) {
  const Stats& s = record.stats;
  if (t.statistic == "value" || s.n == 0) return {record.value, ""};
  const double v = t.statistic == "min"    ? s.min
                   : t.statistic == "p05"  ? s.p05
                   : t.statistic == "median" ? s.median
                   : t.statistic == "p95"  ? s.p95
                                           : s.max;
  return {v, " (" + t.statistic + " of " + std::to_string(s.n) + ")"};
}

}  // namespace

const std::vector<std::string_view>& known_metrics() {
  static const std::vector<std::string> names = catalog_metrics();
  static const std::vector<std::string_view> metrics(names.begin(), names.end());
  return metrics;
}

std::string Profile::file_name() const {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Profile parse_profile(std::string_view text, const std::string& path) { return Loader(path).load(text); }

InputLimits profile_limits() {
  InputLimits limits;
  limits.max_bytes = kProfileMaxBytes;
  limits.max_line = kProfileMaxLine;
  return limits;
}

BuiltinProfile choose_builtin_profile(const std::string& part) {
  const auto lower = [](std::string text) {
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
  };
  const std::string wanted = lower(part);
  std::vector<BuiltinProfile> chosen;
  std::string known;
  for (const BuiltinProfile& builtin : builtin_profiles()) {
    const Profile profile = parse_profile(builtin.text, std::string(builtin.file_name));
    for (const std::string& name : profile.parts) {
      known += (known.empty() ? "" : ", ") + std::string(builtin.file_name) + ": '" + name + "'";
    }
    const bool mine = std::any_of(profile.parts.begin(), profile.parts.end(),
                                  [&](const std::string& name) { return wanted == lower(name); });
    if (mine) chosen.push_back(builtin);
  }
  if (chosen.size() == 1) return chosen.front();
  if (chosen.empty()) {
    throw Error(Error::Kind::invalid_argument, "--profile auto: no shipped profile is for '" + part +
                                                   "' (their parts: " + known + "); name one with --profile FILE");
  }
  std::string names;
  for (const BuiltinProfile& b : chosen) names += (names.empty() ? "" : ", ") + std::string(b.file_name);
  throw Error(Error::Kind::invalid_argument,
              "--profile auto: '" + part + "' is a part of more than one shipped profile (" + names + "); name one with --profile FILE");
}

Profile load_profile(const std::string& path) { return parse_profile(read_input_file(path, "profile", profile_limits()), path); }

bool matches(const Threshold& t, const Record& record) {
  return record.metric == t.metric && matches(static_cast<const RecordSelector&>(t), record);
}

ProfileJudge::ProfileJudge(Profile profile)
    : profile_(std::move(profile)), matched_(profile_.thresholds.size()), failed_(profile_.thresholds.size()),
      first_failure_(profile_.thresholds.size()) {}

void ProfileJudge::apply(Record& record) {
  // The profile's own summary records are not judged again.
  if (record.verdict == Verdict::skip || record.verdict == Verdict::timeout || record.suite == "profile") return;
  std::string cites;
  bool any_matched = false, any_failed = false;
  double bound = kNaN;
  const std::string unit = record.unit.empty() ? "" : " " + record.unit;
  for (size_t i = 0; i < profile_.thresholds.size(); ++i) {
    const Threshold& t = profile_.thresholds[i];
    if (!matches(t, record)) continue;
    any_matched = true;
    ++matched_[i];
    const std::string citation = profile_.file_name() + " [[threshold]] #" + std::to_string(t.index);
    const auto [judged, statistic] = judged_value(t, record);
    const std::string value = record.metric + statistic + " " + format_number(judged) + unit;
    std::string text;
    double violated = kNaN;
    // NaN compares false both ways: an unmeasurable value fails rather than slipping through.
    if (t.min && !(judged >= *t.min)) {
      violated = *t.min;
      text = value + " < " + format_number(*t.min) + " required by " + citation + ": " + t.source;
    } else if (t.max && !(judged <= *t.max)) {
      violated = *t.max;
      text = value + " > " + format_number(*t.max) + " allowed by " + citation + ": " + t.source;
    }
    if (std::isnan(judged)) {
      text = record.metric + statistic + " nan (not measured) cannot meet " + citation + ": " + t.source;
    }
    if (!text.empty()) {
      ++failed_[i];
      if (first_failure_[i].empty()) {
        first_failure_[i] = record.case_id + (record.labels.placement.empty() ? "" : " " + record.labels.placement) +
                            ": " + text;
      }
      if (!any_failed) bound = violated;
      any_failed = true;
    } else {
      const std::string met = t.min && t.max   ? "within [" + format_number(*t.min) + ", " + format_number(*t.max) + "]"
                              : t.min           ? ">= " + format_number(*t.min)
                                                : "<= " + format_number(*t.max);
      text = value + " " + met + " (" + citation + ")";
      if (std::isnan(bound) && !any_failed) bound = t.min ? *t.min : *t.max;
    }
    cites += (cites.empty() ? "" : "; ") + text;
  }
  if (!any_matched) return;
  // A suite's own failure keeps its threshold unless the profile failed the record too.
  if (any_failed || record.verdict != Verdict::fail) record.threshold = bound;
  if (any_failed) record.verdict = Verdict::fail;
  else if (record.verdict == Verdict::info) record.verdict = Verdict::pass;
  record.detail = cites + (record.detail.empty() ? "" : " | " + record.detail);
}

std::vector<Record> ProfileJudge::summary() const {
  std::vector<Record> records;
  std::string stem = profile_.file_name();
  if (const size_t dot = stem.rfind('.'); dot != std::string::npos && dot > 0) stem = stem.substr(0, dot);
  for (size_t i = 0; i < profile_.thresholds.size(); ++i) {
    const Threshold& t = profile_.thresholds[i];
    Record r;
    r.suite = "profile";
    r.case_id = stem + "/" + std::to_string(t.index) + "/" + t.metric;
    r.metric = "check";
    if (t.ops.size() == 1) r.labels.op = t.ops[0];
    if (t.dtypes.size() == 1) r.labels.dtype = t.dtypes[0];
    if (t.strategies.size() == 1) r.labels.strategy = t.strategies[0];
    const std::string head = profile_.file_name() + " [[threshold]] #" + std::to_string(t.index) + " (" + describe(t) + ")";
    if (matched_[i] == 0) {
      r.value = 0;
      r.verdict = t.optional ? Verdict::skip : Verdict::fail;
      r.detail = head + " matched no record: this run measured nothing it is about" +
                 (t.optional ? " (optional)" : "") + ": " + t.source;
    } else if (failed_[i] > 0) {
      r.value = 0;
      r.verdict = Verdict::fail;
      r.detail = head + ": " + std::to_string(failed_[i]) + " of " + std::to_string(matched_[i]) +
                 (matched_[i] == 1 ? " record fails" : " records fail") + "; first: " + first_failure_[i];
    } else {
      r.value = 1;
      r.verdict = Verdict::pass;
      r.detail = head + ": " + std::to_string(matched_[i]) + (matched_[i] == 1 ? " record passes" : " records pass");
    }
    records.push_back(std::move(r));
  }
  return records;
}

std::vector<std::string_view> profile_run_keys() {
  std::vector<std::string_view> names;
  for (const RunKey& key : kRunKeys) names.push_back(key.name);
  return names;
}

std::vector<std::string_view> command_line_only_run_flags() {
  std::vector<std::string_view> names;
  for (const auto& entry : kCommandLineOnly) names.push_back(entry.first);
  return names;
}

}  // namespace dts
