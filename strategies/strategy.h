// The Strategy interface: one way of spreading a training step over ranks. Every strategy
// starts from the same Philox-initialized parameters, sees the same global batches, and must end
// with the parameters the single-process reference (single/) would have.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "kernels/cpu/cpu_kernels.h"

#include "strategies/single/single_trainer.h"
#include "strategies/workload.h"

namespace dts {

// Per step, per rank. Times in seconds; bytes in bytes.
struct StepReport {
  double loss = 0;               // mean loss over the global batch, before the update
  double step_time = 0;          // wall time of the whole step
  double compute_time = 0;       // forward, backward, optimizer
  double comm_time = 0;          // from the first collective launched to the last one completed
  // Time spent only on communication, not hidden by compute: waiting for it, and inside the
  // communicator's calls made during compute (ddp's launches and progress tests in backward).
  double exposed_comm_time = 0;
  // Wire bytes this rank sends per step under the ring model of each collective (all_reduce of c
  // elements: 2 c (N-1)/N; reduce_scatter / all_gather of N x S: (N-1) S) plus point-to-point
  // sends; training traffic only, not the one-element loss all_reduce.
  int64_t bytes_sent = 0;
  int64_t collectives = 0;       // gradient / parameter / activation collectives launched this step
  // Pipelines: the schedule's wall time on this stage and the part of it spent idle, waiting for
  // a neighbour stage's activations or gradients (bubble_fraction = idle_time / pipeline_time).
  double pipeline_time = 0, idle_time = 0;
};

// Bytes this rank holds.
struct MemoryReport {
  int64_t params = 0, grads = 0, optimizer = 0, activations_peak = 0;
  // Pipelines: the most micro-batches whose activations this stage held at once, and the bytes
  // of one micro-batch's activations (the largest micro-batch) on this stage.
  int64_t microbatches_in_flight_peak = 0, activation_bytes_per_microbatch = 0;
};

enum class PipelineSchedule { none, gpipe, one_f_one_b };
std::string_view name(PipelineSchedule schedule);  // "none", "gpipe", "1f1b"

// The layout of one training case: how many ranks split the batch (dp), each layer (tp) and the
// layers (pp). Ranks are numbered with tp innermost, then dp, then pp (Megatron-LM's order):
// rank = pp_index * dp * tp + dp_index * tp + tp_index, so a tp group is tp consecutive ranks.
struct ParallelConfig {
  TrainConfig train;
  int dp = 1, tp = 1, pp = 1;
  int zero = 0;                            // ZeRO stage across the dp group (0: plain all_reduce)
  int microbatches = 1;                    // per step: gradient accumulation, or the pipeline's m
  PipelineSchedule schedule = PipelineSchedule::none;
  // DDP gradient buckets; 0 (the default): a quarter of the gradient, between 1 and 25 MiB
  // (PyTorch's 25 MiB for every model of 100 MiB of gradients or more; ddp_strategy.cpp says why).
  size_t bucket_bytes = 0;
  // Parameter servers (strategies/ps/): `servers` ranks hold the parameters and dp is the count
  // of workers; staleness: ps-ssp's bound s; backup: ps-backup's b. 0 for every other strategy.
  int servers = 0, staleness = 0, backup = 0;
  // A compute straggler (--straggler RANK:FACTOR): rank `straggler_rank` of the layout makes each
  // of its compute phases last `straggler_factor` times as long (straggle()); -1: none.
  int straggler_rank = -1;
  double straggler_factor = 1;
  int world() const { return dp * tp * pp + servers; }
  // Whether one of this layout's ranks is the straggler (a layout smaller than the straggler's
  // rank has none).
  bool has_straggler() const { return straggler_rank >= 0 && straggler_rank < world() && straggler_factor > 1; }
  // "dp=2;tp=2;pp=1;zero=0;mb=4;schedule=1f1b": the CSV config keys of the layout; a parameter
  // server's add ";servers=1;staleness=0;backup=0", a layout with a straggler ";straggler=3:4".
  std::string describe() const;
};

// The communicators of a layout, split from the case's communicator (collective over it).
// world: every rank of the layout; dp: the ranks that hold the same shard and stage (same tp and
// pp index), tp: the ranks of one tensor-parallel group, pp: the stages of one pipeline. tp and pp
// are null where the layout's tp or pp is 1: no call goes to a group of one rank; dp is null where
// dp is 1 in a tp or pipeline layout without ZeRO (tp or pp above 1), which sends nothing over it.
struct ProcessGroups {
  Communicator* world = nullptr;
  std::unique_ptr<Communicator> dp, tp, pp;
  int dp_index = 0, tp_index = 0, pp_index = 0;
  // Error{invalid_argument} when world.size() != config.world().
  static ProcessGroups split(Communicator& world, const ParallelConfig& config);
};

// What one group's traffic should be: bytes this rank sends per step through it (the ring model
// for collectives, exact for point-to-point), and the slack the theory leaves (uneven ring
// segments, padding), each with the formula that gave it.
struct TrafficTheory {
  TrafficTheory() = default;
  TrafficTheory(std::string group_name, double sent, double sent_slack, std::string sent_formula)
      : group(std::move(group_name)), bytes(sent), slack(sent_slack), formula(std::move(sent_formula)) {}
  std::string group;  // "dp", "tp", "pp"
  double bytes = 0, slack = 0;
  std::string formula;
  // Bytes this rank receives per step through the group, where it differs from what it sends (a
  // parameter server's roles); unset: the same as `bytes` (ring collectives, a pipeline stage's
  // activations and gradients, gossip's exchange with its neighbours are symmetric).
  std::optional<double> received;
  std::string received_formula;
};

// One kind of call a rank makes each step through one of its groups. The layout planner
// (planner/) prices it with the stack's measured fit of `collective` on a group of `group_size`
// ranks; each strategy's expected_traffic() sums its bytes from the same calls (bytes_sent), so
// the calls the planner prices are the traffic the equivalence suite measures on the stack.
struct PlannedCall {
  std::string group;       // "dp", "tp", "pp"; "world" for the step's loss
  std::string collective;  // as the collectives suite names it: all_reduce, reduce_scatter, all_gather, send_recv
  DType dtype = DType::f32;
  int group_size = 1;
  // Per call, as the collectives suite's `bytes` counts it: all_gather's and reduce_scatter's
  // full buffer (n slots), a send's message.
  int64_t bytes = 0;
  int64_t count = 1;               // calls of this size per step
  bool overlaps_backward = false;  // launched while backward still computes (ddp's buckets)
  // send_recv: the layout ranks it goes from and to (tp innermost, then dp, then pp), so that its
  // link (same node or not) can be told; -1 for collectives.
  int from = -1, to = -1;
  // The step's mean loss (one f64 all_reduce): not training traffic, left out of bytes_sent (the
  // equivalence suite allows it 16 bytes).
  bool loss = false;
};
// What one rank sends for one call under the ring model: all_reduce 2(n-1)/n of the bytes,
// reduce_scatter and all_gather (n-1)/n, a send all of them.
double ring_bytes_sent(const PlannedCall& call);
// The training bytes a rank sends per step through `group`: count x ring_bytes_sent over the
// calls of that group, the loss left out.
double bytes_sent(const std::vector<PlannedCall>& calls, std::string_view group);
// The step's loss: one f64 all_reduce over `group` of `n` ranks (global_mean_loss).
PlannedCall loss_call(std::string group, int n);
// One point-to-point message of `bytes` from layout rank `from` to `to` (send_recv, a pair).
PlannedCall message_call(std::string group, DType dtype, int64_t bytes, int from, int to);

// Digest of state that a set of ranks must hold bit for bit alike: every rank of the case that
// reports the same `replicated_across` key must report the same digest.
struct ReplicaDigest {
  std::string key;
  uint64_t digest = 0;
};

// Every rank's ReplicaDigests compared across `control`: each key's digest against the first rank
// (in rank order) that reports it. Collective: every rank of `control` calls it (a rank with
// nothing replicated passes an empty list). Keys are compared by their 64-bit hash and named by
// their first 16 bytes.
struct ReplicaComparison {
  int compared = 0;    // reports compared against the first of their key
  int mismatches = 0;  // of those, digests that differ
  std::string first;   // "" or the first that differs: "rank 2's ps.range0 differs from rank 0's"
};
ReplicaComparison compare_replicas(Communicator& control, const std::vector<ReplicaDigest>& mine);

// What a strategy whose result depends on the order its messages arrive in (a parameter server
// serving whichever worker is ready) proves by replaying its own log in one process (audit()).
// Filled on rank 0 of the layout; `ran` is false elsewhere.
struct ReplayAudit {
  bool ran = false;
  std::string replayed;          // what was replayed, in words ("12 updates (...) from the servers' logs")
  std::string problem;           // "" when the replay reached the strategy's parameters bit for bit
  int64_t mismatched = 0;        // parameters whose bits differ from the replay's
  double max_abs_difference = 0;
  int64_t updates = 0, applied = 0, dropped = 0;  // updates; gradients they used, and dropped
  std::vector<double> staleness;           // per applied gradient: updates between its version and its use
  std::vector<double> dropped_per_update;  // gradients computed on each version and dropped (ps-backup)
  std::vector<double> lead;                // steps a worker was ahead of the slowest when let go (ps-ssp)
  std::vector<double> spread;              // gossip: per step, the largest spread of a parameter across ranks
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string_view name() const = 0;
  virtual StepReport step(const Batch& global_batch) = 0;  // collective: every rank, same batch
  virtual std::vector<double> full_parameters() = 0;        // reference layout (collective)
  virtual MemoryReport memory() const = 0;
  // The layout this strategy runs ("dp=2;tp=1;pp=2;zero=0;mb=4;schedule=1f1b").
  virtual std::string config() const = 0;
  // This rank's training traffic per step, one entry per group it sends through (none at N = 1).
  virtual std::vector<TrafficTheory> expected_traffic() const = 0;
  // What this rank holds that others must hold alike. Default: the full parameters, on every rank.
  // Replicated strategies add gradients and optimizer state, where a corruption too small to
  // change any parameter's rounding still shows (a flipped low bit of one gradient element).
  virtual std::vector<ReplicaDigest> replica_digests() { return {{"parameters", digest_of(full_parameters())}}; }
  // > 0 when this layout computes exactly what one process computes with gradient accumulation
  // over that many micro-batches (rows split by even_split, gradients summed in micro-batch
  // order): nothing is summed in another order, so the result must match bit for bit.
  virtual int same_order_microbatches() const { return 0; }
  // True when the final parameters depend on the order messages arrived in (asynchronous updates):
  // such a strategy is judged by its replay audit, and neither by the single-process reference
  // nor by a second run giving the same bits.
  virtual bool order_dependent() const { return false; }
  // False when the strategy trains another model than one process does by design (gossip: each
  // rank its own, mixed with its neighbours'): then its audit, not the single-process reference,
  // says whether the stack computed it right.
  virtual bool same_model_as_one_process() const { return !order_dependent(); }
  // True when this rank's StepReport::loss is the mean loss over the global batch at the
  // parameters before the step (the convergence suite's loss audit holds each such rank to it).
  // False where a rank reports its own rows' loss (a parameter-server worker, gossip) or a mean
  // of gradients computed on other versions (a server that does not wait for every worker).
  virtual bool reports_batch_loss() const { return true; }
  // True when no rank can begin step k + 1 before every rank has finished step k (a collective,
  // or a server waiting for every worker, holds them together): lining the ranks up before each
  // timed step then costs nothing they would not wait anyway. False where a rank may run ahead of
  // a slow one (asynchronous servers, gossip's neighbours): the scaling suite then times the
  // ranks free-running, from one common start.
  virtual bool lockstep() const { return true; }
  // Collective over the layout: the strategy's own log replayed in one process against its
  // parameters (std::nullopt: it keeps none).
  virtual std::optional<ReplayAudit> audit() { return std::nullopt; }
  // The learning rate the next step() uses: a schedule (the convergence suite's warm-up) changes
  // it between steps, as PyTorch's schedulers set a param group's lr. Default: Error{unsupported}
  // naming the strategy, so a suite that needs it reports SKIP.
  virtual void set_learning_rate(double /*lr*/) {
    throw Error(Error::Kind::unsupported, std::string(name()) + ": no learning-rate schedule (set_learning_rate)");
  }

 protected:
  // word_digest over the bytes: any differing bit changes the digest (collisions are irrelevant
  // for replicas that are either identical or corrupted by a fault). Eight bytes at a time, not
  // FNV-1a's one: gossip digests every model it sends and receives inside its timed step.
  template <class T>
  static uint64_t digest_of(const std::vector<T>& values, uint64_t seed = kFnvOffsetBasis) {
    return word_digest(values.data(), values.size() * sizeof(T), seed);
  }
  template <class T>
  static uint64_t digest_of(const T* values, size_t count, uint64_t seed = kFnvOffsetBasis) {
    return word_digest(values, count * sizeof(T), seed);
  }
};

// Sets the configured optimizer's lr: what Strategy::set_learning_rate does in every strategy
// whose optimizer steps read config.train (each rank of the layout sets the same value before the
// same step); Error{invalid_argument} naming `strategy` for a negative or non-finite one.
void set_optimizer_learning_rate(TrainConfig& train, double lr, std::string_view strategy);

// Strategies register by name beside their definition (DTS_REGISTER_STRATEGY) with the layout
// dimensions they may use; each is built in f32, f64, or bf16 compute with f32 master weights
// (the reference runs all three) over the process groups of its layout.
enum class Precision { f32, f64, bf16 };
inline MlpCompute compute_of(Precision precision) {
  return precision == Precision::bf16 ? MlpCompute::bf16 : MlpCompute::native;
}

// Which layouts a strategy runs (strategies/strategy_spec.h enumerates and validates them).
struct StrategyTraits {
  std::string summary;
  bool dp = false, tp = false, pp = false;  // dimensions that may exceed 1
  int zero = 0;                             // the ZeRO stage it always uses (zero1..3), else 0
  bool zero1_option = false;                // may add ZeRO-1 across dp (hybrid)
  PipelineSchedule schedule = PipelineSchedule::none;
  int min_parallel_dimensions = 0;          // hybrid: at least two of dp, tp, pp above 1
  bool servers = false;                     // parameter servers: the servers key, S + W ranks
  bool staleness = false, backup = false;   // ps-ssp's staleness key, ps-backup's backup key
  bool straggler = false;                   // slows its compute for --straggler (compute_seconds)
  bool accumulation = true;                 // takes micro-batches (mb; --accumulation where not pp)
};

// Traits of a data-parallel strategy (dp only) that slows its compute for --straggler.
inline StrategyTraits data_parallel_traits(std::string summary) {
  StrategyTraits traits;
  traits.summary = std::move(summary);
  traits.dp = true;
  traits.straggler = true;
  return traits;
}

using StrategyFactory =
    std::function<std::unique_ptr<Strategy>(const ModelSpec&, const ParallelConfig&, ProcessGroups&, Precision)>;
bool register_strategy(std::string name, StrategyTraits traits, StrategyFactory factory);
std::vector<std::string> registered_strategies();
// Error{invalid_argument} naming the known strategies when `name` is not one.
const StrategyTraits& strategy_traits(std::string_view name);
// Builds `name` over `groups` (split for `config`). Error{invalid_argument} for an unknown name
// or a layout the strategy does not run.
// What make_strategy would refuse before building anything, from the name, the layout, where the
// communicator's buffers live and the precision alone: a case calls it before it creates the
// communicators of its groups, so a SKIP costs none (NCCL's take seconds each). Throws as
// make_strategy does: Error{invalid_argument} for a layout the strategy cannot run,
// Error{unsupported} for what it cannot do here (host tensors on a device backend, f64 or bf16 on
// the device, --straggler it does not take).
void check_strategy(std::string_view name, const ParallelConfig& config, Memory memory, Precision precision);

std::unique_ptr<Strategy> make_strategy(std::string_view name, const ModelSpec& spec, const ParallelConfig& config,
                                        ProcessGroups& groups, Precision precision = Precision::f32);

#define DTS_REGISTER_STRATEGY(NAME, TRAITS, FACTORY)                                          \
  static const bool DTS_REGISTER_CONCAT(dts_strategy_registered_, __LINE__) = \
      ::dts::register_strategy(NAME, TRAITS, FACTORY)

// A strategy that also runs on the device registers its factory for device memory too (the same
// class, whose tensors live in its communicator's memory: kernels/device/kernel_table.h):
// make_strategy takes it when the communicator takes device memory, and refuses the strategy
// there (Error{unsupported}, a SKIP) when it has none. The device factory may refuse a precision
// or layout the same way.
using DeviceStrategyFactory = StrategyFactory;
bool register_device_strategy(std::string name, DeviceStrategyFactory factory);
std::vector<std::string> device_strategies();  // the names with a device factory in this build
#define DTS_REGISTER_DEVICE_STRATEGY(NAME, FACTORY)                                          \
  static const bool DTS_REGISTER_CONCAT(dts_device_strategy_registered_, __LINE__) = \
      ::dts::register_device_strategy(NAME, FACTORY)

// One process training `steps` global batches of `batch_rows` rows (batch s: samples [s B, (s+1) B))
// in `precision`, accumulating each step's gradient over `microbatches`
// (SingleTrainer::step_accumulated): what a layout that sums nothing in another order
// (Strategy::same_order_microbatches) must equal bit for bit. Returns the parameters, then each
// step's loss (a corruption the parameters' later roundings absorb often still shows in a loss).
std::vector<double> same_order_run(const ModelSpec& spec, const TrainConfig& train, Precision precision, int steps,
                                   int64_t batch_rows, int microbatches);

// The DType of a strategy's element type (f32 or f64), for its collectives.
template <class T>
constexpr DType dtype_of() {
  return sizeof(T) == 4 ? DType::f32 : DType::f64;
}

// Seconds since `start` on the steady clock (step reports).
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// How a straggler's rank spends its extra time: the host's wait (kernels::cpu::delay), or, on
// the device, a delay kernel the host then waits for (straggler_wait_for),
// so that the slower processor is the one that computes.
using StragglerWait = void (*)(double seconds);
// The wait of a strategy whose tensors live in `memory`: the host's for host memory, the
// device's delay kernel, waited for, for device memory.
StragglerWait straggler_wait_for(Memory memory);

// The straggler's extra time: on rank `rank` of the layout when it is config's straggler, waits
// (factor - 1) x `compute_seconds` (the phase it just computed) through `wait` and returns the
// seconds that took (0 elsewhere), which the caller books as compute: a slower processor, not a
// slower link.
inline double straggle(const ParallelConfig& config, int rank, double compute_seconds,
                       StragglerWait wait = kernels::cpu::delay) {
  if (!config.has_straggler() || rank != config.straggler_rank || !(compute_seconds > 0)) return 0;
  const auto start = std::chrono::steady_clock::now();
  wait((config.straggler_factor - 1) * compute_seconds);
  return seconds_since(start);
}

// The seconds of a compute phase that began at `start`, the straggler's extra time included
// (straggle()): what every strategy books as compute_time.
inline double compute_seconds(const ParallelConfig& config, int rank, std::chrono::steady_clock::time_point start,
                              StragglerWait wait = kernels::cpu::delay) {
  const double computed = seconds_since(start);
  return computed + straggle(config, rank, computed, wait);
}

// Runs a blocking collective and books it in `report`: all of its time is communication and all
// of it exposed (nothing overlaps a blocking call); `bytes`: what this rank puts on the wire under
// the ring model. comm_time sums the collectives rather than spanning first to last: compute that
// runs between them is not communication.
template <class Collective>
void blocking_collective(StepReport& report, double bytes, Collective&& collective) {
  const auto start = std::chrono::steady_clock::now();
  collective();
  const double elapsed = seconds_since(start);
  report.comm_time += elapsed;
  report.exposed_comm_time += elapsed;
  report.bytes_sent += static_cast<int64_t>(bytes + 0.5);
  ++report.collectives;
}

// The global batch's mean loss from each rank's sum of (shard mean loss x shard rows): one
// all_reduce of a double over `comm` (collective).
double global_mean_loss(Communicator& comm, double local_loss_sum, int64_t global_rows);

// Rows [first, first + count) of `batch` as a batch of their own.
Batch slice_batch(const Batch& batch, int64_t first, int64_t count);
// Rows of part `part` of `parts` when `rows` are split as evenly as possible (the first
// rows % parts parts get one more): returns {first row, row count}.
std::pair<int64_t, int64_t> even_split(int64_t rows, int parts, int part);

// ZeRO's flat shards on the wire: part r of even_split(psi, n, r) sits at r * slot in a buffer of
// n * slot elements (slot = ceil(psi / n), so every part fits), the tail of each slot zero. Both
// buffers in the memory of `table`, which copies.
template <class T>
void pad_shards(const kernels::KernelTable<T>& table, const T* full, int64_t psi, int n, int64_t slot, T* padded) {
  table.zero(padded, n * slot);
  for (int r = 0; r < n; ++r) {
    const auto [first, count] = even_split(psi, n, r);
    table.copy(padded + r * slot, full + first, count);
  }
}
template <class T>
void unpad_shards(const kernels::KernelTable<T>& table, const T* padded, int64_t psi, int n, int64_t slot, T* full) {
  for (int r = 0; r < n; ++r) {
    const auto [first, count] = even_split(psi, n, r);
    table.copy(full + first, padded + r * slot, count);
  }
}

}  // namespace dts
