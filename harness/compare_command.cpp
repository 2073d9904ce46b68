// `dtsuite compare BASELINE.csv [BASELINE2.csv ...] CURRENT.csv`: the regression gate. Reads the
// runs (results/csv_reader; a folder stands for its *.csv files), judges them (results/compare)
// and prints the table; optionally writes it as CSV and JUnit. Exit 0 no regression, 1 a
// regression, 2 bad input (one line on stderr). Runs without MPI.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "harness/commands.h"
#include "harness/runner.h"
#include "results/compare.h"
#include "results/csv_reader.h"
#include "results/csv_sink.h"
#include "results/expectations.h"
#include "results/junit_sink.h"
#include "results/report.h"
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

void print_power(const Comparison& c, const CompareSettings& settings);

std::string runs_text(size_t runs) { return std::to_string(runs) + " run" + (runs == 1 ? "" : "s"); }

// The table, nccl-tests style: '#' lines around fixed-width columns, one row per compared record.
void print_table(const Comparison& c, const std::vector<std::string>& baseline_files, const std::string& current_file,
                 const std::vector<RecordedRun>& baselines, const std::vector<RecordedRun>& currents, const CompareSettings& settings) {
  const RecordedRun& reference = baselines.back();
  if (baseline_files.size() == 1 && baselines.size() == 1) {
    std::printf("# dtsuite compare: baseline %s (run %s, %zu rows) vs current %s (run %s, %zu rows)\n",
                baseline_files.front().c_str(), reference.rows.front().run_id.c_str(), reference.rows.size(),
                current_file.c_str(), currents.front().rows.front().run_id.c_str(), currents.front().rows.size());
  } else {
    std::printf("# dtsuite compare: baseline %s from %zu file(s) (the last, run %s, %zu rows, sets the rows) vs current %s "
                "(%s, %zu rows)\n",
                runs_text(baselines.size()).c_str(), baseline_files.size(), reference.rows.front().run_id.c_str(),
                reference.rows.size(), current_file.c_str(), runs_text(currents.size()).c_str(),
                currents.front().rows.size());
  }
  const JobStack job = job_stacks(reference.rows).front();  // the job's ranks, not a sub-world case's
  std::printf("# stack: backend %s, device %s, %d ranks on %d node(s), %d per node\n", job.backend.c_str(),
              job.device.c_str(), job.world_size, job.nodes, job.ranks_per_node);
  const std::string within = settings.use_samples
                                 ? "Mann-Whitney U on per-iteration samples, one-sided p < 0.01; p05/p95 where none"
                                 : "p05..p95 intervals of the two runs do not overlap";
  if (c.min_runs > 1) {
    std::printf("# timing verdicts: from %zu baseline runs up (the least for a %g%% false-alarm rate against a machine "
                "state no baseline run showed; --min-runs)\n",
                c.min_runs, settings.false_alarm * 100);
  }
  if (c.noise_judged > 0) {
    std::printf("# regression: worse by more than %g%% and beyond the between-run noise of %s (log scale, each row's "
                "spread over them moderated by like rows; and each set of a family's sizes, by their mean): %g%% "
                "chance that an unchanged run fails, shared by %zu measurements in %zu rows (p < %s each) and %zu "
                "family sets (p < %s each); other rows: %s\n",
                settings.tolerance * 100, runs_text(c.baseline_runs).c_str(), settings.false_alarm * 100,
                c.noise_measurements, c.noise_judged, format_number(c.row_alpha, "%.3g").c_str(), c.family_tests,
                format_number(c.family_alpha, "%.3g").c_str(), within.c_str());
  } else if (c.min_runs > 1) {
    std::printf("# regression: a verdict that turns to fail or timeout, a case or row that is gone, memory worse by "
                "more than %g%%; timing rows are blind\n",
                settings.tolerance * 100);
    std::printf("# between-run noise: unknown (%s of the baseline); record %zu or more at different times and pass them "
                "all (results/baselines/README.md), or --min-runs 1 to judge by the runs' own intervals, which do not "
                "see how runs differ\n",
                runs_text(c.baseline_runs).c_str(), c.min_runs);
  } else {
    std::printf("# regression: worse by more than %g%% and outside the noise (%s)\n", settings.tolerance * 100,
                within.c_str());
    std::printf("# between-run noise: unknown (%s of the baseline); record 3 or more (5 recommended) and pass them all "
                "(results/baselines/README.md): a run's own intervals do not see how runs differ\n",
                runs_text(c.baseline_runs).c_str());
  }
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
  std::printf("#\n# %zu rows compared: %zu regressed, %zu improved, %zu unchanged, %zu blind, %zu not judged; %zu only "
              "in the current run (not judged)\n",
              c.rows.size(), c.regressions, c.improvements, c.unchanged, c.blind, c.not_judged, c.only_in_current);
  print_power(c, settings);
  std::printf("# verdict: %s\n", c.regressions > 0 ? "REGRESSION" : "no regression");
  std::fflush(stdout);
}

// The gate's power in one line, and what would cure its blind rows.
void print_power(const Comparison& c, const CompareSettings& settings) {
  std::vector<double> larger;
  size_t by_runs = 0, by_iterations = 0, by_interleaving = 0, runs_needed = 0;
  for (const ComparedRow& row : c.rows) {
    if (std::isfinite(row.detectable_percent) && row.detectable_percent > settings.tolerance * 100) {
      larger.push_back(row.detectable_percent);
    }
    if (row.outcome != Outcome::blind) continue;
    switch (row.cure) {
      case Cure::runs: ++by_runs; runs_needed = std::max(runs_needed, row.cure_runs); break;
      case Cure::iterations: ++by_iterations; break;
      case Cure::interleave: ++by_interleaving; break;
      case Cure::none: break;
    }
  }
  std::string larger_text;
  if (!larger.empty()) {
    std::sort(larger.begin(), larger.end());
    larger_text = " (median " + change_text(larger[larger.size() / 2]) + ", largest " + change_text(larger.back()) + ")";
  }
  const std::string nothing_text =
      c.min_runs > 1 ? " (fewer than " + std::to_string(c.min_runs) + " baseline runs)" : std::string();
  std::printf("# power (a change flagged in 9 runs of 10): %zu rows can detect the %g%% tolerance, %zu only a larger "
              "change%s, %zu nothing%s\n",
              c.detect_tolerance, settings.tolerance * 100, c.detect_larger, larger_text.c_str(), c.detect_nothing,
              nothing_text.c_str());
  if (c.blind > 0) {
    std::string cures;
    const auto add = [&](size_t rows, const std::string& text) {
      if (rows == 0) return;
      cures += (cures.empty() ? "" : "; ") + std::to_string(rows) + " row" + (rows == 1 ? "" : "s") + ": " + text;
    };
    add(by_runs, std::to_string(runs_needed) + " baseline runs, recorded at different times");
    add(by_iterations, "more iterations per run (-n): the runs' own noise is most of theirs");
    add(by_interleaving, "interleaved A/B runs of both sides: the runs differ by more than the tolerance");
    std::printf("# blind: %zu rows could not have seen a change of the tolerance (never a pass); cure: %s\n", c.blind,
                cures.c_str());
  }
}

// The table as CSV, written whole or not at all (replace_file_atomically): a gate's CSV that a
// full disk cut short would read as a table of fewer rows.
void write_csv(const Comparison& c, const std::string& path) {
  std::ostringstream out;
  out << "suite,case,op,dtype,bytes,placement,strategy,config,world_size,metric,unit,baseline,current,"
         "change_percent,baseline_p05,baseline_p95,current_p05,current_p95,p_value,verdict,reason,baseline_runs,"
         "current_runs,allowed_percent,detectable_percent\n";
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
        << ',' << name(row.outcome) << ',' << csv_escape(row.reason) << ','
        << (row.baseline_runs > 0 ? std::to_string(row.baseline_runs) : "") << ','
        << (row.current_runs > 0 ? std::to_string(row.current_runs) : "") << ',' << number(row.allowed_percent) << ','
        << (std::isinf(row.detectable_percent) ? std::string("inf") : number(row.detectable_percent)) << '\n';
  }
  replace_file_atomically({"--csv", path}, out.str());
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
    // A blind row is skipped: it was not shown to be unchanged, and it is no failure of the stack.
    r.verdict = row.outcome == Outcome::regressed || row.outcome == Outcome::missing ? Verdict::fail
                : row.outcome == Outcome::blind                                       ? Verdict::skip
                                                                                      : Verdict::pass;
    r.detail = "baseline " + (row.baseline.metric.empty() ? std::string("-") : number(row.baseline.value)) +
               ", current " + (row.current.metric.empty() ? std::string("-") : number(row.current.value)) +
               (std::isnan(row.change_percent) ? "" : ", change " + change_text(row.change_percent)) + ": " +
               std::string(name(row.outcome)) + (row.reason.empty() ? "" : ", " + row.reason) +
               (std::isnan(row.detectable_percent) ? ""
                : std::isinf(row.detectable_percent)
                    ? "; detectable: nothing"
                    : "; detectable: " + change_text(row.detectable_percent));
    r.labels.placement.clear();  // already in the case name
    sink.write(r);
  }
  sink.close();
}

// A run's `expect` rows (run --expect's summary) are about a file, not the stack: a run with them
// and one without compare alike, and --expect here makes its own.
void drop_expectation_rows(RecordedRun& run) {
  std::erase_if(run.rows, [](const Record& r) { return r.suite == "expect"; });
}

// The current run's expectation summary (--expect), one '#' line per entry of its stack; true
// when an entry is stale (xpass), which fails the gate as it fails a run.
bool print_expectations(const ExpectationJudge& judge) {
  bool stale = false;
  std::printf("# expectations: %lld failed rows of the current run are known deviations (xfail)\n",
              static_cast<long long>(judge.xfailed_rows()));
  for (const Record& r : judge.summary()) {
    stale = stale || is_failure(r.verdict);
    std::printf("# expect %s [%s] %s\n", r.case_id.c_str(), std::string(name(r.verdict)).c_str(),
                printable(r.detail).c_str());
  }
  if (stale) std::printf("# verdict: an expectation is stale (xpass): update the file\n");
  std::fflush(stdout);
  return stale;
}

}  // namespace

namespace {

// A folder stands for its *.csv files, in name order.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code error;
    if (!std::filesystem::is_directory(input, error)) {
      files.push_back(input);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(input, error)) {
      if (entry.path().extension() == ".csv" && entry.is_regular_file(error)) found.push_back(entry.path().string());
    }
    if (error) throw Error(Error::Kind::invalid_argument, "cannot list the folder '" + input + "': " + error.message());
    if (found.empty()) throw Error(Error::Kind::invalid_argument, "the folder '" + input + "' holds no .csv file");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

}  // namespace

int run_compare(const CompareOptions& options) {
  try {
    if (!(options.tolerance_percent >= 0)) {
      throw Error(Error::Kind::invalid_argument, "--tolerance must be a percentage >= 0");
    }
    if (options.inputs.size() < 2) {
      throw Error(Error::Kind::invalid_argument, "compare needs a baseline and a current run: BASELINE.csv... CURRENT.csv");
    }
    const std::string current_path = options.inputs.back();
    std::error_code ignored;
    if (std::filesystem::is_directory(current_path, ignored)) {
      throw Error(Error::Kind::invalid_argument, "the current run '" + current_path +
                                                     "' is a folder; the last argument is the current run's CSV");
    }
    const std::vector<std::string> baseline_paths =
        expand_inputs(std::vector<std::string>(options.inputs.begin(), options.inputs.end() - 1));
    // Before anything is read or written: `compare B C --csv B` must leave the baseline as it was.
    std::vector<NamedPath> inputs;
    for (const std::string& path : baseline_paths) inputs.push_back({"the baseline", path});
    for (const std::string& path : options.expect_paths) inputs.push_back({"--expect", path});
    inputs.push_back({"the current run", current_path});
    check_outputs(inputs, {{"--csv", options.csv_path}, {"--junit", options.junit_path}, {"--report", options.report_path}});
    CompareSettings settings;
    settings.tolerance = options.tolerance_percent / 100;
    settings.use_samples = options.samples;
    settings.false_alarm = options.false_alarm_percent / 100;
    settings.min_runs = options.min_runs;
    // Each run as it is read keeps only what the gate reads: of the baseline runs before the most
    // recent one, their numbers (release_unread), so a long history fits in memory.
    const CsvReadOptions reading = csv_read_options(options.timeout_seconds);
    // --expect: each run's known deviations become xfail before the gate reads them, in the
    // baseline as in the current run, so a deviation present in both is neither a regression nor
    // an improvement; the current run's judge also says which entries are stale (xpass) or unused.
    std::vector<ExpectationFile> expectations;
    for (const std::string& path : options.expect_paths) expectations.push_back(load_expectations(path, options.timeout_seconds));
    std::optional<ExpectationJudge> baseline_judge, current_judge;
    if (!expectations.empty()) {
      baseline_judge.emplace(expectations);
      current_judge.emplace(expectations);
    }
    std::vector<RecordedRun> baselines;
    for (const std::string& path : baseline_paths) {
      for (RecordedRun& run : split_runs(read_results_csv(path, reading), path)) {
        drop_expectation_rows(run);
        if (run.rows.empty()) continue;
        if (baseline_judge) {
          for (Record& r : run.rows) baseline_judge->apply(r);
        }
        if (!baselines.empty()) release_unread(baselines.back(), true, settings.use_samples);
        release_unread(run, false, settings.use_samples);
        baselines.push_back(std::move(run));
      }
    }
    std::vector<RecordedRun> currents = split_runs(read_results_csv(current_path, reading), current_path);
    for (RecordedRun& run : currents) drop_expectation_rows(run);
    std::erase_if(currents, [](const RecordedRun& run) { return run.rows.empty(); });
    for (RecordedRun& run : currents) {
      if (current_judge) {
        for (Record& r : run.rows) current_judge->apply(r);
      }
      release_unread(run, false, settings.use_samples);
    }
    if (baselines.empty()) throw Error(Error::Kind::invalid_argument, "the baseline has no rows to compare against");
    if (currents.empty()) throw Error(Error::Kind::invalid_argument, "the current run has no rows");
    Comparison comparison;
    try {
      comparison = compare_runs(baselines, currents, settings);
    } catch (const Error& e) {
      const std::string against = baseline_paths.size() == 1 ? baseline_paths.front()
                                                             : std::to_string(baseline_paths.size()) + " baseline files";
      throw Error(e.kind(), current_path + " against " + against + ": " + e.what());
    }
    print_table(comparison, baseline_paths, current_path, baselines, currents, settings);
    if (!options.csv_path.empty()) write_csv(comparison, options.csv_path);
    if (!options.junit_path.empty()) write_junit(comparison, options.junit_path);
    if (!options.report_path.empty()) {
      // The current run's own rows (read again: the gate kept only what it judges), and the gate.
      std::vector<ResultsFile> current{{current_path, read_results_csv(current_path, reading)}};
      write_report(current, options.report_path, nullptr, "", "", &comparison, options.timeout_seconds);
    }
    const bool stale = current_judge && print_expectations(*current_judge);
    return comparison.regressions > 0 || stale ? kExitFail : kExitPass;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "dtsuite: error: %s\n", e.what());
    return exit_code_of(e);
  }
}

}  // namespace dts
