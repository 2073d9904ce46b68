// The measurement core of the scaling suite: which sub-world sizes and layouts a job of W ranks
// runs, the timing of one strategy or all_reduce on a sub-world (slowest rank, DESIGN.md Timing),
// and weak / strong scaling efficiency (DESIGN.md Scaling efficiency). No harness or suite headers:
// the suite builds on this, and the tests run it without the harness.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "strategies/strategy.h"
#include "strategies/strategy_spec.h"

namespace dts {

// Sub-world sizes of a job of `world` ranks: 1, 2, 4, ... up to `world`, and `world` itself when it
// is not a power of two (3 -> {1, 2, 3}; 6 -> {1, 2, 4, 6}). Error{invalid_argument} for world < 1.
std::vector<int> scaling_world_sizes(int world);

// weak: the per-rank batch is fixed, so the global batch grows with n; strong: the global batch is fixed.
enum class ScalingMode { weak, strong };
std::string_view name(ScalingMode mode);  // "weak", "strong"

// Training settings of every timed step: SGD (the cheapest optimizer, so the step is mostly the
// model and its communication), TrainConfig's defaults otherwise.
TrainConfig scaling_train_config();

// Rows a layout needs in its global batch: every micro-batch of every dp replica gets at least one
// row (dp x microbatches). A batch that cannot be split so is refused, as the equivalence suite does.
int64_t rows_needed(const ParallelConfig& layout);

// The global batch at n ranks: weak -> batch * n (`batch` is the per-rank batch), strong -> batch
// (the global batch, the same at every n). Error{invalid_argument} for n < 1 or batch < 1.
//
// Strong scaling must hold one batch for every n: pick batch >= W x microbatches for a job of W
// (dp <= n <= W, so dp x mb never exceeds it). scaling_layout refuses (nullopt) a layout the batch
// cannot fill, and the suite reports that n as skipped rather than timing a different batch.
int64_t scaled_batch(ScalingMode mode, int n, int64_t batch);

// The layout `spec` runs on n ranks in the scaling suite, with scaling_train_config():
//  - n = 1: the strategy's one-rank layout (dp = tp = pp = 1, its own ZeRO stage or none, its
//    micro-batches and schedule), for every strategy and every spec, pinned or not: it is T(1),
//    the reference every n is compared with (hybrid has no layouts_of entry on one rank).
//  - n > 1: the first layout of layouts_of(spec, n, ...) that `global_batch` can fill (rows_needed),
//    for a bare name or a pinned spec alike: pinned keys stay fixed and open ones take what n leaves
//    ("hybrid(dp=2,tp=2)" runs pp = 2 at n = 8; "hybrid(dp=2,tp=2,pp=1)" only n = 4).
// nullopt when there is none: a pipeline deeper than the model (gpipe with 3 layers at n = 4),
// a hybrid on a prime n (it needs two dimensions above 1), a fully pinned layout of another size,
// or a batch too small. `microbatches`: the pipeline's m (gpipe, 1f1b, hybrid) and the gradient
// accumulation of the others is 1, unless the spec pins mb.
std::optional<ParallelConfig> scaling_layout(const StrategySpec& spec, int n, const ModelSpec& model,
                                             int64_t global_batch, int microbatches);
// Why scaling_layout gives nullopt, naming the cause and the flag behind it: the model or the
// ranks (strategy_spec.h's why_no_layout: "3 layers cannot be split into 4 pipeline stages ...")
// or, where layouts exist, a batch too small for all of them; "" when there is a layout.
std::string why_no_scaling_layout(const StrategySpec& spec, int n, const ModelSpec& model, int64_t global_batch,
                                  int microbatches);

// One point of a scaling curve, the same on every member of the sub-world.
struct ScalingPoint {
  int n = 0;                      // ranks of the sub-world
  std::string layout;             // ParallelConfig::describe(), or "all_reduce;dtype=f32;op=sum"
  int64_t work_per_step = 0;      // global batch rows (strategy) or bytes (all_reduce)
  double seconds_per_step = 0;    // median over the timed steps, each the slowest member's time
  double throughput = 0;          // work_per_step / seconds_per_step: samples/s, or algbw bytes/s
  std::vector<double> samples;    // each timed step's time (slowest member), in order
};

// weak: E(n) = T(1) / T(n); strong: E(n) = T(1) / (n T(n)). Both 1 at n = 1, and 1 for a perfect
// scaler (weak: T(n) = T(1); strong: T(n) = T(1) / n). Error{invalid_argument} for n < 1 or a
// time that is not finite and positive.
double scaling_efficiency(ScalingMode mode, double t1, double tn, int n);

// Times `strategy_name` on `layout` over `members` (collective over them): builds the strategy
// (ProcessGroups split from `members`), runs `warmup` untimed steps, then `iters` timed steps, all
// on the same global batch of `global_batch` rows (samples [0, global_batch) of `model`'s data set).
// Each timed step starts after a barrier on `control_members` and its time is the slowest member's,
// taken there by one all_reduce(max) at the end: `control_members` is an untampered host-memory
// communicator over the same ranks, so timing never flows through the stack under test.
// Error{invalid_argument} (on every member alike) for sizes that disagree with the layout, a control
// communicator in device memory, a batch below rows_needed, iters < 1 or warmup < 0. A member that
// fails to build the strategy makes every member throw (agreed on `control_members`, the same kind,
// so an unsupported layout is skipped everywhere) instead of leaving the others waiting in the
// first collective.
ScalingPoint time_strategy_steps(Communicator& members, Communicator& control_members,
                                 const std::string& strategy_name, const ParallelConfig& layout,
                                 const ModelSpec& model, int64_t global_batch, int warmup, int iters,
                                 Precision precision = Precision::f32);

// all_reduce of `bytes` (f32, sum; in place, in buffers of members.memory()) over `members`, with
// the same timing discipline. throughput is the algorithm bandwidth, bytes / time (DESIGN.md
// Bandwidth). Error{invalid_argument} for bytes < 0 or not a multiple of 4, iters < 1, warmup < 0.
ScalingPoint time_all_reduce(Communicator& members, Communicator& control_members, int64_t bytes, int warmup,
                             int iters);

// CPU cores this process may run on: its affinity mask's count (what mpirun's binding leaves it),
// else std::thread::hardware_concurrency, at least 1.
int usable_cores();

// Whether the ranks on this node outnumber its cores. Pass the job's ranks on the node, members of
// the sub-world or not: a rank that waits outside the sub-world still polls inside MPI (Open MPI
// spins unless mpi_yield_when_idle is set), so it takes a core from the ranks being timed.
struct NodeCapacity {
  int cores = 1;
  int ranks_on_node = 1;
  bool oversubscribed = false;  // ranks_on_node > cores
};
// From this process's usable_cores(). Under a launcher that binds each rank to its own cores, a
// rank's mask shows only those: use the overload below, which unites the node's masks.
NodeCapacity node_capacity(int ranks_on_node);
// Collective over `node_ranks`, the job's ranks on this node (a host-memory communicator, such as
// one split from the control communicator): cores is the count of the union of their affinity
// masks, ranks_on_node its size.
NodeCapacity node_capacity(Communicator& node_ranks);

// The detail line of a scaling_efficiency row: mode and formula, T(1) and T(n), the layout at n,
// and the node's load; when oversubscribed, it says that the efficiency measures the machine, not
// the stack. `reference` is the n = 1 point.
std::string scaling_detail(ScalingMode mode, const ScalingPoint& reference, const ScalingPoint& point,
                           const NodeCapacity& capacity);

}  // namespace dts
