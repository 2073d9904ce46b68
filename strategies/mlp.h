// The MLP's forward and backward pass on flat parameter and gradient buffers in the reference
// layout, shared by every strategy that holds whole layers. Gradients become final parameter by
// parameter in reverse layout order (last layer's bias first), and a callback says so as each one
// is done: that is where DDP launches a bucket's all_reduce while backward goes on.
#pragma once
#include <functional>
#include <vector>

#include "kernels/device/kernel_table.h"
#include "strategies/workload.h"

namespace dts {

// word_digest (workload.h) over the first `count` elements of `values`, folded into `seed`,
// wherever they live: read in place in host memory, copied back from device memory.
template <class T>
uint64_t array_digest(const kernels::Array<T>& values, int64_t count, uint64_t seed = kFnvOffsetBasis) {
  const auto bytes = static_cast<size_t>(count) * sizeof(T);
  if (values.memory() == Memory::host) return word_digest(values.data(), bytes, seed);
  const std::vector<T> held = values.download();
  return word_digest(held.data(), bytes, seed);
}

// How the MLP computes. native: in T throughout. bf16 (T = float only): mixed precision as
// PyTorch autocast runs it on tensor cores: the f32 master weights and the inputs are rounded
// to bf16 for use; every matmul multiplies bf16 operands and accumulates in f32, and its output
// is rounded to bf16 (bias added before that one rounding, as a fused epilogue does); GeLU and
// its derivative compute in f32 from bf16 and round their output; softmax cross-entropy runs in
// f32 on bf16 logits. Parameter gradients leave backward as bf16 values held in f32 (the .grad
// of an f32 parameter), so strategies accumulate and communicate them in f32.
enum class MlpCompute { native, bf16 };

// bf16 mode: rounds each of the n values to the nearest bf16 (ties to even), in place, where the
// mode rounds (strategies/mlp.cpp, strategies/tensor/parallel_mlp.cpp); native: leaves them.
template <class T>
void round_for(MlpCompute compute, T* values, int64_t n);

// One MLP for every memory kind: parameters, gradients and activations live in `memory`, and
// every layer runs through the kernel table of that memory (kernels/device/kernel_table.h): on
// the host kernels/cpu, on the device a GPU's CUDA kernels or the emulated device's. The same
// operations in the same order on both; the device sums in its kernels' order (cuBLAS's, and
// column sums in double), which the equivalence suite's device bound covers
// (suites/equivalence/tolerance.h, device_kernel_terms). Device memory: T = float only (native or
// bf16 compute); the batch is host data, uploaded here; on_ready(i) then means parameter i's
// gradient is queued, not computed: synchronize the table before another stream reads it.
template <class T>
class Mlp {
 public:
  explicit Mlp(const ModelSpec& spec, MlpCompute compute = MlpCompute::native, Memory memory = Memory::host);

  // Mean loss of `batch` at `params` (no gradients).
  double loss(const T* params, const Batch& batch);
  // Forward and backward on `batch`. Writes grads = loss_scale * d(mean loss of batch)/d(params)
  // (overwriting), calls on_ready(i) once parameter i's gradient is final (i indexes layout()),
  // and returns the batch's mean loss. loss_scale = rows of this batch / rows of the global batch
  // turns per-shard gradients into parts of the global mean.
  double forward_backward(const T* params, T* grads, const Batch& batch, double loss_scale,
                          const std::function<void(size_t)>& on_ready = {});
  // After forward_backward: writes, for every parameter, the sum over the batch's rows of the
  // magnitudes of that row's contribution to its gradient (|g|^T |a| for a weight, sum |g| for a
  // bias, with loss_scale included). It is the quantity rounding-error bounds of the gradient's
  // row sum scale with (suites/equivalence/tolerance.h). Host memory only.
  void gradient_magnitudes(T* out) const;

  const std::vector<ParameterInfo>& layout() const { return layout_; }
  int64_t parameter_count() const { return count_; }
  // Bytes of activations kept for backward by the last forward_backward (its peak).
  int64_t activation_bytes() const { return activation_bytes_; }

 private:
  double forward(const T* params, const Batch& batch);

  // bf16 mode: rounds every element to the nearest bf16 (ties to even), in place.
  void round(kernels::Array<T>& v) const;
  void round(T* v, int64_t n) const;
  // At least `count` arrays in this MLP's memory (arrays are moved, never copied).
  void grow(std::vector<kernels::Array<T>>& arrays, int count) const;

  ModelSpec spec_;
  MlpCompute compute_;
  kernels::KernelTable<T> table_;
  std::vector<ParameterInfo> layout_;
  std::vector<int64_t> dims_;
  int64_t count_ = 0;
  int64_t activation_bytes_ = 0;
  int64_t rows_ = 0;                                    // of the last forward
  std::vector<kernels::Array<T>> activations_, pre_;  // a_l (rows x dims[l]), z_l (rows x dims[l+1])
  kernels::Array<T> dlogits_;
  kernels::Array<T> scratch_;         // z of a forward layer; da of a backward one
  kernels::Array<T> zeros_;           // a zero bias, as wide as the widest layer
  kernels::Array<T> rounded_params_;  // bf16 mode: the weights as used
  std::vector<kernels::Array<T>> backprop_;  // g_l (rows x dims[l+1]) of the last backward
  kernels::Array<int32_t> labels_;    // device memory: the batch's labels, uploaded
  std::vector<T> host_x_;             // device memory: the batch's inputs in T, before the upload
};

extern template class Mlp<float>;
extern template class Mlp<double>;

}  // namespace dts
