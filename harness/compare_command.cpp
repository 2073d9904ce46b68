// `dtsuite compare BASELINE.csv CURRENT.csv`: the regression gate. Reads both runs (results/
// csv_reader), judges them (results/compare) and prints the table; optionally writes it as CSV and
// JUnit. Exit 0 no regression, 1 a regression, 2 bad input (one line on stderr). Runs without MPI.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "harness/commands.h"
#include "harness/runner.h"
#include "results/compare.h"
#include "results/csv_reader.h"
#include "results/csv_sink.h"
#include "results/junit_sink.h"
#include "results/output_paths.h"

namespace dts {

namespace {

std::string number(double value) {
  if (std::isnan(value)) return "";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4g", value);
  return buffer;
}

std::string change_text(double percent) {
  if (std::isnan(percent)) return "";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%+.1f%%", percent);
  return buffer;
}

const Record& identity(const ComparedRow& row) { return row.baseline.metric.empty() ? row.current : row.baseline; }

// The table, nccl-tests style: '#' lines around fixed-width columns, one row per compared record.
void print_table(const Comparison& c, const CompareOptions& o, const std::vector<Record>& baseline,
                 const std::vector<Record>& current, const CompareSettings& settings) {
  const Record& stack = baseline.front();
  std::printf("# dtsuite compare: baseline %s (run %s, %zu rows) vs current %s (run %s, %zu rows)\n",
              o.baseline_path.c_str(), stack.run_id.c_str(), baseline.size(), o.current_path.c_str(),
              current.front().run_id.c_str(), current.size());
  const JobStack job = job_stacks(baseline).front();  // the job's ranks, not a sub-world case's
  std::printf("# stack: backend %s, device %s, %d ranks on %d node(s), %d per node\n", job.backend.c_str(),
              job.device.c_str(), job.world_size, job.nodes, job.ranks_per_node);
  std::printf("# regression: worse by more than %g%% and outside the noise (%s)\n", settings.tolerance * 100,
              settings.use_samples ? "Mann-Whitney U on per-iteration samples, one-sided p < 0.01; p05/p95 where none"
                                   : "p05..p95 intervals of the two runs do not overlap");
  size_t case_width = 4, metric_width = 6;
  for (const ComparedRow& row : c.rows) {
    case_width = std::max(case_width, row.label.size());
    metric_width = std::max(metric_width, identity(row).metric.size());
  }
  const int cw = static_cast<int>(case_width), mw = static_cast<int>(metric_width);
  std::printf("#\n# %-*s  %-*s  %12s  %12s  %8s  %-9s  %s\n", cw, "case", mw, "metric", "baseline", "current", "change",
              "verdict", "why");
  for (const ComparedRow& row : c.rows) {
    const std::string baseline_value = row.baseline.metric.empty() ? "" : number(row.baseline.value);
    const std::string current_value = row.current.metric.empty() ? "" : number(row.current.value);
    std::printf("  %-*s  %-*s  %12s  %12s  %8s  %-9s  %s\n", cw, row.label.c_str(), mw, identity(row).metric.c_str(),
                baseline_value.c_str(), current_value.c_str(), change_text(row.change_percent).c_str(),
                std::string(name(row.outcome)).c_str(), row.reason.c_str());
  }
  std::printf("#\n# %zu rows compared: %zu regressed, %zu improved, %zu unchanged, %zu not judged; %zu only in the "
              "current run (not judged)\n",
              c.rows.size(), c.regressions, c.improvements, c.unchanged, c.not_judged, c.only_in_current);
  std::printf("# verdict: %s\n", c.regressions > 0 ? "REGRESSION" : "no regression");
  std::fflush(stdout);
}

void write_csv(const Comparison& c, const std::string& path) {
  check_output_path({"--csv", path});  // again at the open: an ofstream on a FIFO would block
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(Error::Kind::io, "cannot write comparison CSV '" + path + "'");
  out << "suite,case,op,dtype,bytes,placement,strategy,config,world_size,metric,unit,baseline,current,"
         "change_percent,baseline_p05,baseline_p95,current_p05,current_p95,p_value,verdict,reason\n";
  for (const ComparedRow& row : c.rows) {
    const Record& r = identity(row);
    const Labels& l = r.labels;
    const auto stat = [](const Record& x, double Stats::*field) { return x.stats.n > 0 ? number(x.stats.*field) : ""; };
    out << csv_escape(r.suite) << ',' << csv_escape(r.case_id) << ',' << csv_escape(l.op) << ','
        << csv_escape(l.dtype) << ',' << (l.bytes >= 0 ? std::to_string(l.bytes) : "") << ','
        << csv_escape(l.placement) << ',' << csv_escape(l.strategy) << ',' << csv_escape(l.config) << ','
        << l.world_size << ',' << csv_escape(r.metric) << ',' << csv_escape(r.unit) << ','
        << (row.baseline.metric.empty() ? "" : number(row.baseline.value)) << ','
        << (row.current.metric.empty() ? "" : number(row.current.value)) << ','
        << (std::isnan(row.change_percent) ? "" : number(row.change_percent)) << ','
        << stat(row.baseline, &Stats::p05) << ',' << stat(row.baseline, &Stats::p95) << ','
        << stat(row.current, &Stats::p05) << ',' << stat(row.current, &Stats::p95) << ',' << number(row.p_value)
        << ',' << name(row.outcome) << ',' << csv_escape(row.reason) << '\n';
  }
  out.flush();
  if (!out) throw Error(Error::Kind::io, "cannot write comparison CSV '" + path + "'");
}

// One testcase per compared row (suite "compare.<suite>"), failed when it regressed.
void write_junit(const Comparison& c, const std::string& path) {
  JunitSink sink(path);
  for (const ComparedRow& row : c.rows) {
    Record r = identity(row);
    r.samples.clear();
    r.suite = "compare." + r.suite;
    r.case_id = row.label + " " + r.metric;
    r.value = row.current.metric.empty() ? std::nan("") : row.current.value;
    r.threshold = std::nan("");
    r.verdict = row.outcome == Outcome::regressed || row.outcome == Outcome::missing ? Verdict::fail : Verdict::pass;
    r.detail = "baseline " + (row.baseline.metric.empty() ? std::string("-") : number(row.baseline.value)) +
               ", current " + (row.current.metric.empty() ? std::string("-") : number(row.current.value)) +
               (std::isnan(row.change_percent) ? "" : ", change " + change_text(row.change_percent)) + ": " +
               std::string(name(row.outcome)) + (row.reason.empty() ? "" : ", " + row.reason);
    r.labels.placement.clear();  // already in the case name
    sink.write(r);
  }
  sink.close();
}

}  // namespace

int run_compare(const CompareOptions& options) {
  try {
    if (!(options.tolerance_percent >= 0)) {
      throw Error(Error::Kind::invalid_argument, "--tolerance must be a percentage >= 0");
    }
    // Before anything is read or written: `compare B C --csv B` must leave the baseline as it was.
    check_outputs({{"the baseline", options.baseline_path}, {"the current run", options.current_path}},
                  {{"--csv", options.csv_path}, {"--junit", options.junit_path}});
    const std::vector<Record> baseline = read_results_csv(options.baseline_path);
    const std::vector<Record> current = read_results_csv(options.current_path);
    CompareSettings settings;
    settings.tolerance = options.tolerance_percent / 100;
    settings.use_samples = options.samples;
    Comparison comparison;
    try {
      comparison = compare_runs(baseline, current, settings);
    } catch (const Error& e) {
      throw Error(e.kind(), options.current_path + " against " + options.baseline_path + ": " + e.what());
    }
    print_table(comparison, options, baseline, current, settings);
    if (!options.csv_path.empty()) write_csv(comparison, options.csv_path);
    if (!options.junit_path.empty()) write_junit(comparison, options.junit_path);
    return comparison.regressions > 0 ? kExitFail : kExitPass;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "dtsuite: error: %s\n", e.what());
    return kExitUsage;
  }
}

}  // namespace dts
