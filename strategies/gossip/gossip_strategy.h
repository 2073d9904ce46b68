// Gossip SGD (D-PSGD, Lian et al. 2017): every rank holds the whole model and its own optimizer
// state; per step it computes the gradient of its share of the global batch (the mean over its
// rows) at its own parameters, averages its parameters with its ring neighbours' (left, itself,
// right: 1/3 each; with two ranks, itself and the other: 1/2 each), and applies its own gradient
// to the average. No global synchronization: a rank waits for its two neighbours only, and its
// traffic per step does not grow with the ranks (2 Psi elements; Psi at two ranks).
//
// The ranks' models differ, so there is no one-process model to match; what a stack must give is
// what the algorithm gives: audit() replays all N ranks in one process (the same operations in the
// same order) and compares every rank's parameters bit for bit, and reports the spread across
// ranks after every step (how close to consensus they are). full_parameters() is the ranks'
// average, summed in rank order.
//
// One class for host and device: every model, gradient and optimizer state lives in the
// communicator's memory and every operation runs through that memory's kernel table (the mixing
// too: adds and one IEEE division); the replay runs on rank 0's memory with the same table, so on
// the device it performs the same kernels in the same order. Device memory: f32 and bf16 compute.
#pragma once
#include <memory>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "strategies/mlp.h"
#include "strategies/strategy.h"

namespace dts {

// One process running D-PSGD's N ranks for the given batches: each rank's final parameters
// (rank-major, N x Psi) and, per step, the largest spread across ranks of any parameter
// (max over elements of max_r x_r - min_r x_r) after that step. Computed in `memory` (the run's:
// its kernel table's operations, in the run's order).
struct GossipReplay {
  std::vector<double> parameters;
  std::vector<double> spread;
};
GossipReplay replay_gossip(const ModelSpec& spec, const TrainConfig& train, Precision precision, int ranks,
                           const std::vector<Batch>& batches, Memory memory = Memory::host);

// The messages rank `rank` of `n` sends per step (group "ring", send_recv): its parameters (Psi
// elements) and their digest (one u64) to its right neighbour, and from 3 ranks to its left one
// too; none on one rank. expected_traffic() sums its bytes from them; the planner prices them.
std::vector<PlannedCall> gossip_calls(int64_t psi, int n, int rank, DType dtype);

template <class T>
class GossipStrategy final : public Strategy {
 public:
  GossipStrategy(const ModelSpec& spec, const ParallelConfig& config, Communicator& comm, Precision precision);

  std::string_view name() const override { return "gossip"; }
  StepReport step(const Batch& global_batch) override;
  // Collective: every rank's parameters gathered, averaged in rank order.
  std::vector<double> full_parameters() override;
  MemoryReport memory() const override;
  std::string config() const override { return config_.describe(); }
  std::vector<TrafficTheory> expected_traffic() const override;
  // Nothing is replicated: each rank's model is its own.
  std::vector<ReplicaDigest> replica_digests() override { return {}; }
  bool same_model_as_one_process() const override { return comm_.size() == 1; }
  // From 3 ranks a rank waits only for its two neighbours: one farther from a slow rank runs ahead.
  bool lockstep() const override { return comm_.size() <= 2; }
  // Each rank reports the loss of its own rows at its own parameters.
  bool reports_batch_loss() const override { return comm_.size() == 1; }
  // One rank on host memory is one process (the device's kernels sum in their own order).
  int same_order_microbatches() const override {
    return comm_.size() == 1 && table_.memory() == Memory::host ? 1 : 0;
  }
  void set_learning_rate(double lr) override;
  // Collective: rank 0 replays the steps' batches for every rank and compares.
  std::optional<ReplayAudit> audit() override;

 private:
  ModelSpec spec_;
  ParallelConfig config_;
  Communicator& comm_;
  Precision precision_;
  kernels::KernelTable<T> table_;  // of the communicator's memory: every array below lives there
  Mlp<T> mlp_;
  kernels::Array<T> params_, grads_, state1_, state2_, left_, right_;
  kernels::Array<uint64_t> digests_;  // this rank's model's digest, then the left's and the right's
  std::vector<std::pair<int64_t, int64_t>> batches_;  // (first, rows) of every step, for the replay
  int64_t steps_ = 0, activations_peak_ = 0;
  int64_t corrupt_receives_ = 0;  // neighbour models whose digest did not match what arrived
};

extern template class GossipStrategy<float>;
extern template class GossipStrategy<double>;

}  // namespace dts
