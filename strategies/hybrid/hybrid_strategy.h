// dp x tp x pp on the process groups of a layout (ParallelConfig): the model's layers split into
// pp balanced stages (strategies/tensor/parallel_mlp.h, balanced_stages), each layer of a stage
// split across its tp group Megatron-style, the global batch split across dp replicas and each
// replica's rows into m micro-batches that flow through the stages by send/recv (in the compute
// precision: bf16 compute sends bf16) under GPipe or 1F1B (strategies/pipeline/schedule.h).
// After the schedule, each stage shard's gradient is summed over its dp group (all_reduce, or ZeRO-1: reduce_scatter, a sharded optimizer step, all_gather).
// Registered as tp (tp only), gpipe and 1f1b (pp only) and hybrid (any two or three).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "strategies/pipeline/schedule.h"
#include "strategies/strategy.h"
#include "strategies/tensor/parallel_mlp.h"

namespace dts {

// The calls the rank at (stage, tp_index, dp_index) of layout `c` makes per step of `batch` rows
// (dtype: the parameters'; wire: what activations travel as): per micro-batch its output
// activation to the next stage and its input gradient to the previous (send_recv), a tp
// all_reduce of each row-parallel layer's output (forward) and of each column-parallel layer's
// input gradient but the model's first (backward); after the schedule, per dp block (the tensors
// replicated across tp, then this rank's shards) an all_reduce, or with ZeRO-1 a reduce_scatter
// and an all_gather of dp padded slots; then the loss over the world. expected_traffic() is
// summed from these.
std::vector<PlannedCall> hybrid_calls(const ModelSpec& spec, const ParallelConfig& c, int stage, int tp_index,
                                      int dp_index, int64_t batch, DType dtype, DType wire);

template <class T>
class HybridStrategy final : public Strategy {
 public:
  HybridStrategy(std::string name, const ModelSpec& spec, const ParallelConfig& config, ProcessGroups& groups,
                 MlpCompute compute = MlpCompute::native);

  std::string_view name() const override { return name_; }
  StepReport step(const Batch& global_batch) override;
  std::vector<double> full_parameters() override;
  MemoryReport memory() const override;
  std::string config() const override { return config_.describe(); }
  // Per group, for the last step's batch: pp sends each micro-batch's output activation forward
  // and its input gradient back (exact); tp all_reduces each row-parallel output and each
  // column-parallel input gradient (ring model); dp all_reduces the stage shard's gradient, or
  // with ZeRO-1 reduce_scatters it and all_gathers the parameters.
  std::vector<TrafficTheory> expected_traffic() const override;
  // The configured optimizer's lr, which every rank's step applies to its stage shard (or, with
  // ZeRO-1, to its part of each dp block).
  void set_learning_rate(double lr) override { set_optimizer_learning_rate(config_.train, lr, name()); }
  // dp replicas hold the same stage shard (and, without ZeRO, gradients and optimizer state);
  // with tp > 1 the replicated tensors (replicated layers, row-parallel biases) are alike across
  // the tp group too; with pp > 1 both ends of a pipeline link saw the same bytes cross it.
  std::vector<ReplicaDigest> replica_digests() override;
  // On the device the kernels sum in their own order (kernels/device/kernel_table.h): no bit-for-bit claim.
  int same_order_microbatches() const override {
    return config_.dp == 1 && config_.tp == 1 && table().memory() == Memory::host ? config_.microbatches : 0;
  }

  int stage() const { return groups_.pp_index; }
  const std::vector<int>& stage_bounds() const { return bounds_; }

 private:
  // ZeRO-1: sums each block's gradient over dp into this rank's shard of it, steps the shards,
  // gathers the parameters.
  void zero1_update(StepReport& report);
  // What activations and their gradients travel as between stages: bf16 in bf16 compute.
  DType wire_dtype() const { return compute_ == MlpCompute::bf16 ? DType::bf16 : dtype_of<T>(); }
  const kernels::KernelTable<T>& table() const { return mlp_.table(); }
  // Communication over `comm` after the kernels that wrote its input, and before those that read
  // its output: the device's queued work is done first, the communicator's after.
  template <class Collective>
  void communicate(Communicator& comm, StepReport& report, double bytes, Collective&& collective);

  std::string name_;
  ModelSpec spec_;
  ParallelConfig config_;
  ProcessGroups& groups_;
  MlpCompute compute_;
  std::vector<int> bounds_;
  ParallelMlp<T> mlp_;
  // In the communicator's memory (host, or the device's), as every tensor of mlp_.
  kernels::Array<T> params_, grads_, micro_grads_, state1_, state2_;
  kernels::Array<int32_t> labels_;  // device memory: the step's labels, uploaded
  // The blocks the dp group sums separately: the tensors replicated across tp, then this rank's
  // shards (StageLayout). With ZeRO-1 each block is sharded over dp on its own: this rank owns
  // elements [begin + first, begin + first + count) of a block and keeps their optimizer state at
  // state_offset; on the wire each part is padded to `slot`.
  struct DpBlock {
    int64_t begin = 0, length = 0;
    int64_t slot = 0, first = 0, count = 0, state_offset = 0;
  };
  std::vector<DpBlock> dp_blocks_;
  int64_t steps_ = 0;
  int64_t last_batch_rows_ = 0;
  // word_digest over the wire bytes of every activation and gradient this rank sent to and
  // received from its neighbouring stages: each must equal the digest at the link's other end (a
  // flipped bit on the wire shows even where the rounding bound hides it from the parameters).
  uint64_t sent_forward_ = kFnvOffsetBasis, received_forward_ = kFnvOffsetBasis;
  uint64_t sent_backward_ = kFnvOffsetBasis, received_backward_ = kFnvOffsetBasis;
  MemoryReport memory_;
};

extern template class HybridStrategy<float>;
extern template class HybridStrategy<double>;

}  // namespace dts
