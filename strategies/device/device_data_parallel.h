// ddp and zero1-3 on the device (a CUDA GPU, or the emulated device: core/buffer.h): the schemes
// of ddp/ and zero/ with parameters, gradients, optimizer state and activations in device memory,
// the MLP through Mlp<float> on device memory (strategies/mlp.h: the host's MLP code over the
// device's kernel table), the optimizer through the kernel table, and every collective on device pointers through a device communicator (nccl, staged(INNER)).
// make_strategy builds these, not the host classes, when the communicator takes device memory.
//
// Ordering: kernels run on the default stream; a device communicator runs on streams of its own
// that do not wait for it (NCCL's are non-blocking). So the default stream is synchronized before
// a collective reads what kernels wrote, and a blocking collective is followed by the
// communicator's synchronize() before kernels read what it wrote. DDP's buckets go out as
// all_reduce_async the moment their last gradient is queued (the default stream synchronized
// first: the host waits for backward so far, the device keeps the bucket's all_reduce running
// beside the rest of backward) and are waited for before the optimizer.
//
// What is held and sent is the host classes' model (ddp_strategy.h, zero_strategy.h): the same
// buckets, shards, padding and traffic theory. f32, and bf16 compute with f32 master weights (the
// host's MlpCompute::bf16 rounding, on the device); f64 is refused as unsupported (a SKIP: the
// device's kernels are f32). Results match the CPU reference within the equivalence
// bound with the device's reordered sums (device_kernel_terms), never bit for bit: cuBLAS sums in
// its own order, so same_order_microbatches() is 0.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/buffer.h"
#include "strategies/ddp/ddp_strategy.h"
#include "kernels/device/kernel_table.h"
#include "strategies/mlp.h"
#include "strategies/strategy.h"
#include "strategies/zero/zero_strategy.h"

namespace dts {

class DeviceDataParallel final : public Strategy {
 public:
  // stage 0: ddp; 1-3: ZeRO's stages. `comm` takes device memory.
  // precision: f32, or bf16 compute with f32 master weights (MlpCompute::bf16); f64 is
  // Error{unsupported} (the device's kernels are f32).
  DeviceDataParallel(int stage, const ModelSpec& spec, const ParallelConfig& config, Communicator& comm,
                     Precision precision = Precision::f32);

  std::string_view name() const override;
  StepReport step(const Batch& global_batch) override;
  std::vector<double> full_parameters() override;  // stage 3: all_gather, so every rank must call
  MemoryReport memory() const override;
  std::string config() const override { return config_.describe(); }
  std::vector<TrafficTheory> expected_traffic() const override;
  // ddp: parameters, the all-reduced gradients and the optimizer state (replicated); ZeRO: the
  // full parameters, as the host classes report.
  std::vector<ReplicaDigest> replica_digests() override;
  void set_learning_rate(double lr) override { set_optimizer_learning_rate(config_.train, lr, name()); }

 private:
  StepReport step_ddp(const Batch& batch);
  StepReport step_zero(const Batch& batch);
  // This rank's rows of micro-batch k (even_split of the micro-batch over the ranks).
  Batch local_batch(const Batch& batch, int k) const;
  // Forward and backward of micro-batch k on this rank's rows into `target`; returns the loss
  // times the rows (the global mean's share).
  double micro_batch(const Batch& batch, int k, const float* params, float* target, StepReport& report,
                     const std::function<void(size_t)>& on_ready = {});
  // ZeRO: the full parameters from every rank's shard (one all_gather), into `full` (Psi).
  void gather_parameters(kernels::Array<float>& full, StepReport& report);
  // ZeRO's padded wire layout (zero_strategy.h) in padded_ (N * S): every shard of `full`
  // (reference layout) to its slot, tails zero; and back.
  void pad(const float* full);
  void unpad(float* full) const;
  // One blocking collective of N S-element slots (a reduce_scatter or an all_gather), timed and
  // booked as (N - 1) S elements sent, ordered after the default stream's work and complete (in
  // device memory) when it returns.
  template <class Collective>
  void communicate(StepReport& report, Collective&& collective);
  void optimizer_step(float* params, const float* grads, float* state1, float* state2, int64_t n);
  // The global mean loss and the step's time, once the device is done.
  void finish(StepReport& report, double loss_sum, int64_t rows, std::chrono::steady_clock::time_point step_start);

  int stage_;
  ModelSpec spec_;
  ParallelConfig config_;
  Communicator& comm_;
  Mlp<float> mlp_;
  int64_t psi_ = 0, shard_size_ = 0, shard_first_ = 0, shard_count_ = 0;
  BucketPlan plan_;  // ddp
  // ddp: params, grads Psi. ZeRO as zero_strategy.h: params Psi (stage 3: S), grads Psi (stage
  // 1) or S. State: Psi (ddp) or S, state2 for AdamW only. micro_grads: ddp keeps it (with
  // accumulation), ZeRO frees it each step; padded is transient.
  kernels::Array<float> params_{Memory::device}, grads_{Memory::device}, state1_{Memory::device},
      state2_{Memory::device}, micro_grads_{Memory::device}, padded_{Memory::device};
  int64_t steps_ = 0;
  int64_t activations_peak_ = 0;
};

}  // namespace dts
