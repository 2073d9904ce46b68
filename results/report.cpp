// `dtsuite report`: groups records into plots (group_results), has gnuplot draw each as SVG
// (run_gnuplot), and writes one HTML page with everything inline (render_html). The page fetches
// nothing when viewed: the SVG, the CSS and the text are all in the file.
#include "results/report.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "core/child_process.h"
#include "core/error.h"
#include "core/ranges.h"
#include "results/catalog.h"
#include "results/compare.h"
#include "results/output_paths.h"

namespace dts {

namespace {

namespace fs = std::filesystem;

// Distinguishable colours (the "tab10" set), one per stack.
const std::vector<std::string> kColours{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
const std::vector<std::string> kVerdicts{"pass", "fail", "timeout", "xpass", "xfail", "skip", "info"};
// A plot whose largest value exceeds its smallest by more than this gets a log y axis.
constexpr double kLogAxisSpread = 100;
// At most this many failing records are listed; the rest are counted.
constexpr size_t kMaxFailuresListed = 500;
// gnuplot takes a number of magnitude DBL_MAX/2 (about 9e307) or more for undefined, and fails a
// plot whose every point is undefined ("all points y value undefined"); a tenth of that leaves
// room for its axis arithmetic.
constexpr double kLargestDrawable = 9e306;

// A value gnuplot can draw, after the plot's scaling; the note on those left out.
bool drawable(double value) { return std::isfinite(value) && std::fabs(value) <= kLargestDrawable; }
const std::string kUndrawable = "without a finite value gnuplot can draw (|value| at most 9e306) are not drawn";

bool measured(const Record& r) { return r.verdict != Verdict::skip && r.verdict != Verdict::timeout; }

// Ranks a strategy record is about: the ranks that took part in its case (world_size; the job's
// is job_size), which rows that carry `job=` say. Older rows said the job's size there, so for
// them the config's dp= (their sub-world's data-parallel degree) stands in.
double ranks_of(const Record& r) {
  const std::string dp = config_value(r.labels.config, "dp").value_or("");
  if (!config_value(r.labels.config, "job") && !dp.empty()) {
    try {
      return std::stod(dp);
    } catch (const std::exception&) {
    }
  }
  return r.labels.world_size;
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string short_device(const std::string& device) {
  constexpr size_t kMax = 32;  // keeps a legend entry on one line beside its neighbours
  return device.size() <= kMax ? device : device.substr(0, kMax - 3) + "...";
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The job's size, not the row's: a run's sub-world cases (world_size 1..N, job=N) belong to the
// stack of its whole-job rows.
std::string stack_identity(const std::string& backend, const std::string& device, int job) {
  return backend + '\n' + device + '\n' + std::to_string(job);
}
std::string stack_identity(const Record& r) { return stack_identity(r.labels.backend, r.labels.device, job_size(r)); }

// Collects records into series keyed by (stack, variant name) and x, then reduces each x to the
// median of its values.
class SeriesBuilder {
 public:
  void add(int stack, const std::string& variant, double x, double y) { values_[{stack, variant}][x].push_back(y); }
  bool empty() const { return values_.empty(); }

  // Series in (stack, variant) order; the variant (dtype, strategy) is named in the legend.
  std::vector<PlotSeries> build(const std::vector<ReportStack>& stacks) const {
    std::set<std::string> variants;
    for (const auto& [key, points] : values_) variants.insert(key.second);
    std::vector<PlotSeries> series;
    for (const auto& [key, points] : values_) {
      PlotSeries s;
      s.stack = key.first;
      s.variant = static_cast<int>(std::distance(variants.begin(), variants.find(key.second)));
      s.label = stacks[static_cast<size_t>(key.first)].label;
      if (!key.second.empty()) s.label += " | " + key.second;
      for (const auto& [x, ys] : points) s.points.push_back({x, median_of(ys)});
      series.push_back(std::move(s));
    }
    return series;
  }

 private:
  std::map<std::pair<int, std::string>, std::map<double, std::vector<double>>> values_;
};

std::string count_note(int64_t count, const std::string& what) {
  if (count == 0) return {};
  return std::to_string(count) + (count == 1 ? " record " : " records ") + what + ".";
}

void append_note(std::string& note, const std::string& text) {
  if (text.empty()) return;
  note += (note.empty() ? "" : " ") + text;
}

using StackIndex = std::map<std::pair<size_t, std::string>, int>;  // (file, stack identity) -> stack

std::string replace_split(std::string text, const std::string& value) {
  const std::string token = "{split}";
  for (size_t at = text.find(token); at != std::string::npos; at = text.find(token, at + value.size())) {
    text.replace(at, token.size(), value);
  }
  return text;
}

// x of a record under `spec`, or false when it has none.
bool x_of(const PlotSpec& spec, const Record& r, double& x) {
  switch (spec.x) {
    case PlotSpec::X::bytes:
      x = static_cast<double>(r.labels.bytes);
      return r.labels.bytes >= 0 && (spec.max_bytes < 0 || r.labels.bytes <= spec.max_bytes);
    case PlotSpec::X::ranks:
      x = ranks_of(r);
      return x > 0;
    case PlotSpec::X::metric:
      return false;  // from another record: suite_plots looks it up
    case PlotSpec::X::config: {
      const std::string text = config_value(r.labels.config, spec.x_key).value_or("");
      if (text.empty()) return false;
      try {
        x = std::stod(text);
      } catch (const std::exception&) {
        return false;
      }
      return drawable(x);
    }
  }
  return false;
}

// One suite's plots of one kind: `metric` against x, one plot per value of `split` (in the order
// the values first appear, which is the suite's plan order), one series per stack and variant.
std::vector<Plot> suite_plots(const std::vector<ResultsFile>& files, const StackIndex& stack_of,
                              const std::vector<ReportStack>& stacks, const std::string& suite, const PlotSpec& spec) {
  const bool by_bytes = spec.x == PlotSpec::X::bytes;
  const auto wanted = [&](const Record& r) {
    if (r.suite != suite || r.metric != spec.metric || !measured(r)) return false;
    for (const auto& [key, value] : spec.exclude) {
      if (record_key(r, key) == value) return false;
    }
    return true;
  };
  std::vector<std::string> splits;
  for (const auto& file : files) {
    for (const Record& r : file.records) {
      if (!wanted(r)) continue;
      const std::string value = spec.split.empty() ? "" : record_key(r, spec.split);
      if (std::find(splits.begin(), splits.end(), value) == splits.end()) splits.push_back(value);
    }
  }
  std::vector<Plot> plots;
  if (!spec.y_key.empty()) {
    // Heat maps: one per split value and stack, the median of the records at each (x, y).
    for (const std::string& split : splits) {
      std::map<int, std::map<std::pair<double, double>, std::vector<double>>> at;  // stack -> (x, y) -> values
      int64_t no_xy = 0, not_finite = 0;
      for (size_t f = 0; f < files.size(); ++f) {
        for (const Record& r : files[f].records) {
          if (!wanted(r) || (!spec.split.empty() && record_key(r, spec.split) != split)) continue;
          double x = 0, y = 0;
          PlotSpec y_spec = spec;
          y_spec.x_key = spec.y_key;
          if (!x_of(spec, r, x) || !x_of(y_spec, r, y)) {
            ++no_xy;
            continue;
          }
          if (!drawable(r.value / spec.y_scale)) {
            ++not_finite;
            continue;
          }
          at[stack_of.at({f, stack_identity(r)})][{x, y}].push_back(r.value);
        }
      }
      for (const auto& [stack, cells] : at) {
        Plot p;
        p.id = replace_split(spec.id, split) + (at.size() > 1 ? "-s" + std::to_string(stack) : "");
        p.title = replace_split(spec.title, split) + " | " + stacks[static_cast<size_t>(stack)].label;
        p.x_label = spec.x_label;
        p.y_label = spec.y_label;
        p.y_scale = spec.y_scale;
        for (const auto& [xy, values] : cells) p.cells.push_back({xy.first, xy.second, median_of(values)});
        append_note(p.note, count_note(no_xy, "without " + spec.x_key + " and " + spec.y_key + " are not drawn"));
        append_note(p.note, count_note(not_finite, kUndrawable));
        plots.push_back(std::move(p));
      }
    }
    return plots;
  }
  // X::metric: the x of each (file, case, config, repetition), from its record of x_metric.
  std::map<std::tuple<size_t, std::string, std::string, int>, double> x_values;
  if (spec.x == PlotSpec::X::metric) {
    for (size_t f = 0; f < files.size(); ++f) {
      for (const Record& r : files[f].records) {
        if (r.suite == suite && r.metric == spec.x_metric && measured(r)) {
          x_values[{f, r.case_id, r.labels.config, r.repetition}] = r.value;
        }
      }
    }
  }
  for (const std::string& split : splits) {
    SeriesBuilder builder;
    int64_t zero_bytes = 0, non_positive = 0, not_finite = 0, no_x = 0;
    std::map<double, std::set<double>> bounds_at;  // thresholds of the drawn cases at each x
    bool unbounded = false;
    for (size_t f = 0; f < files.size(); ++f) {
      for (const Record& r : files[f].records) {
        if (!wanted(r) || (!spec.split.empty() && record_key(r, spec.split) != split)) continue;
        double x = 0;
        if (spec.x == PlotSpec::X::metric) {
          const auto found = x_values.find({f, r.case_id, r.labels.config, r.repetition});
          if (found == x_values.end() || !drawable(found->second / spec.x_scale)) {
            ++no_x;
            continue;
          }
          x = found->second;
        } else if (!x_of(spec, r, x)) {
          if (!by_bytes) ++no_x;
          continue;
        }
        if (by_bytes && r.labels.bytes == 0) {
          ++zero_bytes;
          continue;
        }
        if (!drawable(r.value / spec.y_scale)) {
          ++not_finite;
          continue;
        }
        // A log axis cannot show 0: an op too fast for the clock, or an exact result.
        if ((by_bytes || spec.log_y) && r.value <= 0) {
          ++non_positive;
          continue;
        }
        if (drawable(r.threshold / spec.y_scale) && (!spec.log_y || r.threshold > 0)) bounds_at[x].insert(r.threshold);
        else unbounded = true;
        std::string variant;
        for (const std::string& key : spec.series) {
          const std::string value = record_key(r, key);
          if (!value.empty()) variant += (variant.empty() ? "" : "/") + value;
        }
        builder.add(stack_of.at({f, stack_identity(r)}), variant, x, r.value);
      }
    }
    if (builder.empty()) continue;
    Plot p;
    p.id = replace_split(spec.id, split);
    p.title = replace_split(spec.title, split);
    p.x_label = spec.x_label;
    p.y_label = spec.y_label;
    p.y_scale = spec.y_scale;
    p.x_scale = spec.x == PlotSpec::X::metric ? spec.x_scale : 1;
    p.diagonal = spec.diagonal;
    p.log_x = by_bytes;
    p.log_y = spec.log_y;
    p.series = builder.build(stacks);
    if (by_bytes) {
      // Sizes span decades; when the values do too, a linear axis flattens the small sizes (or
      // one slow outlier flattens the rest), so the y axis turns logarithmic.
      double y_lo = INFINITY, y_hi = 0;
      for (const auto& series : p.series) {
        for (const auto& point : series.points) {
          if (point.y > 0) y_lo = std::min(y_lo, point.y);
          y_hi = std::max(y_hi, point.y);
        }
      }
      p.log_y = y_hi > kLogAxisSpread * y_lo;
    }
    if (spec.draw_threshold) {
      const bool one_bound_per_x = !unbounded && std::all_of(bounds_at.begin(), bounds_at.end(),
                                                                 [](const auto& at) { return at.second.size() == 1; });
      if (one_bound_per_x && !bounds_at.empty()) {
        // Every case at an x was judged against the same bound: draw it, so the margin is visible.
        PlotSeries bound;
        bound.label = "threshold";
        for (const auto& [x, ys] : bounds_at) bound.points.push_back({x, *ys.begin()});
        p.series.push_back(std::move(bound));
      } else if (!bounds_at.empty()) {
        append_note(p.note, "The cases' thresholds differ (by optimizer, strategy or stack); each row's is in the CSV.");
      }
    }
    append_note(p.note, count_note(zero_bytes, "of 0 bytes cannot be drawn on the log size axis"));
    append_note(p.note, count_note(non_positive, by_bytes ? "with a value of 0 are not drawn"
                                                          : "equal to 0 (exact) cannot be drawn on the log axis"));
    append_note(p.note, count_note(not_finite, kUndrawable));
    append_note(p.note, count_note(no_x, "without the x value (" + spec.x_label + ") are not drawn"));
    plots.push_back(std::move(p));
  }
  return plots;
}


// A gnuplot single-quoted string: only the quote itself needs escaping (doubled).
std::string gnuplot_quote(const std::string& text) {
  std::string out = "'";
  for (char ch : text) {
    if (ch == '\'') out += "''";
    else if (ch == '\n' || ch == '\r') out += ' ';
    else out += ch;
  }
  return out + "'";
}

// Tics on a log2 size axis, labelled as the command line writes sizes (16, 1K, 256M).
std::string size_tics(double lo, double hi) {
  const int first = static_cast<int>(std::floor(std::log2(lo)));
  const int last = static_cast<int>(std::ceil(std::log2(hi)));
  const int step = last - first > 16 ? 4 : 2;  // about 8 labels across the axis
  std::string tics;
  for (int e = first - first % step; e <= last; e += step) {
    if (e < 0) continue;
    static const char* kSuffix[] = {"", "K", "M", "G", "T"};
    const int unit = std::min(e / 10, 4);
    const std::string label = std::to_string(int64_t{1} << (e - unit * 10)) + kSuffix[unit];
    tics += (tics.empty() ? "" : ", ") + gnuplot_quote(label) + " " + format_number(std::ldexp(1.0, e), "%.17g");
  }
  return tics;
}

// Replaces every element id `X` of gnuplot's SVG (and its references '#X', "#X", #X)) with
// `prefix-X`: every plot defines gpPt0.. and gnuplot_canvas, and ids must be unique in a page.
std::string prefix_ids(std::string svg, const std::string& prefix) {
  std::set<std::string> ids;
  for (size_t at = svg.find("id="); at != std::string::npos; at = svg.find("id=", at + 3)) {
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(svg[at - 1])) || svg[at - 1] == '_')) continue;
    const char quote = at + 3 < svg.size() ? svg[at + 3] : 0;
    if (quote != '\'' && quote != '"') continue;
    const size_t end = svg.find(quote, at + 4);
    if (end == std::string::npos) break;
    ids.insert(svg.substr(at + 4, end - at - 4));
  }
  const auto replace_all = [&](const std::string& from, const std::string& to) {
    for (size_t at = svg.find(from); at != std::string::npos; at = svg.find(from, at + to.size())) {
      svg.replace(at, from.size(), to);
    }
  };
  for (const std::string& id : ids) {
    for (const char* q : {"'", "\""}) {
      replace_all(std::string("id=") + q + id + q, std::string("id=") + q + prefix + "-" + id + q);
      replace_all(std::string(q) + "#" + id + q, std::string(q) + "#" + prefix + "-" + id + q);
    }
    replace_all("#" + id + ")", "#" + prefix + "-" + id + ")");
  }
  return svg;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A temporary folder, removed when this goes out of scope.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "dtsuite-report-XXXXXX").string();
    if (!mkdtemp(pattern.data())) {
      throw Error(Error::Kind::io, "cannot make a temporary folder for gnuplot: " + std::string(std::strerror(errno)));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Verdicts a case's outcome can take, least to most severe; info records are not judged.
int severity(Verdict verdict) {
  switch (verdict) {
    case Verdict::pass: return 0;
    case Verdict::skip: return 1;
    case Verdict::xfail: return 2;  // a known deviation: worse than a pass, not a new failure
    case Verdict::fail: return 3;
    case Verdict::xpass: return 4;
    case Verdict::timeout: return 5;
    case Verdict::info: return -1;
  }
  return -1;
}

// The conformance matrix: the collectives suite's records by collective, dtype and reduction op
// (the record's labels, and `redop` of its config: `none` for the data movement collectives),
// each cell the worst verdict over the rest (sizes, placements, roots) per stack.
void find_conformance(const std::vector<ResultsFile>& files, const StackIndex& stack_of, ReportData& data) {
  if (data.stacks.size() < 2) return;
  std::vector<std::pair<std::string, std::string>> rows;  // (collective, dtype) as first seen
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> ops_of;  // in plan order
  std::map<std::tuple<std::string, std::string, std::string, int>, Verdict> worst;
  std::set<int> stacks;
  for (size_t f = 0; f < files.size(); ++f) {
    for (const Record& r : files[f].records) {
      if (r.suite != "collectives" || severity(r.verdict) < 0 || r.labels.op.empty() || r.labels.dtype.empty()) continue;
      const std::pair<std::string, std::string> row{r.labels.op, r.labels.dtype};
      const std::string op = config_value(r.labels.config, "redop").value_or("none");
      auto [ops, added] = ops_of.try_emplace(row);
      if (added) rows.push_back(row);
      if (std::find(ops->second.begin(), ops->second.end(), op) == ops->second.end()) ops->second.push_back(op);
      const int stack = stack_of.at({f, stack_identity(r)});
      stacks.insert(stack);
      auto [at, first] = worst.try_emplace({row.first, row.second, op, stack}, r.verdict);
      if (!first && severity(r.verdict) > severity(at->second)) at->second = r.verdict;
    }
  }
  if (stacks.size() < 2) return;
  data.conformance_stacks.assign(stacks.begin(), stacks.end());
  for (const auto& row : rows) {
    ConformanceRow out{row.first, row.second, {}};
    for (int stack : data.conformance_stacks) {
      std::vector<std::pair<std::string, std::string>> cell;
      for (const std::string& op : ops_of[row]) {
        const auto it = worst.find({row.first, row.second, op, stack});
        if (it != worst.end()) cell.emplace_back(op, std::string(name(it->second)));
      }
      out.cells.push_back(std::move(cell));
    }
    data.conformance.push_back(std::move(out));
  }
}

// The cross-stack table: each case's outcome per stack, and the cases whose outcomes differ.
void find_cross_stack_differences(const std::vector<ResultsFile>& files, const StackIndex& stack_of, ReportData& data) {
  if (data.stacks.size() < 2) return;
  struct Worst {
    int severity = -1;
    CaseOutcome outcome;
  };
  std::vector<std::pair<std::string, std::string>> order;  // (suite, case) as first seen
  std::map<std::pair<std::string, std::string>, std::map<int, Worst>> outcomes;
  for (size_t f = 0; f < files.size(); ++f) {
    for (const Record& r : files[f].records) {
      const int level = severity(r.verdict);
      if (level < 0) continue;
      const auto key = std::make_pair(r.suite, r.case_id);
      auto [at, added] = outcomes.try_emplace(key);
      if (added) order.push_back(key);
      Worst& worst = at->second[stack_of.at({f, stack_identity(r)})];
      if (level <= worst.severity) continue;
      worst.severity = level;
      worst.outcome.verdict = std::string(name(r.verdict));
      worst.outcome.detail = r.metric + (r.labels.placement.empty() ? "" : " " + r.labels.placement) +
                             (r.detail.empty() ? "" : ": " + r.detail);
    }
  }
  std::set<int> columns;
  std::vector<std::pair<std::pair<std::string, std::string>, std::map<int, Worst>*>> differing;
  for (const auto& key : order) {
    auto& by_stack = outcomes[key];
    if (by_stack.size() < 2) continue;  // a case one stack ran is compared with nothing
    const CaseOutcome& first = by_stack.begin()->second.outcome;
    bool differs = false;
    for (const auto& [stack, worst] : by_stack) {
      const bool judged_alike = worst.outcome.verdict == first.verdict;
      differs = differs || !judged_alike || (first.verdict != "pass" && worst.outcome.detail != first.detail);
    }
    if (!differs) continue;
    for (const auto& [stack, worst] : by_stack) columns.insert(stack);
    differing.emplace_back(key, &by_stack);
  }
  data.cross_stacks.assign(columns.begin(), columns.end());
  for (const auto& [key, by_stack] : differing) {
    CrossStackRow row{key.first, key.second, {}};
    for (int stack : data.cross_stacks) {
      const auto it = by_stack->find(stack);
      row.outcomes.push_back(it == by_stack->end() ? CaseOutcome{} : it->second.outcome);
    }
    data.cross_stack.push_back(std::move(row));
  }
}

}  // namespace

std::string escape_html(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : printable(text, true)) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

namespace {

// The most ranks a results file's `ranks=0-2,5` is read as: a bad file must not allocate without
// bound (parse_ranges leaves a piece reaching past it out).
constexpr int kMostRanks = 1 << 20;

}  // namespace

ReportData group_results(const std::vector<ResultsFile>& files) {
  ReportData data;
  // Stacks: (file, backend/device/job size), numbered in the order they first appear.
  StackIndex stack_of;
  std::map<std::string, std::set<size_t>> files_of_identity;
  for (size_t f = 0; f < files.size(); ++f) {
    data.inputs.push_back(files[f].path);
    for (const Record& r : files[f].records) {
      const std::string identity = stack_identity(r);
      files_of_identity[identity].insert(f);
      if (stack_of.count({f, identity})) continue;
      stack_of[{f, identity}] = static_cast<int>(data.stacks.size());
      ReportStack s;
      s.backend = r.labels.backend;
      s.device = r.labels.device;
      s.world_size = job_size(r);
      s.backend_version = r.labels.backend_version;
      s.mpi_version = r.labels.mpi_version;
      s.host = r.labels.host;
      s.run_id = r.run_id;
      s.file = f;
      data.stacks.push_back(std::move(s));
    }
  }
  // One backend, device and size in several files: told apart by the MPI library where theirs
  // differ (the same build against Open MPI and against MPICH), else by the file's name.
  std::map<std::string, std::set<std::string>> libraries_of_identity;
  for (const ReportStack& s : data.stacks) {
    libraries_of_identity[stack_identity(s.backend, s.device, s.world_size)].insert(short_mpi(s.mpi_version));
  }
  for (ReportStack& s : data.stacks) {
    s.label = s.backend + " | " + short_device(s.device) + " | " + std::to_string(s.world_size) +
              (s.world_size == 1 ? " rank" : " ranks");
    const std::string identity = stack_identity(s.backend, s.device, s.world_size);
    if (files_of_identity[identity].size() < 2) continue;
    s.label += " | " + (libraries_of_identity[identity].size() > 1 ? short_mpi(s.mpi_version) : base_name(files[s.file].path));
  }

  // Verdicts by stack and suite, and the failures.
  std::set<std::string> per_rank_suites;  // whose records are one rank's figure each
  for (const SuiteInfo& info : suite_catalog()) {
    if (info.per_rank_figures) per_rank_suites.insert(info.name);
  }
  std::map<std::pair<int, std::string>, VerdictCounts> counts;
  for (size_t f = 0; f < files.size(); ++f) {
    for (const Record& r : files[f].records) {
      const int stack = stack_of.at({f, stack_identity(r)});
      VerdictCounts& c = counts[{stack, r.suite}];
      c.stack = stack;
      c.suite = r.suite;
      ++c.by_verdict[std::string(name(r.verdict))];
      if (is_failure(r.verdict)) data.failures.emplace_back(stack, r);
      if (r.suite == "profile") data.profile_checks.emplace_back(stack, r);
      if (per_rank_suites.count(r.suite) && config_value(r.labels.config, "rank") && r.verdict != Verdict::skip &&
          r.verdict != Verdict::timeout) {
        data.per_rank.emplace_back(stack, r);
      }
      if (r.suite == "inventory") {
        if (r.metric == "rank_info" || r.metric == "nic_speed") data.inventory.emplace_back(stack, r);
        if (r.metric == "check" && is_failure(r.verdict)) {
          for (int rank : parse_ranges(config_value(r.labels.config, "ranks").value_or(""), kMostRanks)) {
            data.inventory_flagged[stack].insert(rank);
          }
        }
      }
    }
  }
  for (auto& [key, c] : counts) data.verdicts.push_back(std::move(c));
  find_cross_stack_differences(files, stack_of, data);
  find_conformance(files, stack_of, data);

  // Each suite's sections, as it declares them (results/catalog.h), in page order.
  std::vector<std::pair<SectionSpec, std::string>> specs;  // (section, suite)
  for (const SuiteInfo& info : suite_catalog()) {
    for (const SectionSpec& section : info.sections) specs.emplace_back(section, info.name);
  }
  std::stable_sort(specs.begin(), specs.end(), [](const auto& a, const auto& b) { return a.first.order < b.first.order; });
  for (const auto& [spec, suite] : specs) {
    ReportSection section{spec.id, spec.title, spec.intro, {}, ""};
    for (const PlotSpec& plot : spec.plots) {
      for (Plot& p : suite_plots(files, stack_of, data.stacks, suite, plot)) section.plots.push_back(std::move(p));
    }
    if (section.plots.empty()) section.empty_note = spec.empty_note;
    data.sections.push_back(std::move(section));
  }
  return data;
}

// A heat map: each cell a square coloured by its value, the value written on it.
static std::string heatmap_script(const Plot& plot) {
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const HeatCell& c : plot.cells) {
    x_lo = std::min(x_lo, c.x);
    x_hi = std::max(x_hi, c.x);
    y_lo = std::min(y_lo, c.y);
    y_hi = std::max(y_hi, c.y);
  }
  std::ostringstream gp;
  // Cells are unit squares (boxxyerror): a matrix with holes (no rank sends to itself) still
  // draws square, which gnuplot's `with image` would not.
  gp << "set terminal svg size 640,480 dynamic noenhanced font 'sans,11' background '#ffffff'\n"
     << "set encoding utf8\n"
     << "set title " << gnuplot_quote(plot.title) << "\n"
     << "set xlabel " << gnuplot_quote(plot.x_label) << "\n"
     << "set ylabel " << gnuplot_quote(plot.y_label) << "\n"
     << "set xtics 1\nset ytics 1\nset tics nomirror\nset size ratio -1\n"
     << "set xrange [" << format_number(x_lo - 0.5, "%.17g") << ":" << format_number(x_hi + 0.5, "%.17g") << "]\n"
     << "set yrange [" << format_number(y_hi + 0.5, "%.17g") << ":" << format_number(y_lo - 0.5, "%.17g") << "]\n"
     << "set style fill solid 1.0 noborder\n"
     << "set palette defined (0 '#fff5eb', 1 '#fd8d3c', 2 '#7f2704')\nset cbtics format '%g'\n";
  gp << "$H << EOD\n";
  for (const HeatCell& c : plot.cells) {
    gp << format_number(c.x, "%.17g") << " " << format_number(c.y, "%.17g") << " " << format_number(c.z / plot.y_scale, "%.17g") << "\n";
  }
  gp << "EOD\n"
     << "plot $H using 1:2:(0.5):(0.5):3 with boxxyerror fc palette notitle, \\\n"
     << "     $H using 1:2:(sprintf('%.3g', $3)) with labels font 'sans,9' notitle\n";
  return gp.str();
}

std::string gnuplot_script(const Plot& plot) {
  if (!plot.cells.empty()) return heatmap_script(plot);
  std::ostringstream gp;
  // noenhanced: names such as all_reduce must not turn into subscripts.
  // The legend sits below the plot, one line per series: the canvas grows with it so that the
  // plot area keeps its height however many stacks and variants there are.
  constexpr int kPlotHeight = 330, kLegendLineHeight = 16;
  const int height = kPlotHeight + kLegendLineHeight * static_cast<int>(plot.series.size());
  gp << "set terminal svg size 640," << height << " dynamic noenhanced font 'sans,11' background '#ffffff'\n"
     << "set encoding utf8\n"
     << "set title " << gnuplot_quote(plot.title) << "\n"
     << "set xlabel " << gnuplot_quote(plot.x_label) << "\n"
     << "set ylabel " << gnuplot_quote(plot.y_label) << "\n"
     << "set grid\nset key below left Left reverse\nset border 3\nset tics nomirror\n"
     << "set offsets graph 0.03, graph 0.03, graph 0.05, graph 0.02\n";
  double x_lo = INFINITY, x_hi = -INFINITY;
  for (const auto& s : plot.series) {
    for (const auto& p : s.points) {
      x_lo = std::min(x_lo, p.x);
      x_hi = std::max(x_hi, p.x);
    }
  }
  if (plot.log_x) {
    gp << "set logscale x 2\n";
    if (x_lo > 0 && x_lo <= x_hi) gp << "set xtics (" << size_tics(x_lo, x_hi) << ")\n";
  } else if (x_lo <= x_hi && x_hi - x_lo <= 16 && std::floor(x_lo) == x_lo && std::floor(x_hi) == x_hi) {
    gp << "set xtics 1\n";  // a few whole numbers (ranks, epochs): one tic each
  }
  if (plot.log_y) gp << "set logscale y 10\nset format y '%g'\n";
  else gp << "set yrange [0:*]\n";
  if (plot.diagonal) gp << "set xrange [0:*]\n";
  for (size_t i = 0; i < plot.series.size(); ++i) {
    gp << "$S" << i << " << EOD\n";
    for (const auto& p : plot.series[i].points) {
      gp << format_number(p.x / plot.x_scale, "%.17g") << " " << format_number(p.y / plot.y_scale, "%.17g") << "\n";
    }
    gp << "EOD\n";
  }
  // Variants within a stack (dtypes, strategies): 8 distinct dash and point pairs, then repeats.
  static const int kDash[] = {1, 2, 3, 4, 5, 1, 2, 3};
  static const int kPoint[] = {7, 5, 9, 13, 11, 4, 6, 8};
  gp << "plot ";
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const PlotSeries& s = plot.series[i];
    gp << (i ? ", \\\n     " : "") << "$S" << i << " using 1:2 ";
    if (s.stack < 0) {
      gp << "with lines lw 1.5 dt 2 lc rgb '#555555'";
    } else {
      const std::string& colour = kColours[static_cast<size_t>(s.stack) % kColours.size()];
      const size_t v = static_cast<size_t>(s.variant) % std::size(kPoint);
      if (plot.diagonal) gp << "with points ps 1.2 lc rgb '" << colour << "' pt " << kPoint[v];
      else gp << "with linespoints lw 2 ps 0.8 lc rgb '" << colour << "' dt " << kDash[v] << " pt " << kPoint[v];
    }
    gp << " title " << gnuplot_quote(s.label);
  }
  if (plot.diagonal) gp << ", \\\n     x with lines lw 1 dt 2 lc rgb '#555555' title 'measured = predicted'";
  gp << "\n";
  return gp.str();
}

std::string run_gnuplot(const std::string& script, const std::string& id_prefix, double timeout_seconds) {
  TempDir dir;
  const fs::path script_path = dir.path() / "plot.gp", svg_path = dir.path() / "plot.svg",
                 err_path = dir.path() / "gnuplot.err";
  {
    std::ofstream out(script_path, std::ios::binary);
    out << script;
    if (!out) throw Error(Error::Kind::io, "cannot write the gnuplot script to " + script_path.string());
  }
  ChildSpec gnuplot;
  gnuplot.argv = {"gnuplot", script_path.string()};
  gnuplot.stdout_path = svg_path.string();
  gnuplot.stderr_path = err_path.string();
  gnuplot.timeout_seconds = timeout_seconds;
  gnuplot.grace_seconds = 1;  // gnuplot holds nothing that needs time to let go
  ChildResult ended;
  try {
    ended = run_child(gnuplot);
  } catch (const Error& e) {
    throw Error(Error::Kind::io, std::string(e.what()) + " (gnuplot draws the report's plots; install it, e.g. gnuplot-nox)");
  }
  if (ended.end == ChildResult::End::timed_out) {
    throw Error(Error::Kind::timeout, "gnuplot did not finish plot " + id_prefix + " in " +
                                          format_number(timeout_seconds, "%g") + " s (-T) and was stopped");
  }
  if (ended.end == ChildResult::End::stopped) {  // a signal this process handles and lives on
    throw Error(Error::Kind::io, "gnuplot was stopped on plot " + id_prefix + " by signal " + std::to_string(ended.code));
  }
  if (ended.end != ChildResult::End::exited || ended.code != 0) {
    std::string first = read_text(err_path);
    // gnuplot echoes the offending line first; the message proper is the last non-empty line.
    while (!first.empty() && (first.back() == '\n' || first.back() == ' ')) first.pop_back();
    first = first.substr(first.find_last_of('\n') == std::string::npos ? 0 : first.find_last_of('\n') + 1);
    throw Error(Error::Kind::io, "gnuplot failed on plot " + id_prefix + ": " + (first.empty() ? "no message" : first));
  }
  std::string svg = read_text(svg_path);
  const size_t start = svg.find("<svg");
  if (start == std::string::npos) throw Error(Error::Kind::io, "gnuplot wrote no SVG for plot " + id_prefix);
  return prefix_ids(svg.substr(start), id_prefix);
}

namespace {

// The cross-stack table: one column per stack that differs somewhere, a row per differing case.
// The inventory table: a row per rank (its GPU, where it has one) and per node's NIC; the rows of
// ranks a failed inventory check names are marked.
void render_inventory(const ReportData& data, std::ostringstream& h) {
  h << "<h2 id=\"inventory\">Inventory</h2>\n<p>What every rank ran on, read from /proc, sysfs and NVML "
    << "(suite <code>inventory</code>); rows in red are named by a failed inventory check (see the failing "
    << "records).</p>\n<table><tr><th>stack</th><th>rank</th><th>node</th><th>local</th><th>CPU</th>"
    << "<th>CPUs allowed</th><th>GPU</th><th>PCI</th><th>GPU NUMA</th><th>memory GiB</th><th>SMs</th>"
    << "<th>PCIe</th><th>driver</th><th>CUDA</th></tr>\n";
  auto cell = [&](const Record& r, const char* key) { return escape_html(config_value(r.labels.config, key).value_or("")); };
  for (const auto& [stack, r] : data.inventory) {
    if (r.metric != "rank_info") continue;
    const std::string rank = config_value(r.labels.config, "rank").value_or("");
    int rank_number = -1;
    std::istringstream(rank) >> rank_number;
    const auto flagged = data.inventory_flagged.find(stack);
    const bool named = flagged != data.inventory_flagged.end() && flagged->second.count(rank_number);
    std::string memory, pcie;
    if (auto bytes = config_value(r.labels.config, "gpu_memory_bytes")) {
      memory = format_number(std::strtod(bytes->c_str(), nullptr) / (1ULL << 30), "%.1f");
    }
    if (auto width = config_value(r.labels.config, "pcie_width")) {
      pcie = "x" + *width + " of x" + config_value(r.labels.config, "pcie_width_max").value_or("?") + ", " +
             config_value(r.labels.config, "pcie_gts").value_or("?") + " of " +
             config_value(r.labels.config, "pcie_gts_max").value_or("?") + " GT/s";
    }
    h << "<tr" << (named ? " class=\"named\"" : "") << "><td>"
      << escape_html(data.stacks[static_cast<size_t>(stack)].label) << "</td><td class=\"n\">" << escape_html(rank)
      << "</td><td>" << cell(r, "node") << "</td><td class=\"n\">" << cell(r, "local_rank") << "</td><td>"
      << cell(r, "cpu") << "</td><td>" << cell(r, "cpus_allowed") << "</td><td>" << cell(r, "gpu") << "</td><td>"
      << cell(r, "gpu_pci_bus_id") << "</td><td class=\"n\">" << cell(r, "gpu_numa_node") << "</td><td class=\"n\">"
      << escape_html(memory) << "</td><td class=\"n\">" << cell(r, "gpu_sm_count") << "</td><td>" << escape_html(pcie)
      << "</td><td>" << cell(r, "driver") << "</td><td>" << cell(r, "cuda_driver") << "</td></tr>\n";
  }
  h << "</table>\n<table><tr><th>stack</th><th>node</th><th>ranks</th><th>NIC</th><th>link layer</th>"
    << "<th>rated Gbit/s</th></tr>\n";
  for (const auto& [stack, r] : data.inventory) {
    if (r.metric != "nic_speed") continue;
    h << "<tr><td>" << escape_html(data.stacks[static_cast<size_t>(stack)].label) << "</td><td>" << cell(r, "node")
      << "</td><td>" << cell(r, "ranks") << "</td><td>" << cell(r, "nic") << "</td><td>" << cell(r, "link_layer")
      << "</td><td class=\"n\">" << (std::isfinite(r.value) ? escape_html(format_number(r.value * 8 / 1e9)) : "unknown")
      << "</td></tr>\n";
  }
  h << "</table>\n";
}

void render_conformance(const ReportData& data, std::ostringstream& h) {
  if (data.conformance.empty()) return;
  h << "<h2 id=\"conformance\">Conformance by stack</h2>\n"
    << "<p>The collectives suite by collective and dtype: each reduction op's worst verdict on each stack, over "
    << "the sizes, placements and roots it ran (a pass means every one of them passed; <code>none</code>: a "
    << "collective that moves data without reducing); an op missing from a cell: the stack did not run it. The cases that differ are listed under <a href=\"#cross-stack\">Differences "
    << "between stacks</a> with their details.</p>\n<table class=\"matrix\"><tr><th>collective</th><th>dtype</th>";
  for (int stack : data.conformance_stacks) {
    h << "<th>" << escape_html(data.stacks[static_cast<size_t>(stack)].label) << "</th>";
  }
  h << "</tr>\n";
  for (const ConformanceRow& row : data.conformance) {
    h << "<tr><td>" << escape_html(row.collective) << "</td><td>" << escape_html(row.dtype) << "</td>";
    for (const auto& cell : row.cells) {
      h << "<td>";
      for (const auto& [op, verdict] : cell) {
        h << "<span class=\"v " << escape_html(verdict) << "\" title=\"" << escape_html(verdict) << "\">"
          << escape_html(op) << "</span> ";
      }
      h << "</td>";
    }
    h << "</tr>\n";
  }
  h << "</table>\n";
}

void render_cross_stack(const ReportData& data, std::ostringstream& h) {
  h << "<h2 id=\"cross-stack\">Differences between stacks</h2>\n"
    << "<p>Cases that more than one stack ran and whose outcome differs between them: by verdict, or by the "
    << "detail of a fail, skip or timeout. Each cell holds the case's worst verdict on that stack and the detail "
    << "of its first record with it; an empty cell: the stack did not run the case.</p>\n";
  if (data.cross_stack.empty()) {
    h << "<p>No case differs between the stacks.</p>\n";
    return;
  }
  h << "<table><tr><th>suite</th><th>case</th>";
  for (int stack : data.cross_stacks) h << "<th>" << escape_html(data.stacks[static_cast<size_t>(stack)].label) << "</th>";
  h << "</tr>\n";
  for (size_t i = 0; i < data.cross_stack.size() && i < kMaxFailuresListed; ++i) {
    const CrossStackRow& row = data.cross_stack[i];
    h << "<tr><td>" << escape_html(row.suite) << "</td><td>" << escape_html(row.case_id) << "</td>";
    for (const CaseOutcome& outcome : row.outcomes) {
      if (outcome.verdict.empty()) {
        h << "<td></td>";
        continue;
      }
      h << "<td class=\"" << escape_html(outcome.verdict) << "\">" << escape_html(outcome.verdict)
        << "<div class=\"detail\">" << escape_html(outcome.detail) << "</div></td>";
    }
    h << "</tr>\n";
  }
  h << "</table>\n";
  if (data.cross_stack.size() > kMaxFailuresListed) {
    h << "<p>... and " << data.cross_stack.size() - kMaxFailuresListed << " more (see the CSVs).</p>\n";
  }
}

}  // namespace

namespace {

// The A/B section: A and B, the rounds, the counts, and one row per judged row, `different`
// first (B worse, then B better), then `unknown`, then `same`.
void render_ab(const ReportData& data, std::ostringstream& h) {
  const AbComparison& c = *data.ab;
  h << "<h2 id=\"ab\">A/B: interleaved rounds</h2>\n<p>A: <code>" << escape_html(data.ab_a) << "</code><br>B: <code>"
    << escape_html(data.ab_b) << "</code></p>\n<p>" << c.rounds << " rounds, A and B alternating (AB, BA, ...); each row "
    << "judged on its paired rounds (ln(B/A) per round, paired t test, two-sided, at " << escape_html(format_number(c.row_alpha))
    << " per measurement: " << c.measurements << " measurements share the false-alarm rate). <b>different</b>: " << c.different
    << " (B worse: " << c.b_worse << "), <b>same</b>: " << c.same << ", <b>unknown</b>: " << c.unknown;
  if (c.unknown > 0) h << " (about " << c.rounds_needed << " rounds would decide them)";
  h << ".</p>\n";
  std::vector<const AbRow*> rows;
  for (const AbRow& row : c.rows) {
    if (row.verdict != AbVerdict::not_judged) rows.push_back(&row);
  }
  const auto rank = [](const AbRow& row) {
    if (row.verdict == AbVerdict::different) return row.b_worse ? 0 : 1;
    return row.verdict == AbVerdict::unknown ? 2 : 3;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const AbRow* x, const AbRow* y) { return rank(*x) < rank(*y); });
  h << "<table><tr><th>case</th><th>metric</th><th>A</th><th>B</th><th>B vs A</th><th>interval</th><th>verdict</th>"
    << "<th>why</th></tr>\n";
  for (const AbRow* row : rows) {
    const std::string verdict = row->verdict == AbVerdict::different ? (row->b_worse ? "different, B worse" : "different, B better")
                                                                      : std::string(name(row->verdict));
    h << "<tr><td>" << escape_html(row->label) << "</td><td>" << escape_html(row->a.metric) << "</td><td class=\"n\">"
      << escape_html(format_number(row->a.value)) << "</td><td class=\"n\">" << escape_html(format_number(row->b.value))
      << "</td><td class=\"n\">" << escape_html(signed_percent(row->change)) << "</td><td class=\"n\">"
      << escape_html(signed_percent(row->low) + " .. " + signed_percent(row->high)) << "</td><td class=\""
      << (row->verdict == AbVerdict::different && row->b_worse ? "fail" : row->verdict == AbVerdict::same ? "pass" : "skip")
      << "\">" << escape_html(verdict) << "</td><td class=\"detail\">" << escape_html(row->reason) << "</td></tr>\n";
  }
  h << "</table>\n";
}

// The gate section (compare --report): the counts and the power, then every row judged by
// numbers, worst first: regressed and missing, blind, improved, unchanged.
void render_gate(const Comparison& c, std::ostringstream& h) {
  h << "<h2 id=\"gate\">Regression gate</h2>\n<p>Against " << c.baseline_runs << " baseline run"
    << (c.baseline_runs == 1 ? "" : "s") << ": <b>regressed</b> " << c.regressions << ", <b>improved</b> "
    << c.improvements << ", <b>unchanged</b> " << c.unchanged << ", <b>blind</b> " << c.blind
    << " (could not have seen a change of the tolerance: never a pass), not judged " << c.not_judged
    << ".</p>\n<p>Power (a change flagged in 9 runs of 10): " << c.detect_tolerance << " rows can detect the tolerance, "
    << c.detect_larger << " only a larger change, " << c.detect_nothing << " nothing (fewer than " << c.min_runs
    << " baseline runs).</p>\n";
  const auto rank = [](Outcome o) {
    switch (o) {
      case Outcome::regressed:
      case Outcome::missing: return 0;
      case Outcome::blind: return 1;
      case Outcome::improved: return 2;
      case Outcome::unchanged: return 3;
      case Outcome::not_judged: return 4;
    }
    return 4;
  };
  std::vector<const ComparedRow*> rows;
  for (const ComparedRow& row : c.rows) {
    if (row.outcome != Outcome::not_judged) rows.push_back(&row);
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const ComparedRow* x, const ComparedRow* y) { return rank(x->outcome) < rank(y->outcome); });
  h << "<table><tr><th>case</th><th>metric</th><th>baseline</th><th>current</th><th>change</th>"
    << "<th>detectable</th><th>verdict</th><th>why</th></tr>\n";
  const auto percent = [](double value) {  // a row's percent column: blank when not judged, none when blind for good
    if (std::isnan(value)) return std::string();
    if (std::isinf(value)) return std::string("none");
    return signed_percent(value / 100);
  };
  for (const ComparedRow* row : rows) {
    const Record& shown = row->current.metric.empty() ? row->baseline : row->current;
    const char* css = rank(row->outcome) == 0 ? "fail" : row->outcome == Outcome::blind ? "skip" : "pass";
    h << "<tr><td>" << escape_html(row->label) << "</td><td>" << escape_html(shown.metric) << "</td><td class=\"n\">"
      << escape_html(format_number(row->baseline.value)) << "</td><td class=\"n\">"
      << (row->current.metric.empty() ? "" : escape_html(format_number(row->current.value))) << "</td><td class=\"n\">"
      << escape_html(percent(row->change_percent)) << "</td><td class=\"n\">" << escape_html(percent(row->detectable_percent))
      << "</td><td class=\"" << css << "\">" << escape_html(std::string(name(row->outcome))) << "</td><td class=\"detail\">"
      << escape_html(row->reason) << "</td></tr>\n";
  }
  h << "</table>\n";
}

// The acceptance section: what a hardware team attaches to a ticket.
void render_acceptance(const ReportData& data, const std::function<std::string(const Plot&)>& render,
                       std::ostringstream& h) {
  h << "<h2 id=\"acceptance\">Acceptance</h2>\n";
  if (data.failures.empty()) {
    h << "<p class=\"verdict pass\">Accepted: no item failed.</p>\n";
  } else {
    h << "<p class=\"verdict fail\">Not accepted: " << data.failures.size() << " item"
      << (data.failures.size() == 1 ? "" : "s") << " failed.</p>\n<ul class=\"failed\">\n";
    for (size_t i = 0; i < data.failures.size() && i < kMaxFailuresListed; ++i) {
      const auto& [stack, r] = data.failures[i];
      h << "<li><b>" << escape_html(r.suite + " " + r.case_id + (r.labels.placement.empty() ? "" : " " + r.labels.placement) +
                                     " " + r.metric)
        << "</b>: " << escape_html(r.detail) << "</li>\n";
    }
    h << "</ul>\n";
    if (data.failures.size() > kMaxFailuresListed) {
      h << "<p>... and " << data.failures.size() - kMaxFailuresListed << " more (see the CSV).</p>\n";
    }
  }
  // Per-rank figures: one chart per stack, case, metric and figure (config figure and link, where
  // one metric holds several: topology's sent, received and latency per link class), a bar per rank.
  std::map<std::tuple<int, std::string, std::string, std::string>, std::vector<const Record*>> figures;
  for (const auto& [stack, r] : data.per_rank) {
    std::string metric = r.metric;
    for (const char* key : {"figure", "link"}) {
      if (auto value = config_value(r.labels.config, key)) metric += " " + *value;
    }
    figures[{stack, r.suite, r.case_id, metric}].push_back(&r);
  }
  if (!figures.empty()) {
    h << "<h3 id=\"acceptance-ranks\">Per-rank figures</h3>\n<p>Each rank's figure; red: named (an outlier "
      << "below its peers by more than the run's noise allows, results/outliers.h, or a threshold missed); the "
      << "dashed line: the bound it was judged against.</p>\n<div class=\"plots\">\n";
    for (auto& [key, rows] : figures) {
      std::stable_sort(rows.begin(), rows.end(), [](const Record* a, const Record* b) {
        return std::strtol(config_value(a->labels.config, "rank").value_or("0").c_str(), nullptr, 10) <
               std::strtol(config_value(b->labels.config, "rank").value_or("0").c_str(), nullptr, 10);
      });
      const auto& [stack, suite, case_id, metric] = key;
      h << "<figure class=\"plot\"><figcaption>" << escape_html(data.stacks[static_cast<size_t>(stack)].label + ": " +
                                                                   suite + " " + case_id + ", " + metric)
        << "</figcaption>\n" << per_rank_bars_svg(rows, rows.front()->unit) << "</figure>\n";
    }
    h << "</div>\n";
  }
  if (!data.profile_checks.empty()) {
    h << "<h3 id=\"acceptance-thresholds\">Thresholds</h3>\n<table><tr><th>stack</th><th>threshold</th>"
      << "<th>verdict</th><th>what and why (citation)</th></tr>\n";
    for (const auto& [stack, r] : data.profile_checks) {
      h << "<tr><td>" << escape_html(data.stacks[static_cast<size_t>(stack)].label) << "</td><td>"
        << escape_html(r.case_id) << "</td><td class=\"" << name(r.verdict) << "\">" << name(r.verdict)
        << "</td><td class=\"detail\">" << escape_html(r.detail) << "</td></tr>\n";
    }
    h << "</table>\n";
  }
  bool heading = false;
  for (const ReportSection& section : data.sections) {
    for (const Plot& plot : section.plots) {
      if (plot.cells.empty()) continue;
      if (!heading) h << "<h3 id=\"acceptance-pairs\">Pair matrix</h3>\n<div class=\"plots\">\n";
      heading = true;
      Plot copy = plot;
      copy.id = "acceptance-" + plot.id;
      h << "<figure class=\"plot\">\n" << render(copy) << "\n</figure>\n";
    }
  }
  if (heading) h << "</div>\n";
}

}  // namespace

std::string per_rank_bars_svg(const std::vector<const Record*>& rows, const std::string& unit) {
  double scale = 1;
  std::string shown = unit;
  if (unit == "flop_per_second") {
    scale = 1e9;
    shown = "GFLOP/s";
  } else if (unit == "bytes_per_second") {
    scale = 1e9;
    shown = "GB/s";
  }
  double top = 0;
  for (const Record* r : rows) {
    if (std::isfinite(r->value)) top = std::max(top, r->value);
    if (std::isfinite(r->threshold)) top = std::max(top, r->threshold);
  }
  if (!(top > 0)) top = 1;
  constexpr int kLeft = 56, kBar = 36, kGap = 14, kBase = 200, kHeight = 160;
  const int width = kLeft + static_cast<int>(rows.size()) * (kBar + kGap) + 10;
  std::ostringstream s;
  s << "<svg class=\"bars\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << width << " 240\" width=\"" << width
    << "\" height=\"240\" font-family=\"sans-serif\" font-size=\"11\">\n<line x1=\"" << kLeft - 4 << "\" y1=\""
    << kBase << "\" x2=\"" << width - 6 << "\" y2=\"" << kBase << "\" stroke=\"#555\"/>\n<text x=\"4\" y=\"14\">"
    << escape_html(shown) << "</text>\n";
  const auto y_of = [&](double v) { return kBase - static_cast<int>(std::lround(v / top * kHeight)); };
  std::vector<int> labelled;  // heights of the bounds written at the left, 10 px apart at least
  for (size_t i = 0; i < rows.size(); ++i) {
    const Record& r = *rows[i];
    const int x = kLeft + static_cast<int>(i) * (kBar + kGap);
    const bool drawn = std::isfinite(r.value) && r.value > 0;
    const int y = drawn ? y_of(r.value) : kBase;
    const bool failed = is_failure(r.verdict);
    s << "<rect class=\"" << (failed ? "bar-named" : "bar") << "\" x=\"" << x << "\" y=\"" << y << "\" width=\""
      << kBar << "\" height=\"" << kBase - y << "\" fill=\"" << (failed ? "#d62728" : "#4e79a7") << "\"><title>"
      << escape_html(r.detail) << "</title></rect>\n<text x=\"" << x + kBar / 2 << "\" y=\"" << y - 4
      << "\" text-anchor=\"middle\">" << escape_html(std::isfinite(r.value) ? format_number(r.value / scale, "%.3g") : "n/a")
      << "</text>\n<text x=\"" << x + kBar / 2 << "\" y=\"" << kBase + 14 << "\" text-anchor=\"middle\">rank "
      << escape_html(config_value(r.labels.config, "rank").value_or("?")) << "</text>\n<text x=\"" << x + kBar / 2
      << "\" y=\"" << kBase + 28 << "\" text-anchor=\"middle\" fill=\"#555\">"
      << escape_html(config_value(r.labels.config, "node").value_or("")) << "</text>\n";
    // The bound this rank was judged against (an outlier rule's or a threshold's: they may differ
    // between ranks), dashed across its bar.
    if (std::isfinite(r.threshold) && r.threshold > 0) {
      const int ty = y_of(r.threshold);
      s << "<line class=\"threshold\" x1=\"" << x - kGap / 2 << "\" y1=\"" << ty << "\" x2=\"" << x + kBar + kGap / 2
        << "\" y2=\"" << ty << "\" stroke=\"#d62728\" stroke-dasharray=\"5,3\"/>\n";
      if (std::none_of(labelled.begin(), labelled.end(), [&](int other) { return std::abs(other - ty) < 10; })) {
        labelled.push_back(ty);
        s << "<text x=\"4\" y=\"" << ty + 4 << "\" fill=\"#d62728\">"
          << escape_html(format_number(r.threshold / scale, "%.3g")) << "</text>\n";
      }
    }
  }
  s << "</svg>";
  return s.str();
}

std::string render_html(const ReportData& data, const std::function<std::string(const Plot&)>& render) {
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    << "<title>dtsuite report</title>\n<style>\n"
    << "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222;max-width:1400px}\n"
    << "h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:2em}\n"
    << "table{border-collapse:collapse;margin:8px 0;font-size:.9em}\n"
    << "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}\n"
    << "th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    << "td.fail,td.timeout,td.xpass{background:#fde2e2;font-weight:600}td.xfail{background:#fdf3d6}td.pass{background:#e3f5e1}\n"
    << "span.v{padding:0 3px;margin-right:2px;border-radius:2px}span.v.pass{background:#e3f5e1}"
    << "span.v.xfail{background:#fdf3d6}span.v.fail,span.v.timeout,span.v.xpass{background:#fde2e2;font-weight:600}"
    << "span.v.skip{color:#777;text-decoration:line-through}\n"
    << "tr.named td{background:#fde2e2}\n"
    << "p.verdict{font-size:1.2em;font-weight:600;padding:6px 10px;display:inline-block}p.verdict.pass{background:#e3f5e1}"
    << "p.verdict.fail{background:#fde2e2}ul.failed li{font-family:ui-monospace,monospace;font-size:.85em}\n"
    << ".swatch{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:middle}\n"
    << ".plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:16px}\n"
    << "figure.plot{margin:0;border:1px solid #ddd;padding:6px;background:#fff}\n"
    << "figure.plot svg{width:100%;height:auto;display:block}figure.plot svg.bars{width:auto;max-width:100%}\n"
    << "figcaption{font-size:.85em;color:#555}.empty{color:#777;font-style:italic}\n"
    << ".detail{font-family:ui-monospace,monospace;font-size:.85em;word-break:break-word}\n"
    << "</style>\n</head>\n<body>\n<h1>dtsuite report</h1>\n";

  h << "<h2 id=\"stacks\">Stacks</h2>\n<table><tr><th></th><th>stack</th><th>backend</th><th>version</th>"
    << "<th>MPI</th><th>device</th><th>ranks</th><th>host</th><th>run</th><th>file</th></tr>\n";
  for (size_t i = 0; i < data.stacks.size(); ++i) {
    const ReportStack& s = data.stacks[i];
    h << "<tr><td><span class=\"swatch\" style=\"background:" << kColours[i % kColours.size()] << "\"></span></td><td>"
      << escape_html(s.label) << "</td><td>" << escape_html(s.backend) << "</td><td>" << escape_html(s.backend_version)
      << "</td><td>" << escape_html(s.mpi_version) << "</td><td>" << escape_html(s.device) << "</td><td class=\"n\">"
      << s.world_size << "</td><td>" << escape_html(s.host) << "</td><td>" << escape_html(s.run_id) << "</td><td>"
      << escape_html(base_name(data.inputs[s.file])) << "</td></tr>\n";
  }
  h << "</table>\n";
  if (data.stacks.empty()) h << "<p class=\"empty\">These results hold no records.</p>\n";

  if (!data.inventory.empty()) render_inventory(data, h);
  if (!data.inventory.empty() || !data.per_rank.empty() || !data.profile_checks.empty()) render_acceptance(data, render, h);

  h << "<h2 id=\"summary\">Pass/fail summary</h2>\n<p>Records by stack, suite and verdict.</p>\n"
    << "<table><tr><th>stack</th><th>suite</th>";
  for (const auto& v : kVerdicts) h << "<th>" << v << "</th>";
  h << "</tr>\n";
  for (const VerdictCounts& c : data.verdicts) {
    h << "<tr><td>" << escape_html(data.stacks[static_cast<size_t>(c.stack)].label) << "</td><td>"
      << escape_html(c.suite) << "</td>";
    for (const auto& v : kVerdicts) {
      const auto it = c.by_verdict.find(v);
      const int64_t n = it == c.by_verdict.end() ? 0 : it->second;
      h << "<td class=\"n" << (n > 0 ? " " + v : "") << "\">" << n << "</td>";
    }
    h << "</tr>\n";
  }
  h << "</table>\n";
  if (data.failures.empty()) {
    h << "<p>No record failed, timed out or found an expectation stale (xpass).</p>\n";
  } else {
    h << "<h3 id=\"failures\">Failing records (" << data.failures.size() << ")</h3>\n"
      << "<table><tr><th>stack</th><th>suite</th><th>case</th><th>placement</th><th>metric</th><th>value</th>"
      << "<th>threshold</th><th>verdict</th><th>detail</th></tr>\n";
    for (size_t i = 0; i < data.failures.size() && i < kMaxFailuresListed; ++i) {
      const auto& [stack, r] = data.failures[i];
      h << "<tr><td>" << escape_html(data.stacks[static_cast<size_t>(stack)].label) << "</td><td>"
        << escape_html(r.suite) << "</td><td>" << escape_html(r.case_id) << "</td><td>"
        << escape_html(r.labels.placement) << "</td><td>" << escape_html(r.metric) << "</td><td class=\"n\">"
        << escape_html(format_number(r.value)) << "</td><td class=\"n\">"
        << (std::isnan(r.threshold) ? "" : escape_html(format_number(r.threshold))) << "</td><td class=\""
        << name(r.verdict) << "\">" << name(r.verdict) << "</td><td class=\"detail\">" << escape_html(r.detail)
        << "</td></tr>\n";
    }
    h << "</table>\n";
    if (data.failures.size() > kMaxFailuresListed) {
      h << "<p>... and " << data.failures.size() - kMaxFailuresListed << " more (see the CSV).</p>\n";
    }
  }

  if (data.stacks.size() >= 2) {
    render_conformance(data, h);
    render_cross_stack(data, h);
  }
  if (data.ab) render_ab(data, h);
  if (data.gate) render_gate(*data.gate, h);

  for (const ReportSection& section : data.sections) {
    h << "<h2 id=\"" << escape_html(section.id) << "\">" << escape_html(section.title) << "</h2>\n<p>"
      << escape_html(section.intro) << "</p>\n";
    if (section.plots.empty()) {
      h << "<p class=\"empty\">" << escape_html(section.empty_note) << "</p>\n";
      continue;
    }
    h << "<div class=\"plots\">\n";
    for (const Plot& plot : section.plots) {
      h << "<figure class=\"plot\" id=\"plot-" << escape_html(plot.id) << "\">\n" << render(plot) << "\n";
      if (!plot.note.empty()) h << "<figcaption>" << escape_html(plot.note) << "</figcaption>\n";
      h << "</figure>\n";
    }
    h << "</div>\n";
  }
  h << "<p class=\"empty\">Inputs: ";
  for (size_t i = 0; i < data.inputs.size(); ++i) h << (i ? ", " : "") << escape_html(data.inputs[i]);
  h << "</p>\n</body>\n</html>\n";
  return h.str();
}

void write_report(const std::vector<ResultsFile>& files, const std::string& output_path, const AbComparison* ab,
                  const std::string& a, const std::string& b, const Comparison* gate, double gnuplot_timeout_seconds) {
  ReportData data = group_results(files);
  data.gate = gate;
  data.ab = ab;
  data.ab_a = a;
  data.ab_b = b;
  int index = 0;
  const std::string html = render_html(data, [&](const Plot& plot) {
    return run_gnuplot(gnuplot_script(plot), "p" + std::to_string(index++), gnuplot_timeout_seconds);
  });
  // Whole or not at all: a full disk leaves the previous report as it was, not half a page.
  replace_file_atomically({"-o", output_path}, html);
}

}  // namespace dts
