// The logic of `dtsuite compare`: joins a baseline run and a current run row by row and judges
// each change against a tolerance AND the runs' own noise. Lives in results/ (depends on Record
// only) so it is unit-testable. The gate's parts, each readable alone: the runs and their stacks
// (runs.h), the noise models (noise.h: between runs; mann_whitney.h: within a run's samples),
// the verdicts (here, compare.cpp), the rendering (harness/compare_command.cpp: table, CSV, JUnit).
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "results/mann_whitney.h"
#include "results/record.h"
#include "results/runs.h"

namespace dts {

// Which way is worse, from the unit and the metric (results/SCHEMA.md): time in seconds lower,
// bandwidth (bytes_per_second), scaling_efficiency and throughput higher, memory_* bytes lower.
// Everything else (errors, counts, ratios such as bubble_fraction) is shown but not judged:
// correctness has its own verdicts, and a verdict change is judged separately.
enum class Direction : uint8_t { lower_is_better, higher_is_better, not_judged };
Direction direction_of(const Record& record);

enum class Outcome : uint8_t {
  unchanged,   // within the tolerance or inside the noise
  improved,    // better by more than the tolerance and the noise
  regressed,   // worse by more than the tolerance and the noise, or pass -> fail/timeout, or no longer runs
  not_judged,  // no direction, or no usable baseline value
  missing,     // in the baseline, not in the current run, though the case ran: a regression too
  blind,       // not worse beyond the noise, but the noise hides a change of the tolerance: never a pass
};
std::string_view name(Outcome outcome);

struct CompareSettings {
  double tolerance = 0.05;  // relative change that is never a regression, however significant
  bool use_samples = false; // judge noise from per-iteration samples (Mann–Whitney U) where present
  // One-sided significance level of the U test. 0.01: a gate judges hundreds of rows per run, so
  // a false alarm rate near 5% per row (the usual 0.05) would flag several unchanged rows in every
  // run; and with the quick suite's 5 iterations per side the only p-values below 0.01 are 1/252
  // (every current sample worse than every baseline sample) and 2/252 (all but one pair), the same
  // strictness as the p05/p95 rule, while longer runs let smaller, consistent shifts count.
  double alpha = 0.01;
  // With two or more baseline runs: the chance that a run of an unchanged stack fails the gate,
  // shared over the rows judged against the between-run noise (each row at false_alarm / rows,
  // Bonferroni). 0.05: one unchanged run in 20 flags a row.
  double false_alarm = 0.05;
  // Timing verdicts need this many baseline runs with the row, counted by run id (the passes of
  // one --repeat run share its machine state) (0: min_baseline_runs(false_alarm), 7 at 5%);
  // with fewer, rows whose values vary from run to run are `blind` unless a verdict or the
  // structure changed. 1 restores the within-run rules (p05/p95, --samples) for one baseline run,
  // which do not see how runs differ.
  size_t min_runs = 0;
};

// What would let a blind row see a change of the tolerance.
enum class Cure : uint8_t {
  none,        // not blind
  runs,        // more baseline runs: fewer than the least for a timing verdict, or more narrow it enough
  iterations,  // more iterations per run: the runs' own noise in their medians is most of it
  interleave,  // neither: the runs differ by more than the tolerance; only interleaved A/B runs cancel that
};

struct ComparedRow {
  Record baseline, current;  // current is empty (metric "") for a missing row; baseline for a new failure
  std::string label;         // case id, placement, and config when needed to tell rows apart
  Direction direction = Direction::not_judged;
  Outcome outcome = Outcome::not_judged;
  double change_percent = std::numeric_limits<double>::quiet_NaN();  // (current - baseline) / |baseline| * 100
  double p_value = std::numeric_limits<double>::quiet_NaN();  // the test's that decided (U or t)
  // Between-run noise (two or more baseline runs): the values are the medians over the runs,
  // `allowed_percent` the worsening the noise allows at the row's false-alarm rate.
  size_t baseline_runs = 0, current_runs = 0;
  double allowed_percent = std::numeric_limits<double>::quiet_NaN();
  // The smallest worsening, in percent (a time's rise, a bandwidth's drop: the tolerance's
  // scale), this row would be flagged for in 9 runs of 10 at its
  // false-alarm rate (its noise model and the run counts); +inf: none (too few baseline runs);
  // NaN: not judged by numbers. Above the tolerance, the row is `blind` unless it moved beyond it.
  double detectable_percent = std::numeric_limits<double>::quiet_NaN();
  Cure cure = Cure::none;
  size_t cure_runs = 0;      // Cure::runs: the baseline runs that would do
  std::string reason;        // why the outcome, in a few words ("p05 1.3e-05 > baseline p95 1.2e-05")
};

struct Comparison {
  std::vector<ComparedRow> rows;  // baseline order; then failures that only the current run has
  size_t regressions = 0, improvements = 0, unchanged = 0, not_judged = 0, blind = 0;
  // The gate's power over the rows judged by numbers: detectable at most the tolerance, only a
  // larger change, or nothing (too few baseline runs).
  size_t detect_tolerance = 0, detect_larger = 0, detect_nothing = 0;
  size_t min_runs = 0;            // the least baseline runs for a timing verdict, as applied
  size_t only_in_current = 0;     // rows the baseline lacks (new metrics or cases): not judged, not listed
  size_t baseline_runs = 0, current_runs = 0;
  size_t noise_judged = 0;        // rows judged against the between-run noise
  size_t noise_measurements = 0;  // of them, distinct measurements (a bandwidth of a judged time is not)
  double row_alpha = 0;           // each such row's false-alarm rate (its share of false_alarm / noise_measurements)
  size_t family_tests = 0;        // sets of a family's rows judged together (a bandwidth of judged times: none)
  double family_alpha = 0;        // each set's false-alarm rate
};


// One baseline run against one current run. Joins by (suite, case, metric, op, dtype, bytes,
// placement, strategy, config, world_size); a key that repeats within a run is matched occurrence
// by occurrence. Throws Error{invalid_argument} with one line when the two are one run
// (check_distinct_runs), when the runs' stacks differ (job_stacks) or when cases of the baseline
// are missing from the current run.
Comparison compare_runs(const std::vector<Record>& baseline, const std::vector<Record>& current,
                        const CompareSettings& settings);

// The gate over several runs of each side, each run given once (check_distinct_runs). The
// structure (the join, missing cases, verdicts) is judged between the last baseline run (the most
// recent) and the first current run; a changed verdict in any current run counts. Numbers: with one baseline run, as above; with two or more,
// each row's values over the runs against the between-run noise (results/noise.h): the row's
// spread over the baseline runs, moderated towards the spread of like rows (same suite, metric,
// operation and size within a factor of 8), at least what each run's own iterations leave in
// its median; a regression is worse by more than the tolerance and beyond that noise at the row's
// false-alarm rate. Families too (the sizes of one collective's sweep): the mean log over each
// set of sizes (every size, from each size up, up to each size) in each run, judged against the
// same means of the baseline runs; the family's most significant set beyond its noise and the
// tolerance flags its rows that are worse by more than the tolerance. The false-alarm rate goes
// half to the rows, half to the sets. Throws as above; runs of different stacks are refused.
Comparison compare_runs(const std::vector<RecordedRun>& baselines, const std::vector<RecordedRun>& currents,
                        const CompareSettings& settings);

}  // namespace dts
