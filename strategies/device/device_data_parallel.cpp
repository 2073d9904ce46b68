// DeviceDataParallel: ddp_strategy.cpp's and zero_strategy.cpp's steps on device memory.
#include "strategies/device/device_data_parallel.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "kernels/device/device_kernels.h"

namespace dts {

namespace device = kernels::device;

namespace {
std::string_view stage_name(int stage) {
  return stage == 0 ? std::string_view("ddp") : name(static_cast<ZeroStage>(stage));
}

// The straggler's wait on the device: a delay kernel of the length asked, waited for, so the
// device is as busy as a processor that much slower would be (strategy.h, StragglerWait).
void device_straggler_wait(double seconds) {
  device::delay(seconds);
  device::synchronize();
}
}  // namespace

DeviceDataParallel::DeviceDataParallel(int stage, const ModelSpec& spec, const ParallelConfig& config,
                                       Communicator& comm, Precision precision)
    : stage_(stage), spec_(spec), config_(config), comm_(comm), mlp_(spec, compute_of(precision), Memory::device) {
  if (precision == Precision::f64) {
    throw Error(Error::Kind::unsupported, std::string(name()) + " on the device: the device's kernels are f32");
  }
  if (stage < 0 || stage > 3) throw Error(Error::Kind::invalid_argument, "device data parallel: stage 0..3");
  if (config.microbatches < 1) {
    throw Error(Error::Kind::invalid_argument, std::string(name()) + ": microbatches must be >= 1");
  }
  if (comm.memory() != Memory::device) {
    throw Error(Error::Kind::invalid_argument, std::string(name()) + " on the device needs a device communicator");
  }
  const int n = comm.size();
  psi_ = mlp_.parameter_count();
  shard_size_ = (psi_ + n - 1) / n;
  std::tie(shard_first_, shard_count_) = even_split(psi_, n, comm.rank());
  const std::vector<double> init =
      stage_ == 3 ? initial_shard(spec, shard_first_, shard_count_, shard_size_) : init_parameters(spec);
  const std::vector<float> host(init.begin(), init.end());
  params_.resize(static_cast<int64_t>(host.size()));
  params_.upload(host.data(), static_cast<int64_t>(host.size()));
  const int64_t held = stage_ == 0 ? psi_ : shard_size_;
  grads_.resize(stage_ <= 1 ? psi_ : shard_size_);
  device::zero(grads_.data(), grads_.size());
  state1_.resize(held);
  device::zero(state1_.data(), state1_.size());
  if (config.train.optimizer == OptimizerKind::adamw) {
    state2_.resize(held);
    device::zero(state2_.data(), state2_.size());
  }
  if (stage_ == 0) plan_ = plan_buckets(mlp_.layout(), sizeof(float), config.bucket_bytes);
  device::synchronize();
}

std::string_view DeviceDataParallel::name() const {
  return stage_name(stage_);
}

template <class Collective>
void DeviceDataParallel::communicate(StepReport& report, Collective&& collective) {
  device::synchronize();  // the kernels' results are in memory before the communicator's stream reads them
  // Ring model: N - 1 steps, each sending one S-element slot.
  const double bytes = static_cast<double>((comm_.size() - 1) * shard_size_ * static_cast<int64_t>(sizeof(float)));
  blocking_collective(report, bytes, [&] {
    collective();
    comm_.synchronize();  // and the collective's are before the next kernel reads them
  });
}

void DeviceDataParallel::optimizer_step(float* params, const float* grads, float* state1, float* state2, int64_t n) {
  ++steps_;
  if (config_.train.optimizer == OptimizerKind::sgd) {
    device::sgd_momentum_step(params, grads, state1, n, config_.train.sgd);
  } else {
    device::adamw_step(params, grads, state1, state2, n, config_.train.adamw, steps_);
  }
}

void DeviceDataParallel::pad(const float* full) {
  const int n = comm_.size();
  padded_.resize(n * shard_size_);
  device::zero(padded_.data(), padded_.size());
  for (int r = 0; r < n; ++r) {
    const auto [first, count] = even_split(psi_, n, r);
    device::copy(padded_.data() + r * shard_size_, full + first, count);
  }
}

void DeviceDataParallel::unpad(float* full) const {
  const int n = comm_.size();
  for (int r = 0; r < n; ++r) {
    const auto [first, count] = even_split(psi_, n, r);
    device::copy(full + first, padded_.data() + r * shard_size_, count);
  }
}

Batch DeviceDataParallel::local_batch(const Batch& batch, int k) const {
  const auto [micro_first, micro_rows] = even_split(batch.size, config_.microbatches, k);
  const auto [local_first, local_rows] = even_split(micro_rows, comm_.size(), comm_.rank());
  return slice_batch(batch, micro_first + local_first, local_rows);
}

double DeviceDataParallel::micro_batch(const Batch& batch, int k, const float* params, float* target,
                                       StepReport& report, const std::function<void(size_t)>& on_ready) {
  const Batch local = local_batch(batch, k);
  const auto local_rows = local.size;
  const double scale = static_cast<double>(local_rows) / static_cast<double>(batch.size);
  const auto compute_start = std::chrono::steady_clock::now();
  const double loss = mlp_.forward_backward(params, target, local, scale, on_ready);
  device::synchronize();  // compute time is the device's, not the launches'
  report.compute_time += compute_seconds(config_, comm_.rank(), compute_start, device_straggler_wait);
  activations_peak_ = std::max(activations_peak_, mlp_.activation_bytes());
  return loss * static_cast<double>(local_rows);
}

void DeviceDataParallel::finish(StepReport& report, double loss_sum, int64_t rows,
                                std::chrono::steady_clock::time_point step_start) {
  report.loss = global_mean_loss(comm_, loss_sum, rows);
  device::synchronize();
  report.step_time = seconds_since(step_start);
}

StepReport DeviceDataParallel::step(const Batch& batch) {
  if (batch.size < 1) throw Error(Error::Kind::invalid_argument, std::string(name()) + ": empty global batch");
  return stage_ == 0 ? step_ddp(batch) : step_zero(batch);
}

StepReport DeviceDataParallel::step_ddp(const Batch& batch) {
  const auto step_start = std::chrono::steady_clock::now();
  const int n = comm_.size(), k_steps = config_.microbatches;
  StepReport report;
  std::vector<std::unique_ptr<Work>> in_flight(plan_.buckets.size());
  std::vector<int> missing = plan_.parameters_in_bucket;
  std::chrono::steady_clock::time_point first_launch;
  bool launched = false;
  const auto& layout = mlp_.layout();
  if (k_steps > 1 && micro_grads_.size() != psi_) micro_grads_.resize(psi_);

  // ddp_strategy.cpp's order: the first micro-batch writes grads_, each later one is added, the
  // last parameter by parameter as backward queues it.
  const auto on_ready = [&](size_t index) {
    if (k_steps > 1) {
      const ParameterInfo& p = layout[index];
      device::add(grads_.data() + p.offset, micro_grads_.data() + p.offset, p.size());
    }
    const size_t b = plan_.bucket_of[index];
    if (--missing[b] == 0) {
      device::synchronize();  // the bucket's gradients are computed before NCCL's stream reads them
      if (!launched) first_launch = std::chrono::steady_clock::now();
      launched = true;
      float* data = grads_.data() + plan_.buckets[b].first;
      const auto count = static_cast<size_t>(plan_.buckets[b].second - plan_.buckets[b].first);
      in_flight[b] = comm_.all_reduce_async(data, data, count, DType::f32, ReduceOp::sum);
      report.bytes_sent += static_cast<int64_t>(2.0 * static_cast<double>(count * sizeof(float)) * (n - 1) / n + 0.5);
      ++report.collectives;
    }
  };

  double loss_sum = 0;
  for (int k = 0; k < k_steps; ++k) {
    const bool last = k == k_steps - 1;
    float* target = k == 0 ? grads_.data() : micro_grads_.data();
    loss_sum += micro_batch(batch, k, params_.data(), target, report,
                            last ? std::function<void(size_t)>(on_ready) : nullptr);
    if (!last && k > 0) device::add(grads_.data(), micro_grads_.data(), psi_);
  }
  // micro_grads_ stays, as in the host class: freeing it here would wait (cudaFree waits for the
  // whole device) for the buckets in flight, and hide their exposed time from the report.

  const auto wait_start = std::chrono::steady_clock::now();
  for (auto& work : in_flight) {
    if (work) work->wait();  // on the host: the optimizer's kernels are queued after the reductions
  }
  report.exposed_comm_time = seconds_since(wait_start);
  if (launched) report.comm_time = seconds_since(first_launch);

  const auto optimizer_start = std::chrono::steady_clock::now();
  optimizer_step(params_.data(), grads_.data(), state1_.data(), state2_.size() ? state2_.data() : nullptr, psi_);
  device::synchronize();
  report.compute_time += seconds_since(optimizer_start);
  finish(report, loss_sum, batch.size, step_start);
  return report;
}

void DeviceDataParallel::gather_parameters(kernels::Array<float>& full, StepReport& report) {
  padded_.resize(comm_.size() * shard_size_);
  float* slot = padded_.data() + comm_.rank() * shard_size_;
  device::copy(slot, params_.data(), shard_size_);  // stage 3's params_ is the padded slot
  communicate(report, [&] { comm_.all_gather(slot, padded_.data(), static_cast<size_t>(shard_size_), DType::f32); });
  full.resize(psi_);
  unpad(full.data());
}

StepReport DeviceDataParallel::step_zero(const Batch& batch) {
  const auto step_start = std::chrono::steady_clock::now();
  const int k_steps = config_.microbatches;
  StepReport report;
  kernels::Array<float> transient_grads(Memory::device), full(Memory::device);
  kernels::Array<float>& full_grads = stage_ == 1 ? grads_ : transient_grads;
  full_grads.resize(psi_);
  if (k_steps > 1) micro_grads_.resize(psi_);

  double loss_sum = 0;
  for (int k = 0; k < k_steps; ++k) {
    float* target = k == 0 ? full_grads.data() : micro_grads_.data();
    if (stage_ == 3) {
      // zero_strategy.cpp's schedule: gather for the forward, free, gather again for the
      // forward-backward (whose forward recomputes), free.
      gather_parameters(full, report);
      const Batch local = local_batch(batch, k);
      const auto compute_start = std::chrono::steady_clock::now();
      loss_sum += mlp_.loss(full.data(), local) * static_cast<double>(local.size);
      report.compute_time += compute_seconds(config_, comm_.rank(), compute_start, device_straggler_wait);
      full.release();
      gather_parameters(full, report);
      micro_batch(batch, k, full.data(), target, report);
      full.release();
    } else {
      loss_sum += micro_batch(batch, k, params_.data(), target, report);
    }
    if (k > 0) device::add(full_grads.data(), micro_grads_.data(), psi_);
  }
  micro_grads_.release();

  // One reduce_scatter of the padded gradient leaves this rank the sum of its shard.
  pad(full_grads.data());
  float* slot = padded_.data() + comm_.rank() * shard_size_;
  communicate(report, [&] {
    comm_.reduce_scatter(padded_.data(), slot, static_cast<size_t>(shard_size_), DType::f32, ReduceOp::sum);
  });
  float* shard_grads = stage_ == 1 ? grads_.data() + shard_first_ : grads_.data();
  device::copy(shard_grads, slot, shard_count_);  // the real elements only: padding never reaches the optimizer
  transient_grads.release();

  const auto optimizer_start = std::chrono::steady_clock::now();
  float* shard_params = stage_ == 3 ? params_.data() : params_.data() + shard_first_;
  optimizer_step(shard_params, shard_grads, state1_.data(), state2_.size() ? state2_.data() : nullptr, shard_count_);
  device::synchronize();
  report.compute_time += seconds_since(optimizer_start);

  if (stage_ != 3) {
    // Replicated parameters: every rank receives every updated shard.
    device::zero(padded_.data(), padded_.size());
    device::copy(slot, shard_params, shard_count_);
    communicate(report, [&] { comm_.all_gather(slot, padded_.data(), static_cast<size_t>(shard_size_), DType::f32); });
    unpad(params_.data());
  }
  padded_.release();
  finish(report, loss_sum, batch.size, step_start);
  return report;
}

std::vector<double> DeviceDataParallel::full_parameters() {
  std::vector<float> host;
  if (stage_ == 3) {
    StepReport not_a_step;  // inspection, not training traffic
    kernels::Array<float> full(Memory::device);
    gather_parameters(full, not_a_step);
    padded_.release();
    host = full.download();
  } else {
    host = params_.download();
  }
  return {host.begin(), host.end()};
}

std::vector<ReplicaDigest> DeviceDataParallel::replica_digests() {
  if (stage_ != 0) return Strategy::replica_digests();
  const auto digest = [](const kernels::Array<float>& values, uint64_t seed) { return digest_of(values.download(), seed); };
  const uint64_t params = digest(params_, kFnvOffsetBasis);
  return {{"replica", digest(state2_, digest(state1_, digest(grads_, params)))}};
}

std::vector<TrafficTheory> DeviceDataParallel::expected_traffic() const {
  if (stage_ == 0) return ddp_traffic(plan_, comm_.size(), DType::f32);
  return zero_traffic(static_cast<ZeroStage>(stage_), config_.microbatches, comm_.size(), shard_size_, DType::f32);
}

MemoryReport DeviceDataParallel::memory() const {
  // Between steps ZeRO's transient buffers (micro-batch gradients, padded staging, stage 2/3's
  // full gradient, stage 3's gathered parameters) are released, and ddp keeps its micro-batch
  // gradient buffer (with accumulation), as the host classes do.
  return {params_.bytes(), grads_.bytes() + (stage_ == 0 ? micro_grads_.bytes() : 0), state1_.bytes() + state2_.bytes(),
          activations_peak_};
}

namespace {
DeviceStrategyFactory device_factory(int stage) {
  // f32 and bf16: make_strategy refuses f64 first (check_strategy).
  return [stage](const ModelSpec& spec, const ParallelConfig& config, ProcessGroups& groups,
                 Precision precision) -> std::unique_ptr<Strategy> {
    return std::make_unique<DeviceDataParallel>(stage, spec, config, *groups.dp, precision);
  };
}
}  // namespace

DTS_REGISTER_DEVICE_STRATEGY("ddp", device_factory(0));
DTS_REGISTER_DEVICE_STRATEGY("zero1", device_factory(1));
DTS_REGISTER_DEVICE_STRATEGY("zero2", device_factory(2));
DTS_REGISTER_DEVICE_STRATEGY("zero3", device_factory(3));

}  // namespace dts
