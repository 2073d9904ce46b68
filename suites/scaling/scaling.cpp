// Sub-world sizes, layouts, timing and efficiency of the scaling suite (scaling.h). The timed loop
// follows harness/timing.cpp's discipline (barrier, warm-up discarded, steady clock, slowest rank)
// without depending on the harness.
#include "suites/scaling/scaling.h"

#include <sched.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <memory>
#include <thread>

#include "comm/text.h"
#include "core/buffer.h"
#include "core/error.h"

namespace dts {

namespace {

Error invalid(const std::string& message) { return Error(Error::Kind::invalid_argument, message); }

// The median as results' compute_stats takes it (linear interpolation between the middle two), so
// the suite's value and its stats agree.
double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const double pos = 0.5 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (pos - static_cast<double>(lo));
}

void check_loop(int warmup, int iters) {
  if (iters < 1) throw invalid("scaling: iters must be >= 1, not " + std::to_string(iters));
  if (warmup < 0) throw invalid("scaling: warmup must be >= 0, not " + std::to_string(warmup));
}

void check_sizes(const Communicator& members, const Communicator& control_members) {
  // The timing's barrier and all_reduce pass host doubles.
  if (control_members.memory() != Memory::host) {
    throw invalid("scaling: the control communicator must work in host memory, not " +
                  std::string(name(control_members.memory())) + " (" + std::string(control_members.backend()) + ")");
  }
  if (control_members.size() != members.size()) {
    throw invalid("scaling: the control communicator has " + std::to_string(control_members.size()) +
                  " ranks, the members " + std::to_string(members.size()) + " (it must span the same ranks)");
  }
}

// Times `iters` calls of `step` after `warmup` untimed ones: a barrier on `control` before each
// timed call lines the members up, so a member's time is the step's as it saw it from a common
// start; the slowest member's time per step comes back on every member.
template <class Step>
std::vector<double> time_steps(Communicator& control, int warmup, int iters, Step&& step) {
  for (int i = 0; i < warmup; ++i) step();
  std::vector<double> local(static_cast<size_t>(iters));
  for (double& seconds : local) {
    control.barrier();
    const auto start = std::chrono::steady_clock::now();
    step();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::vector<double> slowest(local.size());
  control.all_reduce(local.data(), slowest.data(), local.size(), DType::f64, ReduceOp::max);
  return slowest;
}

// For a strategy whose ranks may run ahead of a slow one (Strategy::lockstep() false): one
// barrier, then `iters` steps with none between them. Each rank times its own steps; sample i is
// the seconds per global batch at the rate the ranks sustained at their i-th steps: global_batch
// / (sum over ranks of rows / that rank's i-th step time), `rows` being this rank's share of the
// batch (0 on a parameter server). Lockstep strategies give the same figure as time_steps.
template <class Step>
std::vector<double> time_free_running(Communicator& control, int warmup, int iters, double rows, int64_t global_batch,
                                      Step&& step) {
  for (int i = 0; i < warmup; ++i) step();
  std::vector<double> rates(static_cast<size_t>(iters));
  control.barrier();
  for (double& rate : rates) {
    const auto start = std::chrono::steady_clock::now();
    step();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rate = rows > 0 ? rows / seconds : 0;
  }
  std::vector<double> total(rates.size());
  control.all_reduce(rates.data(), total.data(), rates.size(), DType::f64, ReduceOp::sum);
  for (double& t : total) t = static_cast<double>(global_batch) / t;
  return total;
}

ScalingPoint point_of(int n, std::string layout, int64_t work, std::vector<double> samples) {
  ScalingPoint point;
  point.n = n;
  point.layout = std::move(layout);
  point.work_per_step = work;
  point.seconds_per_step = median_of(samples);
  point.throughput = static_cast<double>(work) / point.seconds_per_step;
  point.samples = std::move(samples);
  return point;
}

// "1.23 ms": three significant digits in the unit that keeps the number readable.
std::string format_seconds(double seconds) {
  char text[32];
  if (seconds >= 1) std::snprintf(text, sizeof(text), "%.3g s", seconds);
  else if (seconds >= 1e-3) std::snprintf(text, sizeof(text), "%.3g ms", seconds * 1e3);
  else std::snprintf(text, sizeof(text), "%.3g us", seconds * 1e6);
  return text;
}

}  // namespace

std::vector<int> scaling_world_sizes(int world) {
  if (world < 1) throw invalid("scaling: a job has at least one rank, not " + std::to_string(world));
  std::vector<int> sizes;
  for (int n = 1; n <= world; n *= 2) {
    sizes.push_back(n);
    if (n > world / 2) break;  // doubling again would pass world (and could overflow at INT_MAX)
  }
  if (sizes.back() != world) sizes.push_back(world);
  return sizes;
}

std::string_view name(ScalingMode mode) { return mode == ScalingMode::weak ? "weak" : "strong"; }

TrainConfig scaling_train_config() {
  TrainConfig train;
  train.optimizer = OptimizerKind::sgd;
  return train;
}

int64_t rows_needed(const ParallelConfig& layout) {
  return static_cast<int64_t>(layout.dp) * layout.microbatches;
}

int64_t scaled_batch(ScalingMode mode, int n, int64_t batch) {
  if (n < 1) throw invalid("scaled_batch: n must be >= 1, not " + std::to_string(n));
  if (batch < 1) throw invalid("scaled_batch: the batch must be >= 1 row, not " + std::to_string(batch));
  return mode == ScalingMode::weak ? batch * n : batch;
}

namespace {

// The layouts scaling_layout chooses among, before the batch is asked: n = 1 the strategy's
// one-rank layout, otherwise layouts_of's.
std::vector<ParallelConfig> scaling_candidates(const StrategySpec& spec, int n, const ModelSpec& model,
                                               int microbatches) {
  if (n < 1) throw invalid("scaling_layout: n must be >= 1, not " + std::to_string(n));
  if (microbatches < 1) throw invalid("scaling_layout: microbatches must be >= 1, not " + std::to_string(microbatches));
  const StrategyTraits& traits = strategy_traits(spec.name);
  const LayoutDefaults defaults{1, microbatches, model.layers, model.width};
  // A parameter server has no one-rank form (a server and a worker at least): no T(1).
  if (n > 1 || traits.servers) return layouts_of(spec, n, defaults);
  // The reference T(1): the same work per step (micro-batches, schedule) on one rank. A pinned
  // dp/tp/pp describes the layout at its own size, not this one; ZeRO-1 across one rank is plain.
  ParallelConfig one;
  one.zero = traits.zero;
  const auto mb = spec.pinned.find("mb");
  one.microbatches = mb != spec.pinned.end() ? mb->second : traits.pp ? microbatches : defaults.accumulation;
  one.schedule = spec.schedule.value_or(traits.schedule);
  return {one};
}

}  // namespace

std::optional<ParallelConfig> scaling_layout(const StrategySpec& spec, int n, const ModelSpec& model,
                                             int64_t global_batch, int microbatches) {
  for (ParallelConfig& layout : scaling_candidates(spec, n, model, microbatches)) {
    if (global_batch < rows_needed(layout)) continue;
    layout.train = scaling_train_config();
    return layout;
  }
  return std::nullopt;
}

std::string why_no_scaling_layout(const StrategySpec& spec, int n, const ModelSpec& model, int64_t global_batch,
                                  int microbatches) {
  const std::vector<ParallelConfig> candidates = scaling_candidates(spec, n, model, microbatches);
  if (candidates.empty()) return why_no_layout(spec, n, LayoutDefaults{1, microbatches, model.layers, model.width});
  int64_t least = rows_needed(candidates.front());
  for (const ParallelConfig& layout : candidates) {
    if (global_batch >= rows_needed(layout)) return {};
    least = std::min(least, rows_needed(layout));
  }
  return "a global batch of " + std::to_string(global_batch) + " rows leaves some of the dp x mb = " +
         std::to_string(least) + " micro-batches without a row (--rank-batch, --microbatches)";
}

double scaling_efficiency(ScalingMode mode, double t1, double tn, int n) {
  if (n < 1) throw invalid("scaling_efficiency: n must be >= 1, not " + std::to_string(n));
  if (!std::isfinite(t1) || !std::isfinite(tn) || t1 <= 0 || tn <= 0) {
    throw invalid("scaling_efficiency: times must be finite and positive (T(1) = " + std::to_string(t1) +
                  ", T(n) = " + std::to_string(tn) + ")");
  }
  return mode == ScalingMode::weak ? t1 / tn : t1 / (n * tn);
}

ScalingPoint time_strategy_steps(Communicator& members, Communicator& control_members,
                                 const std::string& strategy_name, const ParallelConfig& layout,
                                 const ModelSpec& model, int64_t global_batch, int warmup, int iters,
                                 Precision precision) {
  check_loop(warmup, iters);
  check_sizes(members, control_members);
  if (members.size() != layout.world()) {
    throw invalid("scaling: " + strategy_name + " " + layout.describe() + " needs " + std::to_string(layout.world()) +
                  " ranks, the sub-world has " + std::to_string(members.size()));
  }
  if (global_batch < rows_needed(layout)) {
    throw invalid("scaling: " + strategy_name + " " + layout.describe() + ": a global batch of " +
                  std::to_string(global_batch) + " rows leaves some of its dp x mb = " +
                  std::to_string(rows_needed(layout)) + " micro-batches without a row");
  }
  // Every member makes the whole batch (strategies take the global batch and slice their rows);
  // made before the timed loop, so data generation is not part of a step.
  const Batch batch = make_batch(model, 0, global_batch);
  ProcessGroups groups = ProcessGroups::split(members, layout);
  std::unique_ptr<Strategy> strategy;
  std::exception_ptr failure;
  try {
    strategy = make_strategy(strategy_name, model, layout, groups, precision);
  } catch (...) {
    failure = std::current_exception();
  }
  leave_together(control_members, failure);  // comm/text.h: all members leave together
  if (strategy->lockstep()) {
    std::vector<double> samples = time_steps(control_members, warmup, iters, [&] { strategy->step(batch); });
    return point_of(members.size(), layout.describe(), global_batch, std::move(samples));
  }
  // Free-running: the rows this rank trains on (the data-parallel ranks after the servers).
  const int rank = members.rank();
  const double rows =
      rank < layout.servers ? 0.0 : static_cast<double>(even_split(global_batch, layout.dp, rank - layout.servers).second);
  std::vector<double> samples =
      time_free_running(control_members, warmup, iters, rows, global_batch, [&] { strategy->step(batch); });
  return point_of(members.size(), layout.describe() + ";timing=free-running", global_batch, std::move(samples));
}

ScalingPoint time_all_reduce(Communicator& members, Communicator& control_members, int64_t bytes, int warmup,
                             int iters) {
  check_loop(warmup, iters);
  check_sizes(members, control_members);
  constexpr int64_t kF32Bytes = 4;
  if (bytes < 0 || bytes % kF32Bytes != 0) {
    throw invalid("scaling: all_reduce of f32 needs a byte count that is a non-negative multiple of 4, not " +
                  std::to_string(bytes));
  }
  const auto count = static_cast<size_t>(bytes / kF32Bytes);
  Buffer buffer(members.memory(), static_cast<size_t>(bytes));
  // Ones: a sum of n ones stays exact, so repeated in-place sums never reach inf or denormals (whose
  // arithmetic is slower on some CPUs) within any number of iterations the suite runs.
  const std::vector<float> ones(count, 1.0f);
  buffer.copy_from_host(ones.data(), ones.size() * sizeof(float));
  std::vector<double> samples = time_steps(control_members, warmup, iters, [&] {
    members.all_reduce(buffer.data(), buffer.data(), count, DType::f32, ReduceOp::sum);
    members.synchronize();  // a device backend returns once the call is queued: time it done
  });
  return point_of(members.size(), "all_reduce;dtype=f32;op=sum", bytes, std::move(samples));
}

int usable_cores() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) {
    const int count = CPU_COUNT(&mask);
    if (count > 0) return count;
  }
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

NodeCapacity node_capacity(int ranks_on_node) {
  if (ranks_on_node < 1) {
    throw invalid("node_capacity: ranks_on_node must be >= 1, not " + std::to_string(ranks_on_node));
  }
  const int cores = usable_cores();
  return {cores, ranks_on_node, ranks_on_node > cores};
}

NodeCapacity node_capacity(Communicator& node_ranks) {
  if (node_ranks.memory() != Memory::host) {
    throw invalid("node_capacity: the node's communicator must work in host memory (the control one), not " +
                  std::string(name(node_ranks.memory())));
  }
  // The affinity mask as 64-bit words, gathered from every rank of the node and united here.
  constexpr size_t kWords = sizeof(cpu_set_t) / sizeof(uint64_t);
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::vector<int64_t> mine(kWords, 0);
  const bool known = sched_getaffinity(0, sizeof(mask), &mask) == 0 && CPU_COUNT(&mask) > 0;
  for (int cpu = 0; known && cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mask)) mine[static_cast<size_t>(cpu) / 64] |= int64_t{1} << (cpu % 64);
  }
  std::vector<int64_t> all(kWords * static_cast<size_t>(node_ranks.size()));
  node_ranks.all_gather(mine.data(), all.data(), kWords, DType::i64);
  int unknown = known ? 0 : 1, any_unknown = 0;
  node_ranks.all_reduce(&unknown, &any_unknown, 1, DType::i32, ReduceOp::max);
  const int ranks = node_ranks.size();
  if (any_unknown) return node_capacity(ranks);  // some rank could not read its mask: the whole machine's count
  int cores = 0;
  for (size_t w = 0; w < kWords; ++w) {
    uint64_t word = 0;
    for (int r = 0; r < ranks; ++r) word |= static_cast<uint64_t>(all[static_cast<size_t>(r) * kWords + w]);
    cores += std::popcount(word);
  }
  cores = std::max(cores, 1);
  return {cores, ranks, ranks > cores};
}

std::string scaling_detail(ScalingMode mode, const ScalingPoint& reference, const ScalingPoint& point,
                           const NodeCapacity& capacity) {
  const std::string n = std::to_string(point.n);
  std::string detail = std::string(name(mode)) +
                       (mode == ScalingMode::weak ? ": E = T(1)/T(n)" : ": E = T(1)/(n T(n))") +
                       ", T(1) = " + format_seconds(reference.seconds_per_step) +
                       (point.n == 1 ? "" : ", T(" + n + ") = " + format_seconds(point.seconds_per_step)) +
                       " (" + point.layout + "); " +
                       std::to_string(capacity.ranks_on_node) + " ranks on " + std::to_string(capacity.cores) +
                       " cores";
  if (capacity.oversubscribed) {
    detail += ": oversubscribed, so this efficiency measures the machine, not the stack";
  }
  return detail;
}

}  // namespace dts
