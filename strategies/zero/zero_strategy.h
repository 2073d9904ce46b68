// ZeRO stages 1-3 (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion
// Parameter Models"): data parallel like ddp/, but each rank owns one contiguous shard of the flat
// parameter vector and keeps optimizer state (1), also gradients (2), also parameters (3) only for it.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "strategies/mlp.h"
#include "strategies/strategy.h"

namespace dts {

enum class ZeroStage { optimizer_states = 1, gradients = 2, parameters = 3 };
std::string_view name(ZeroStage stage);  // "zero1", "zero2", "zero3"

// Elements [first, first + count) of the reference layout's initial parameters, in a slot of
// `slot` elements (zero tail), generated alone (workload.h: each element is a pure function of
// the seed), so the full model never exists on one rank: ZeRO-3's start.
std::vector<double> initial_shard(const ModelSpec& spec, int64_t first, int64_t count, int64_t slot);

// ZeRO's calls per step on `n` ranks (buffers of N padded shards of S elements): stage 3 two
// all_gathers of the parameters per micro-batch (forward, then backward), every stage one
// reduce_scatter of the gradient, stages 1-2 one all_gather of the updated parameters; then the
// loss. None overlaps compute. On one rank only the loss.
std::vector<PlannedCall> zero_calls(ZeroStage stage, int microbatches, int n, int64_t shard_size, DType dtype);
// ZeRO's traffic per step, summed from zero_calls: stages 1-2 2 (N-1) S elements, stage 3
// (2K + 1)(N-1) S, exact (S the padded shard); none on one rank.
std::vector<TrafficTheory> zero_traffic(ZeroStage stage, int microbatches, int n, int64_t shard_size, DType dtype);

// Shards: rank r owns elements even_split(Psi, N, r) of the reference layout. Collectives need
// equal counts, so on the wire every shard is padded to S = ceil(Psi / N) elements (a buffer of
// N * S, shard r at r * S). Padding is zero, contributes zero to every sum, and the optimizer only
// ever steps a shard's real elements, so it never reaches a parameter.
//
// Held between steps (elements; the paper's model, k = 2 for AdamW's m and v, 1 for SGD's velocity):
//   stage 1: params Psi, grads Psi, optimizer k * S
//   stage 2: params Psi, grads S,   optimizer k * S
//   stage 3: params S,   grads S,   optimizer k * S
// The padded N * S staging buffers and stage 2/3's full-size backward gradient are transient:
// allocated inside step() and released before it returns.
//
// bytes_sent counts what this rank puts on the wire under the ring model: a reduce_scatter or an
// all_gather of N * S padded elements sends (N - 1) * S elements per rank. Per step, with K
// micro-batches: stages 1 and 2: one reduce_scatter + one all_gather = 2 (N - 1) S sizeof(T);
// stage 3: two all_gathers per micro-batch + one reduce_scatter = (2K + 1)(N - 1) S sizeof(T)
// (3 Psi (N - 1) / N for K = 1, the paper's 1.5x of DDP). N = 1: 0. The loss all_reduce is
// bookkeeping, not training traffic, and is not counted (as in ddp).
//
// One class for host and device: every tensor lives in the communicator's memory and every kernel
// runs through that memory's table (kernels/device/kernel_table.h). On the device, kernels are
// queued and the communicator runs on streams of its own: the table is synchronized before a
// collective reads what kernels wrote, and the communicator before kernels read what it wrote
// (neither is needed, nor done, on the host). Device memory: f32 and bf16 compute.
template <class T>
class ZeroStrategy final : public Strategy {
 public:
  ZeroStrategy(ZeroStage stage, const ModelSpec& spec, const ParallelConfig& config, Communicator& comm,
               MlpCompute compute = MlpCompute::native);

  std::string_view name() const override;
  StepReport step(const Batch& global_batch) override;
  std::vector<double> full_parameters() override;  // stage 3: all_gather, so every rank must call
  MemoryReport memory() const override;
  std::string config() const override { return config_.describe(); }
  // On one rank nothing is summed in another order than one process's gradient accumulation (on
  // host memory: the device's kernels sum in their own order).
  int same_order_microbatches() const override {
    return comm_.size() == 1 && table_.memory() == Memory::host ? config_.microbatches : 0;
  }
  // Stages 1-2: (N-1) S for the reduce_scatter and as much for the all_gather; stage 3 adds two
  // all_gathers per micro-batch: (2K + 1)(N-1) S elements, exact (S is the padded shard).
  std::vector<TrafficTheory> expected_traffic() const override;
  // The configured optimizer's lr, which each rank's step applies to its own shard.
  void set_learning_rate(double lr) override { set_optimizer_learning_rate(config_.train, lr, name()); }

  // This rank's shard of the reference layout: {first element, real element count}.
  std::pair<int64_t, int64_t> shard() const { return {shard_first_, shard_count_}; }
  int64_t padded_shard_size() const { return shard_size_; }  // S

 private:
  // Full parameters in the reference layout from every rank's shard (stage 3; one all_gather).
  kernels::Array<T> gather_parameters(StepReport& report);
  // Sums `full_grads` (reference layout, Psi) over ranks and writes this rank's shard of the sum
  // (its real elements) to `shard_out` (one reduce_scatter).
  void reduce_scatter_gradients(const kernels::Array<T>& full_grads, T* shard_out, StepReport& report);
  // N * S zeros, then every shard of `full` (reference layout) at its padded slot.
  kernels::Array<T> pad(const T* full) const;
  void unpad(const kernels::Array<T>& padded, T* full) const;
  // Times a blocking collective into the report; all of it is exposed (nothing overlaps it). On
  // the device it is ordered after the queued kernels and complete when it returns.
  template <class Collective>
  void communicate(StepReport& report, Collective&& collective);
  kernels::Array<T> array(int64_t size) const;  // zeros, in the communicator's memory

  ZeroStage stage_;
  ModelSpec spec_;
  ParallelConfig config_;
  Communicator& comm_;
  kernels::KernelTable<T> table_;  // of the communicator's memory: every tensor below lives there
  Mlp<T> mlp_;
  int64_t psi_ = 0, shard_size_ = 0, shard_first_ = 0, shard_count_ = 0;
  // params_: stages 1-2 the whole model (Psi), stage 3 the shard (S). grads_: stage 1 Psi (the
  // reduced shard lands at shard_first_), stages 2-3 the shard (S). state: the shard (S each).
  kernels::Array<T> params_, grads_, state1_, state2_;
  int64_t steps_ = 0;
  int64_t activations_peak_ = 0;
};

extern template class ZeroStrategy<float>;
extern template class ZeroStrategy<double>;

}  // namespace dts
