// The MLP of strategies/workload.h over a range of its layers (a pipeline stage) with each layer
// optionally split across a tensor-parallel group, Megatron-LM style (Shoeybi et al. 2019):
// layers pair up as a column-parallel Linear (weight rows, i.e. output features, split), GeLU,
// then a row-parallel Linear (weight columns, i.e. input features, split) whose partial outputs
// are summed by one all_reduce in forward; backward all_reduces the column-parallel layer's input
// gradient. Used by tp, gpipe, 1f1b and hybrid (strategies/hybrid/).
#pragma once
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "strategies/mlp.h"
#include "strategies/strategy.h"
#include "strategies/workload.h"

namespace dts {

// How a layer is held across the tp group. Layers pair as (column, row) from layer 0; an odd last
// layer is replicated (every tp rank computes it whole, as with tp = 1).
enum class LayerSplit { replicated, column, row };
std::vector<LayerSplit> layer_splits(int layers, int tp);

// How many more terms tensor parallelism reorders in the sums along a row's path, beyond the
// batch sum every strategy reorders: sum of (in - 1) over row-parallel layers (their outputs add
// tp partial sums) and (out - 1) over column-parallel layers past the first (their input
// gradients do). 0 for tp = 1. The equivalence bound's gradient term grows by 2 u per term
// (suites/equivalence/tolerance.h).
int64_t tensor_parallel_reordered_terms(const ModelSpec& spec, int tp);

// A contiguous run of parameter elements: `length` elements at `local` in a rank's buffer are
// elements [reference, reference + length) of the reference layout.
struct ParameterRun {
  int64_t local = 0, reference = 0, length = 0;
  bool replicated = false;  // held alike by every rank of the tp group
};

// One layer as one tp rank holds it. Widths not divisible by tp split unevenly (even_split: the
// first ranks get one feature more), so any width >= tp works.
struct LocalLayer {
  int index = 0;  // in the model
  LayerSplit split = LayerSplit::replicated;
  int64_t in = 0, out = 0;              // the full layer
  int64_t in_local = 0, out_local = 0;  // what this rank reads and writes
  int64_t in_first = 0, out_first = 0;  // row: its input features start here; column: its outputs
  int64_t weight = 0, bias = 0;         // offsets in the rank's parameter buffer
};

// The parameters of layers [first, end) as tp rank `tp_rank` of `tp` holds them: the tensors
// replicated across the tp group first (elements [0, replicated)), then this rank's shards. The
// replicated block has the same size and order on every tp rank, so the dp group can sum it as a
// buffer of its own, in the same order on every tp rank, and its replicas stay bit-identical
// across tp (summed inside one buffer with the uneven shards, a ring would cut it at other
// places on each tp rank and sum its elements in other orders). With tp = 1 nothing is
// replicated and the layout is the reference layout of those layers.
struct StageLayout {
  std::vector<LocalLayer> layers;
  std::vector<ParameterRun> runs;
  int64_t count = 0;       // elements
  int64_t replicated = 0;  // elements of the replicated block at the front
};
// with_runs false: the layers' sizes, count and replicated alone, as the planner prices them
// (`runs` empty, the layers' weight and bias offsets not final): a row-parallel layer has a run
// per output row, too many to list for a model that exists only on paper.
StageLayout stage_layout(const ModelSpec& spec, int first, int end, int tp, int tp_rank, bool with_runs = true);

// Balanced pipeline stages: layer ranges [bounds[s], bounds[s + 1]) with at least one layer each,
// chosen to minimise the largest stage's parameter count (among equal ones, a fixed choice).
std::vector<int> balanced_stages(const ModelSpec& spec, int stages);

// What one micro-batch keeps on a stage between its forward and its backward, in the stage's
// memory (ParallelMlp's).
template <class T>
struct SavedActivations {
  int64_t rows = 0;
  std::vector<kernels::Array<T>> inputs, pre;  // per local layer: its input a, and z + b (as held)
  kernels::Array<T> dlogits;                   // last stage: d(mean loss of the micro-batch)/d logits
  int64_t bytes() const;
};

// Every tensor (parameters and gradients the caller passes, activations, the tp all_reduce
// buffers) lives in `memory` and every layer runs through that memory's kernel table
// (kernels/device/kernel_table.h), as in Mlp: on the host the same kernels in the same order as
// before, on the device (T = float only) the device's. Pointers and arrays passed in and
// returned are in `memory`; labels too (the caller uploads them on the device).
template <class T>
class ParallelMlp {
 public:
  // `tp_comm` is the tp group (size tp); it may be null when tp == 1. Its memory, when given, must
  // be `memory`.
  ParallelMlp(const ModelSpec& spec, int first_layer, int end_layer, int tp, int tp_rank, Communicator* tp_comm,
              MlpCompute compute = MlpCompute::native, Memory memory = Memory::host);

  const kernels::KernelTable<T>& table() const { return table_; }

  const StageLayout& layout() const { return layout_; }
  bool first_stage() const { return first_ == 0; }
  bool last_stage() const { return end_ == spec_.layers; }
  // Elements per row of what forward() returns (the stage's output activation) and of what
  // backward() returns (the gradient of the stage's input), as this rank holds them.
  int64_t output_width() const { return layout_.layers.back().out_local; }
  int64_t input_width() const { return layout_.layers.front().in_local; }
  // word_digest over every tp all_reduce result so far: alike on every rank of the tp group.
  uint64_t tp_results_digest() const { return tp_results_digest_; }
  // The parameters in this rank's layout, from Philox (workload.h): no communication.
  std::vector<T> initial_parameters() const;

  // Forward of one micro-batch. `input`: rows x input_width() (the batch's features on the first
  // stage). Returns the stage's output activation (rows x output_width()); on the last stage it
  // returns nothing and `loss` gets the micro-batch's mean loss. tp all_reduces go to `report`.
  kernels::Array<T> forward(const T* params, kernels::Array<T> input, int64_t rows, const int32_t* labels,
                            SavedActivations<T>& saved, double& loss, StepReport& report);
  // Backward of one micro-batch: writes (overwrites) this rank's parameter gradients of the
  // micro-batch into `grads`. `upstream`: on the last stage unused (the saved d logits, times
  // loss_scale, start it); elsewhere the gradient of the stage's output activation from the next
  // stage. Returns the gradient of the stage's input (empty on the first stage).
  // `saved` is consumed: its arrays go back to this stage's pool.
  kernels::Array<T> backward(const T* params, T* grads, SavedActivations<T>& saved, kernels::Array<T> upstream,
                             double loss_scale, StepReport& report);

  // An array of `size` elements in this stage's memory, its contents unspecified: a pooled one
  // when there is one (a device allocation costs, and freeing one waits for the whole device).
  kernels::Array<T> array(int64_t size);
  // Gives an array back to the pool.
  void recycle(kernels::Array<T>&& a);
  // Gives the arrays `saved` holds back to the pool (saved is empty after).
  void release(SavedActivations<T>& saved);

 private:
  void round(kernels::Array<T>& v) const;
  void round(T* v, int64_t n) const;
  // Sums `values` over the tp group in place (a Megatron f/g operator), timed into `report`.
  void tp_all_reduce(kernels::Array<T>& values, StepReport& report);
  // bf16 mode: the weights as used (rounded), else `params` itself.
  const T* weights_as_used(const T* params);

  ModelSpec spec_;
  int first_, end_, tp_, tp_rank_;
  Communicator* tp_comm_;
  MlpCompute compute_;
  StageLayout layout_;
  kernels::KernelTable<T> table_;
  kernels::Array<T> rounded_params_;
  kernels::Array<T> zeros_;  // a zero bias, as wide as the widest local layer
  std::vector<kernels::Array<T>> pool_;
  uint64_t tp_results_digest_ = kFnvOffsetBasis;
};

extern template class ParallelMlp<float>;
extern template class ParallelMlp<double>;

}  // namespace dts
