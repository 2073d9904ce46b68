// What the planner knows of a stack: the measurements in its result CSVs, indexed and fitted.
// Collectives by (collective, dtype, group shape) from the collectives suite's `time` rows, and
// point-to-point messages by link class (same-node, other-node) from the topology suite's
// one-way `p2p_bandwidth` and `p2p_latency` rows, each an alpha-beta fit (alpha_beta.h). Nothing
// is assumed: a group, collective or link the files lack is refused with the command that would
// measure it, and files of different stacks are refused rather than mixed.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "planner/alpha_beta.h"
#include "results/record.h"

namespace dts::planner {

// The ranks a collective ran on: how many, over how many nodes, how many per node.
struct GroupShape {
  int ranks = 0, nodes = 1, ranks_per_node = 0;
  // "4 ranks on 1 node", "8 ranks on 2 nodes (4 per node)".
  std::string text() const;
  // One node: ranks_per_node is the ranks, so {4} and {4, 1, 4} are one group.
  GroupShape normalized() const;
  auto operator<=>(const GroupShape&) const = default;
};

// The stack a row was measured on: what must be alike for measurements to be one stack's.
struct StackIdentity {
  std::string backend, backend_version, mpi_version, device;
  std::string mpi_config;  // the MPI library's settings (Labels::mpi_config); empty: its defaults
  // "mpi (Open MPI v4.1.4) on cpu", "nccl 2.28.9 (Open MPI v4.1.4) on NVIDIA H100 80GB HBM3",
  // "mpi (Open MPI v4.1.4, btl=tcp,self) on cpu".
  std::string text() const;
  bool operator==(const StackIdentity&) const = default;
};
StackIdentity stack_of(const Labels& labels);

// One fitted collective, as the planner reports it.
struct CollectiveFit {
  std::string collective, dtype;
  GroupShape shape;
  AlphaBetaFit fit;
};

// Link classes of point-to-point messages.
inline constexpr std::string_view kSameNode = "same-node", kOtherNode = "other-node";

class Measurements {
 public:
  // Takes the rows of one results file (`source`, its path, for messages) that the model uses:
  // collectives `time` rows (out of place, of more than 0 bytes; reductions with redop=sum), topology one-way
  // `p2p_bandwidth` and `p2p_latency` rows, scaling `step_time` rows of one rank (every strategy's:
  // ddp's make the compute rate, the others' their factor over it); skipped, failed or timed-out
  // rows are left out, and so are steps with a straggler injected.
  // Error{invalid_argument} naming both files, and nothing of the file taken, when its rows are
  // of another stack than the files added before or than each other; and "SOURCE:LINE: ..." when
  // a row it takes holds a figure no clock reads: not a number, <= 0, or a time (a bandwidth's:
  // bytes / rate) outside kShortestFitTime .. kLongestFitTime (alpha_beta.h), which would
  // overflow the fit. `records` as read_results_csv gives them: the i-th is line i + 2.
  void add(const std::vector<Record>& records, const std::string& source);

  // The fit of `collective` in `dtype` on `shape`. Error{invalid_argument}, one line, naming what
  // is missing (the group shapes measured for it, if any) and the dtsuite command that measures
  // it, when there is no such measurement.
  // Returned by value: the cache it comes from is cleared by add().
  AlphaBetaFit collective(std::string_view collective, std::string_view dtype, const GroupShape& shape) const;
  // A fit for a group shape the files lack, extended from a measured one of the same collective
  // and dtype by the ring model: latency x (n - 1) / (n0 - 1) (a ring's steps), bus bandwidth
  // kept (nccl-tests' busbw, the bytes term x f(n) / f(n0), f = 2(n-1)/n for all_reduce and
  // (n-1)/n for reduce_scatter and all_gather). The source is a shape on more than one node when
  // `shape` spans nodes (the links between nodes set the pace), on one node otherwise, the same
  // ranks per node first, then the nearest in ranks. nullopt when there is none to extend from;
  // `from` says which shape it was and how.
  std::optional<AlphaBetaFit> extended(std::string_view collective, std::string_view dtype, const GroupShape& shape,
                                       std::string& from) const;
  // Point-to-point messages between two ranks of `link` (kSameNode, kOtherNode); Error as above.
  AlphaBetaFit link(std::string_view link) const;
  // Compute: one rank's step time against the training FLOPs of its step (cost_model.h,
  // training_flops; the fit's "bytes" are FLOPs), from the scaling suite's one-rank ddp
  // `step_time` rows and the model their config names. Error as above.
  AlphaBetaFit compute() const;
  // Seconds per FLOP (step_flops) of one rank's ddp step at `rows` rows a micro-batch: the
  // measured steps' time / FLOPs at each row count measured (the median where several), between
  // two row counts linear in log(rows), outside them the nearest's. A GEMM's speed depends on its
  // rows: here a step of 16 rows ran at 0.6 of the rate of 256. The step's costs that do not grow
  // with its rows (the optimizer's pass) are spread over its FLOPs at the rows measured.
  // `strategy`: where the files hold that strategy's own one-rank steps (the scaling suite's
  // n = 1 reference of each), ddp's rate times its rate over ddp's, taken at the rows it was
  // measured at and carried between and beyond them as the rate is: what it does beside the
  // FLOPs (ZeRO-3's gathers into fresh buffers, a pipeline's per-micro-batch work), which weighs
  // most at few rows. Error as compute() when no ddp row has its model.
  double compute_rate(int64_t rows, std::string_view strategy = "ddp") const;
  // The factor compute_rate applies to ddp's rate for `strategy` at `rows`; 1 where it has no
  // rows of its own.
  double compute_factor(std::string_view strategy, int64_t rows) const;
  // The fewest and most rows a micro-batch of the compute rows measured.
  std::pair<int64_t, int64_t> compute_rows() const;
  // The cores of the node the compute was measured on (the scaling rows' `cores`), on a CPU stack;
  // 0: not known, or a device stack (a GPU rank computes on a device of its own).
  int compute_cores() const { return compute_cores_; }

  // Every collective fit, for the planner's report of what it measured.
  std::vector<CollectiveFit> collectives() const;
  const StackIdentity& stack() const { return stack_; }
  // The files added, comma-separated (for messages).
  std::string sources() const;
  bool empty() const { return collective_points_.empty() && link_points_.empty() && compute_points_.empty(); }

 private:
  using CollectiveKey = std::tuple<std::string, std::string, GroupShape>;
  std::map<CollectiveKey, std::vector<TimedSize>> collective_points_;
  std::map<std::string, std::vector<TimedSize>, std::less<>> link_points_;
  mutable std::map<CollectiveKey, AlphaBetaFit> collective_fits_;
  mutable std::map<std::string, AlphaBetaFit, std::less<>> link_fits_;
  std::vector<TimedSize> compute_points_;
  // strategy -> rows a micro-batch -> seconds per FLOP of its one-rank steps
  std::map<std::string, std::map<int64_t, std::vector<double>>, std::less<>> compute_rates_;
  mutable std::optional<AlphaBetaFit> compute_fit_;
  int compute_cores_ = 0;
  int compute_rows_without_model_ = 0;
  StackIdentity stack_;
  bool have_stack_ = false;
  std::string stack_source_;
  std::vector<std::string> sources_;
};

// Refuses two of `paths` (each given with `flag`) that are one file: the same device and inode,
// symbolic links followed (./m.csv and m.csv, a link and its target, two hard links). Its rows
// would count twice. Error{invalid_argument}, one line naming both; a path that cannot be
// reached is left to the reader, which names the reason.
void refuse_repeated_files(const std::vector<std::string>& paths, std::string_view flag);

}  // namespace dts::planner
