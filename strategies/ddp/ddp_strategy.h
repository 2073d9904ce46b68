// DDP (PyTorch DistributedDataParallel's scheme): every rank holds the whole model, runs
// forward/backward on its slice of the global batch, and averages gradients with all_reduce.
// Gradients are grouped into buckets (reverse layer order, bucket_bytes each, by default a quarter
// of the gradient between 1 and 25 MiB; the first at most 1 MiB as in PyTorch); a bucket's all_reduce starts asynchronously the moment its last gradient
// is ready, overlapping the rest of backward. With gradient accumulation over K micro-batches,
// only the last one communicates.
#pragma once
#include <memory>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "strategies/mlp.h"
#include "strategies/strategy.h"

namespace dts {

// The bucket size bucket_bytes 0 stands for: gradient_bytes / 4, clamped to [1 MiB, 25 MiB].
size_t auto_bucket_bytes(size_t gradient_bytes);

// DDP's buckets over a parameter layout of elements of `element_bytes` (ddp_strategy.cpp says how
// they are cut): [begin, end) element ranges of the flat gradient in launch order, the bucket of
// each parameter, and how many parameters each bucket waits for.
struct BucketPlan {
  std::vector<std::pair<int64_t, int64_t>> buckets;
  std::vector<size_t> bucket_of;
  std::vector<int> parameters_in_bucket;
};
BucketPlan plan_buckets(const std::vector<ParameterInfo>& layout, size_t element_bytes, size_t bucket_bytes);

// DDP's calls per step on `n` ranks: one all_reduce per bucket in launch order, every one but
// the last (the first layer's, ready when backward ends) launched while backward computes; then
// the loss. None on one rank but the loss.
std::vector<PlannedCall> ddp_calls(const BucketPlan& plan, int n, DType dtype);
// DDP's traffic per step, summed from ddp_calls: 2 Psi (N-1)/N elements (none on one rank).
std::vector<TrafficTheory> ddp_traffic(const BucketPlan& plan, int n, DType dtype);

// One class for host and device: every tensor lives in the communicator's memory and every
// kernel runs through that memory's table (kernels/device/kernel_table.h). On the device, kernels
// are queued and the communicator runs on streams of its own, so the table is synchronized before
// a bucket's all_reduce reads what backward wrote; waiting for the buckets orders the optimizer
// after them (no-ops on the host). Device memory: f32 and bf16 compute (the device's kernels are f32).
template <class T>
class DdpStrategy final : public Strategy {
 public:
  DdpStrategy(const ModelSpec& spec, const ParallelConfig& config, Communicator& comm,
              MlpCompute compute = MlpCompute::native);

  std::string_view name() const override { return "ddp"; }
  StepReport step(const Batch& global_batch) override;
  std::vector<double> full_parameters() override;
  MemoryReport memory() const override;
  std::string config() const override { return config_.describe(); }
  // On one rank nothing is summed in another order than one process's gradient accumulation (on
  // host memory: the device's kernels sum in their own order).
  int same_order_microbatches() const override {
    return comm_.size() == 1 && table_.memory() == Memory::host ? config_.microbatches : 0;
  }
  // The configured optimizer's lr; every replica must set the same value before the same step.
  void set_learning_rate(double lr) override;
  // One all_reduce of the whole gradient (in buckets): 2 Psi (N-1)/N elements under the ring model.
  std::vector<TrafficTheory> expected_traffic() const override;
  // Parameters, the all-reduced gradients and the optimizer state: all replicated under DDP.
  std::vector<ReplicaDigest> replica_digests() override {
    return {{"replica", digest_of(state2_.download(),
                                  digest_of(state1_.download(), digest_of(grads_.download(), digest_of(params_.download()))))}};
  }

  // Buckets as [begin, end) element ranges of the flat gradient buffer, in launch order.
  const std::vector<std::pair<int64_t, int64_t>>& buckets() const { return plan_.buckets; }

 private:
  ModelSpec spec_;
  ParallelConfig config_;
  Communicator& comm_;
  kernels::KernelTable<T> table_;  // of the communicator's memory: every tensor below lives there
  Mlp<T> mlp_;
  kernels::Array<T> params_, micro_grads_, grads_, state1_, state2_;
  BucketPlan plan_;
  int64_t steps_ = 0;
  int64_t activations_peak_ = 0;
};

extern template class DdpStrategy<float>;
extern template class DdpStrategy<double>;

}  // namespace dts
