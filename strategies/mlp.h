// The MLP's forward and backward pass on flat parameter and gradient buffers in the reference
// layout, shared by every strategy that holds whole layers. Gradients become final parameter by
// parameter in reverse layout order (last layer's bias first), and a callback says so as each one
// is done: that is where DDP launches a bucket's all_reduce while backward goes on.
#pragma once
#include <functional>
#include <vector>

#include "strategies/workload.h"

namespace dts {

template <class T>
class Mlp {
 public:
  explicit Mlp(const ModelSpec& spec);

  // Mean loss of `batch` at `params` (no gradients).
  double loss(const T* params, const Batch& batch);
  // Forward and backward on `batch`. Writes grads = loss_scale * d(mean loss of batch)/d(params)
  // (overwriting), calls on_ready(i) once parameter i's gradient is final (i indexes layout()),
  // and returns the batch's mean loss. loss_scale = rows of this batch / rows of the global batch
  // turns per-shard gradients into parts of the global mean.
  double forward_backward(const T* params, T* grads, const Batch& batch, double loss_scale,
                          const std::function<void(size_t)>& on_ready = {});

  const std::vector<ParameterInfo>& layout() const { return layout_; }
  int64_t parameter_count() const { return count_; }
  // Bytes of activations kept for backward by the last forward_backward (its peak).
  int64_t activation_bytes() const { return activation_bytes_; }

 private:
  double forward(const T* params, const Batch& batch);

  ModelSpec spec_;
  std::vector<ParameterInfo> layout_;
  std::vector<int64_t> dims_;
  int64_t count_ = 0;
  int64_t activation_bytes_ = 0;
  std::vector<std::vector<T>> activations_, pre_;  // a_l (rows x dims[l]), z_l (rows x dims[l+1])
  std::vector<T> dlogits_;
};

extern template class Mlp<float>;
extern template class Mlp<double>;

}  // namespace dts
