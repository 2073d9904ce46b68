// ZeRO step: per micro-batch, forward/backward on this rank's slice of the global batch (gradients
// pre-scaled by rows/global rows, as in ddp, so the sum over ranks is the global mean); on the last
// micro-batch one reduce_scatter leaves each rank the summed gradient of its shard, the optimizer
// steps the shard only, and (stages 1-2) one all_gather brings every rank the updated parameters.
#include "strategies/zero/zero_strategy.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <tuple>
#include <utility>

#include "core/error.h"

namespace dts {

template <class T>
ZeroStrategy<T>::ZeroStrategy(ZeroStage stage, const ModelSpec& spec, const ParallelConfig& config,
                              Communicator& comm, MlpCompute compute)
    : stage_(stage), spec_(spec), config_(config), comm_(comm), table_(comm.memory()),
      mlp_(spec, compute, comm.memory()), params_(comm.memory()), grads_(comm.memory()), state1_(comm.memory()),
      state2_(comm.memory()) {
  if (config.microbatches < 1) {
    throw Error(Error::Kind::invalid_argument, std::string(name()) + ": microbatches must be >= 1");
  }
  const int n = comm.size();
  psi_ = mlp_.parameter_count();
  shard_size_ = (psi_ + n - 1) / n;  // even_split's largest part, so every shard fits its slot
  std::tie(shard_first_, shard_count_) = even_split(psi_, n, comm.rank());

  // Stage 3: each rank generates only its own shard, so the full model never exists on one rank,
  // not even at start-up.
  const std::vector<double> init = stage_ == ZeroStage::parameters
                                       ? initial_shard(spec, shard_first_, shard_count_, shard_size_)
                                       : init_parameters(spec);
  const std::vector<T> host(init.begin(), init.end());
  params_.resize(static_cast<int64_t>(host.size()));
  params_.upload(host.data(), params_.size());
  grads_ = array(stage_ == ZeroStage::optimizer_states ? psi_ : shard_size_);
  state1_ = array(shard_size_);
  if (config.train.optimizer == OptimizerKind::adamw) state2_ = array(shard_size_);
  table_.synchronize();
}

template <class T>
kernels::Array<T> ZeroStrategy<T>::array(int64_t size) const {
  kernels::Array<T> zeros(table_.memory(), size);
  table_.zero(zeros.data(), size);
  return zeros;
}

std::vector<double> initial_shard(const ModelSpec& spec, int64_t first, int64_t count, int64_t slot) {
  std::vector<double> shard(static_cast<size_t>(slot), 0.0);
  const int64_t shard_end = first + count;
  for (const ParameterInfo& p : parameter_layout(spec)) {
    const int64_t begin = std::max(p.offset, first), end = std::min(p.offset + p.size(), shard_end);
    if (begin >= end) continue;
    init_parameter(spec, p, begin - p.offset, end - p.offset, shard.data() + (begin - first));
  }
  return shard;
}

std::string_view name(ZeroStage stage) {
  switch (stage) {
    case ZeroStage::optimizer_states: return "zero1";
    case ZeroStage::gradients: return "zero2";
    case ZeroStage::parameters: return "zero3";
  }
  return "zero";
}

std::vector<PlannedCall> zero_calls(ZeroStage stage, int microbatches, int n, int64_t shard_size, DType dtype) {
  std::vector<PlannedCall> calls;
  if (n > 1) {
    PlannedCall call;
    call.group = "dp";
    call.dtype = dtype;
    call.group_size = n;
    call.bytes = n * shard_size * static_cast<int64_t>(size_of(dtype));
    if (stage == ZeroStage::parameters) {
      call.collective = "all_gather";
      call.count = 2 * static_cast<int64_t>(microbatches);
      calls.push_back(call);
    }
    call.collective = "reduce_scatter";
    call.count = 1;
    calls.push_back(call);
    if (stage != ZeroStage::parameters) {
      call.collective = "all_gather";
      calls.push_back(call);
    }
  }
  calls.push_back(loss_call("dp", n));
  return calls;
}

std::vector<TrafficTheory> zero_traffic(ZeroStage stage, int microbatches, int n, int64_t shard_size, DType dtype) {
  if (n == 1) return {};
  const int collectives = stage == ZeroStage::parameters ? 2 * microbatches + 1 : 2;
  // Padded shards make every rank's share exact: no slack.
  return {{"dp", bytes_sent(zero_calls(stage, microbatches, n, shard_size, dtype), "dp"), 0,
           std::to_string(collectives) + "*(N-1)*S*" + std::to_string(size_of(dtype)) + " (S=ceil(Psi/N)=" +
               std::to_string(shard_size) + ", N=" + std::to_string(n) + ")"}};
}

template <class T>
std::string_view ZeroStrategy<T>::name() const {
  return dts::name(stage_);
}

template <class T>
template <class Collective>
void ZeroStrategy<T>::communicate(StepReport& report, Collective&& collective) {
  table_.synchronize();  // the kernels' results are in memory before the communicator's stream reads them
  // Ring model: N - 1 steps, each sending one S-element slot.
  blocking_collective(report, static_cast<double>((comm_.size() - 1) * shard_size_ * static_cast<int64_t>(sizeof(T))),
                      [&] {
                        collective();
                        // and the collective's are in memory before the next kernel reads them
                        if (table_.memory() == Memory::device) comm_.synchronize();
                      });
}

template <class T>
kernels::Array<T> ZeroStrategy<T>::pad(const T* full) const {
  const int n = comm_.size();
  kernels::Array<T> padded = array(n * shard_size_);
  for (int r = 0; r < n; ++r) {
    const auto [first, count] = even_split(psi_, n, r);
    table_.copy(padded.data() + r * shard_size_, full + first, count);
  }
  return padded;
}

template <class T>
void ZeroStrategy<T>::unpad(const kernels::Array<T>& padded, T* full) const {
  const int n = comm_.size();
  for (int r = 0; r < n; ++r) {
    const auto [first, count] = even_split(psi_, n, r);
    table_.copy(full + first, padded.data() + r * shard_size_, count);
  }
}

template <class T>
kernels::Array<T> ZeroStrategy<T>::gather_parameters(StepReport& report) {
  const int rank = comm_.rank();
  // Stage 3's params_ is already the padded slot (S elements, zero tail).
  kernels::Array<T> padded = array(comm_.size() * shard_size_);
  T* slot = padded.data() + rank * shard_size_;
  table_.copy(slot, params_.data(), shard_size_);
  communicate(report, [&] { comm_.all_gather(slot, padded.data(), static_cast<size_t>(shard_size_), dtype_of<T>()); });
  kernels::Array<T> full(table_.memory(), psi_);
  unpad(padded, full.data());
  return full;
}

template <class T>
void ZeroStrategy<T>::reduce_scatter_gradients(const kernels::Array<T>& full_grads, T* shard_out, StepReport& report) {
  kernels::Array<T> padded = pad(full_grads.data());
  T* slot = padded.data() + comm_.rank() * shard_size_;
  communicate(report, [&] {
    comm_.reduce_scatter(padded.data(), slot, static_cast<size_t>(shard_size_), dtype_of<T>(), ReduceOp::sum);
  });
  // Only the real elements: the padding stays out of the optimizer's reach.
  table_.copy(shard_out, slot, shard_count_);
}

template <class T>
StepReport ZeroStrategy<T>::step(const Batch& batch) {
  if (batch.size < 1) throw Error(Error::Kind::invalid_argument, std::string(name()) + ": empty global batch");
  const auto step_start = std::chrono::steady_clock::now();
  const int n = comm_.size(), rank = comm_.rank(), k_steps = config_.microbatches;
  const StragglerWait wait = straggler_wait_for(table_.memory());
  StepReport report;
  // A compute phase that began at `start`, once the device is done with it, the straggler's
  // extra time included.
  const auto compute_phase = [&](std::chrono::steady_clock::time_point start) {
    table_.synchronize();  // compute time is the device's, not the launches'
    report.compute_time += compute_seconds(config_, rank, start, wait);
  };

  // This rank's full-size gradient, accumulated over micro-batches. Stage 1 keeps it in grads_;
  // stages 2-3 hold it only until the reduce_scatter: our Mlp writes the whole gradient in one
  // backward, so it exists transiently. (Bucketed reduce_scatter during backward, as DeepSpeed does,
  // would bound the transient by a bucket; with accumulation DeepSpeed also reduces every
  // micro-batch to keep only the shard, where we follow ddp and communicate on the last one.)
  kernels::Array<T> transient_grads(table_.memory());
  kernels::Array<T>& full_grads = stage_ == ZeroStage::optimizer_states ? grads_ : transient_grads;
  full_grads.resize(psi_);
  kernels::Array<T> micro_grads(table_.memory());  // micro-batches after the first (forward_backward overwrites)

  double loss_sum = 0;
  for (int k = 0; k < k_steps; ++k) {
    const auto [micro_first, micro_rows] = even_split(batch.size, k_steps, k);
    const auto [local_first, local_rows] = even_split(micro_rows, n, rank);
    const Batch local = slice_batch(batch, micro_first + local_first, local_rows);
    const double scale = static_cast<double>(local_rows) / static_cast<double>(batch.size);
    if (k == 1) micro_grads.resize(psi_);
    T* target = k == 0 ? full_grads.data() : micro_grads.data();
    double loss = 0;
    if (stage_ == ZeroStage::parameters) {
      // ZeRO-3's schedule: gather for the forward, free, gather again for the backward, free.
      // Our Mlp cannot run backward from a stored forward without its parameters, so the second
      // gather feeds forward_backward, whose forward is a recomputation (what activation
      // checkpointing pays anyway). Gathering the whole model at once bounds the transient by Psi;
      // per-layer gathering (the next refinement) bounds it by a layer and moves the same volume.
      {
        kernels::Array<T> full = gather_parameters(report);
        const auto compute_start = std::chrono::steady_clock::now();
        loss = mlp_.loss(full.data(), local);
        compute_phase(compute_start);
      }  // freed here: between forward and backward the rank holds only its shard
      kernels::Array<T> full = gather_parameters(report);
      const auto compute_start = std::chrono::steady_clock::now();
      mlp_.forward_backward(full.data(), target, local, scale);
      compute_phase(compute_start);
    } else {
      const auto compute_start = std::chrono::steady_clock::now();
      loss = mlp_.forward_backward(params_.data(), target, local, scale);
      compute_phase(compute_start);
    }
    if (k > 0) table_.add(full_grads.data(), micro_grads.data(), psi_);
    activations_peak_ = std::max(activations_peak_, mlp_.activation_bytes());
    loss_sum += loss * static_cast<double>(local_rows);
  }
  micro_grads.release();

  // Stage 1 writes the reduced shard over its own region of the full gradient; stages 2-3 into
  // the S-element shard buffer, and drop the full one.
  T* shard_grads = stage_ == ZeroStage::optimizer_states ? grads_.data() + shard_first_ : grads_.data();
  reduce_scatter_gradients(full_grads, shard_grads, report);
  transient_grads.release();

  const auto optimizer_start = std::chrono::steady_clock::now();
  ++steps_;
  T* shard_params = stage_ == ZeroStage::parameters ? params_.data() : params_.data() + shard_first_;
  optimizer_step(table_, config_.train, shard_params, shard_grads, state1_.data(),
                 state2_.empty() ? nullptr : state2_.data(), shard_count_, steps_);
  table_.synchronize();
  report.compute_time += seconds_since(optimizer_start);

  if (stage_ != ZeroStage::parameters) {
    // Replicated parameters: every rank receives every updated shard.
    kernels::Array<T> padded = array(n * shard_size_);
    T* slot = padded.data() + rank * shard_size_;
    table_.copy(slot, shard_params, shard_count_);
    communicate(report, [&] { comm_.all_gather(slot, padded.data(), static_cast<size_t>(shard_size_), dtype_of<T>()); });
    unpad(padded, params_.data());
  }

  report.loss = global_mean_loss(comm_, loss_sum, batch.size);
  table_.synchronize();
  report.step_time = seconds_since(step_start);
  return report;
}

template <class T>
std::vector<double> ZeroStrategy<T>::full_parameters() {
  if (stage_ != ZeroStage::parameters) {
    const std::vector<T> params = params_.download();
    return {params.begin(), params.end()};
  }
  StepReport not_a_step;  // this gather is inspection, not training traffic
  const std::vector<T> full = gather_parameters(not_a_step).download();
  return {full.begin(), full.end()};
}

template <class T>
std::vector<TrafficTheory> ZeroStrategy<T>::expected_traffic() const {
  return zero_traffic(stage_, config_.microbatches, comm_.size(), shard_size_, dtype_of<T>());
}

template <class T>
MemoryReport ZeroStrategy<T>::memory() const {
  // The buffers themselves, which step() leaves at exactly the sizes of the model in the header.
  return {params_.bytes(), grads_.bytes(), state1_.bytes() + state2_.bytes(), activations_peak_};
}

template class ZeroStrategy<float>;
template class ZeroStrategy<double>;

namespace {
StrategyFactory zero_factory(ZeroStage stage) {
  return [stage](const ModelSpec& spec, const ParallelConfig& config, ProcessGroups& groups,
                 Precision precision) -> std::unique_ptr<Strategy> {
    Communicator& comm = *groups.dp;
    if (precision == Precision::f64) return std::make_unique<ZeroStrategy<double>>(stage, spec, config, comm);
    return std::make_unique<ZeroStrategy<float>>(stage, spec, config, comm, compute_of(precision));
  };
}

StrategyTraits zero_traits(const char* summary, int stage) {
  StrategyTraits traits = data_parallel_traits(summary);
  traits.zero = stage;
  return traits;
}
}  // namespace

DTS_REGISTER_STRATEGY("zero1", zero_traits("ZeRO stage 1: optimizer state sharded across dp", 1),
                      zero_factory(ZeroStage::optimizer_states));
DTS_REGISTER_STRATEGY("zero2", zero_traits("ZeRO stage 2: optimizer state and gradients sharded", 2),
                      zero_factory(ZeroStage::gradients));
DTS_REGISTER_STRATEGY("zero3", zero_traits("ZeRO stage 3: parameters too; gathered per pass", 3),
                      zero_factory(ZeroStage::parameters));
// The same classes on the device: they take the memory of their communicator (check_strategy has
// refused f64 there).
DTS_REGISTER_DEVICE_STRATEGY("zero1", zero_factory(ZeroStage::optimizer_states));
DTS_REGISTER_DEVICE_STRATEGY("zero2", zero_factory(ZeroStage::gradients));
DTS_REGISTER_DEVICE_STRATEGY("zero3", zero_factory(ZeroStage::parameters));

}  // namespace dts
