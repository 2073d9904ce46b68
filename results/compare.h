// The logic of `dtsuite compare`: joins a baseline run and a current run row by row and judges
// each change against a tolerance AND the runs' own noise. Lives in results/ (depends on Record
// only) so it is unit-testable; harness/compare_command.cpp reads the files and prints the table.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "results/record.h"

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
};

// One run as compare sees it: the rows of one `dtsuite run` (run_id) and one pass over its plan
// (`repetition`, --repeat), read from `source`.
struct RecordedRun {
  std::string source;
  std::vector<Record> rows;
};

// A file's rows as runs, by (run_id, repetition) in order of first appearance; the rows are
// moved, not copied, when the caller gives them up.
std::vector<RecordedRun> split_runs(std::vector<Record>&& rows, const std::string& source);
std::vector<RecordedRun> split_runs(const std::vector<Record>& rows, const std::string& source);

// Lets go of what compare_runs will not read of `run`, so that a long history of baseline runs
// fits in memory (README, *Comparing runs*, gives the bytes held per byte of input): the
// per-iteration samples unless `use_samples`; and of a baseline run that is not the most recent
// (`numbers_only`: the gate reads its numbers, never its text) also its samples, detail,
// timestamp, host, versions and seed. What is kept: the values, statistics and verdicts, the
// labels of the join and of the stack, and the run's identity.
void release_unread(RecordedRun& run, bool numbers_only, bool use_samples);

// A run is (run_id, repetition), whatever file holds it. Throws Error{invalid_argument} with one
// line naming the run, its repetition and its files when a run is given twice (two copies of a
// file in a folder, one file named twice: its values would count twice and the spread between
// runs shrink), or when a current run is also among the baselines (it would be judged against
// itself; `compare a.csv a.csv` is told that the baseline and the current run are the same run).
// Several repetitions of the current run are several current runs: accepted while no baseline is
// one of them. compare_runs checks this first.
void check_distinct_runs(const std::vector<RecordedRun>& baselines, const std::vector<RecordedRun>& currents);

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
  std::string reason;        // why the outcome, in a few words ("p05 1.3e-05 > baseline p95 1.2e-05")
};

struct Comparison {
  std::vector<ComparedRow> rows;  // baseline order; then failures that only the current run has
  size_t regressions = 0, improvements = 0, unchanged = 0, not_judged = 0;
  size_t only_in_current = 0;     // rows the baseline lacks (new metrics or cases): not judged, not listed
  size_t baseline_runs = 0, current_runs = 0;
  size_t noise_judged = 0;        // rows judged against the between-run noise
  size_t noise_measurements = 0;  // of them, distinct measurements (a bandwidth of a judged time is not)
  double row_alpha = 0;           // each such row's false-alarm rate (its share of false_alarm / noise_measurements)
  size_t family_tests = 0;        // sets of a family's rows judged together (a bandwidth of judged times: none)
  double family_alpha = 0;        // each set's false-alarm rate
};


// A stack as compare tells stacks apart: backend, device, and the job's ranks and nodes.
struct JobStack {
  std::string backend, device;
  int world_size = 0, nodes = 0, ranks_per_node = 0;  // the job's, not a sub-world's
  bool operator==(const JobStack&) const = default;
};

// The distinct stacks of `records`, in order of first appearance. The rows of one job (run_id,
// backend, device, job_size) give one stack: its nodes and ranks_per_node are the largest any of
// its rows says. A whole-job row (collectives, or a sub-world of every rank) has the job's own;
// a sub-world spans no more nodes and holds no more ranks on one than the job, so the largest is
// the job's whenever one row covers the whole job, and the widest sub-world's (a function of the
// sweep and the placement, equal across runs of one stack) when none does.
std::vector<JobStack> job_stacks(const std::vector<Record>& records);

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

// One-sided Mann–Whitney U test. U counts the pairs (x from `worse`, y from `better`) with x > y,
// ties counting 1/2; returns P(U >= observed) when both samples come from one distribution. Exact
// (the permutation distribution) without ties up to 50 samples a side; otherwise the normal
// approximation with tie and continuity corrections.
double mann_whitney_p_greater(const std::vector<double>& worse, const std::vector<double>& better);

// The smallest p-value the exact test can give with n and m samples: 1 / C(n+m, n).
double mann_whitney_smallest_p(size_t n, size_t m);

}  // namespace dts
