// The runs compare joins: a results file's rows split into runs (run_id, repetition), what the
// gate will not read let go of, each run given once, and the stack each run is of.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "results/record.h"

namespace dts {

// One run as compare sees it: the rows of one `dtsuite run` (run_id) and one pass over its plan
// (`repetition`, --repeat), read from `source`.
struct RecordedRun {
  std::string source;
  std::vector<Record> rows;
};

// The row key of a join between runs (compare's, ab's): suite, case, `metric` (a sibling row's:
// "time" for a bandwidth), op, dtype, placement, strategy, config, bytes and world size. Not the
// stack's labels: A/B joins the same case on two stacks.
std::string join_key(const Record& r, std::string_view metric);
inline std::string join_key(const Record& r) { return join_key(r, r.metric); }

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

// A stack as compare tells stacks apart: backend, device, and the job's ranks and nodes.
struct JobStack {
  std::string backend, device;
  std::string mpi_config;  // the MPI library's settings (Labels::mpi_config): another transport, another stack
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

// Throws Error{invalid_argument} with one line when the baseline and current runs are of
// different stacks (job_stacks): a regression gate across stacks would blame the code for the
// hardware (`dtsuite report` sets stacks side by side); or when either side has no rows.
void check_same_stack(const std::vector<RecordedRun>& baselines, const std::vector<RecordedRun>& currents);

}  // namespace dts
