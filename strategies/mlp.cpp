// MLP forward/backward: Linear -> GeLU -> ... -> Linear -> softmax cross-entropy.
#include "strategies/mlp.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cpu/cpu_kernels.h"

namespace dts {

namespace cpu = kernels::cpu;

template <class T>
Mlp<T>::Mlp(const ModelSpec& spec) : spec_(spec), layout_(parameter_layout(spec)), dims_(layer_dims(spec)) {
  count_ = layout_.back().offset + layout_.back().size();
}

template <class T>
double Mlp<T>::forward(const T* params, const Batch& batch) {
  const int64_t rows = batch.size;
  const int layers = spec_.layers;
  if (static_cast<int64_t>(batch.x.size()) != rows * dims_[0]) {
    throw Error(Error::Kind::invalid_argument, "batch does not match the model's input size");
  }
  activations_.resize(static_cast<size_t>(layers));
  pre_.resize(static_cast<size_t>(layers));
  activations_[0].assign(batch.x.begin(), batch.x.end());
  activation_bytes_ = static_cast<int64_t>(activations_[0].size() * sizeof(T));
  for (int l = 0; l < layers; ++l) {
    const auto ul = static_cast<size_t>(l);
    const int64_t in = dims_[ul], out = dims_[ul + 1];
    const T* w = params + layout_[2 * ul].offset;
    const T* b = params + layout_[2 * ul + 1].offset;
    std::vector<T> z(static_cast<size_t>(rows * out));
    // z = a W^T (W is out x in, row-major)
    cpu::gemm<T>({false, true, rows, out, in, in, in, out}, T(1), activations_[ul].data(), w, T(0), z.data());
    std::vector<T>& pre = pre_[ul];
    pre.resize(z.size());
    if (l + 1 < layers) {
      std::vector<T>& next = activations_[ul + 1];
      next.resize(z.size());
      cpu::bias_gelu_forward<T>(z.data(), b, pre.data(), next.data(), rows, out);
      activation_bytes_ += static_cast<int64_t>(next.size() * sizeof(T));
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < out; ++c) pre[static_cast<size_t>(r * out + c)] = z[static_cast<size_t>(r * out + c)] + b[c];
      }
    }
    activation_bytes_ += static_cast<int64_t>(pre.size() * sizeof(T));
  }
  const int64_t classes = dims_.back();
  dlogits_.resize(static_cast<size_t>(rows * classes));
  return cpu::softmax_cross_entropy<T>(pre_.back().data(), batch.labels.data(), dlogits_.data(), rows, classes);
}

template <class T>
double Mlp<T>::loss(const T* params, const Batch& batch) {
  return forward(params, batch);
}

template <class T>
double Mlp<T>::forward_backward(const T* params, T* grads, const Batch& batch, double loss_scale,
                                const std::function<void(size_t)>& on_ready) {
  const double mean_loss = forward(params, batch);
  const int64_t rows = batch.size;
  const int layers = spec_.layers;
  std::vector<T> g = dlogits_;
  if (loss_scale != 1.0) {
    for (T& v : g) v = static_cast<T>(v * static_cast<T>(loss_scale));
  }
  const auto ready = [&](size_t index) {
    if (on_ready) on_ready(index);
  };
  for (int l = layers - 1; l >= 0; --l) {
    const auto ul = static_cast<size_t>(l);
    const int64_t in = dims_[ul], out = dims_[ul + 1];
    T* dw = grads + layout_[2 * ul].offset;
    T* db = grads + layout_[2 * ul + 1].offset;
    const T* w = params + layout_[2 * ul].offset;
    if (l == layers - 1) {
      // Last layer: no activation; the bias gradient is the column sum of g.
      std::fill(db, db + out, T(0));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < out; ++c) db[c] += g[static_cast<size_t>(r * out + c)];
      }
      ready(2 * ul + 1);
    }
    // dW = g^T a  (out x in)
    cpu::gemm<T>({true, false, out, in, rows, out, in, in}, T(1), g.data(), activations_[ul].data(), T(0), dw);
    ready(2 * ul);
    if (l == 0) break;
    // da = g W (rows x in), then back through the previous layer's GeLU, which also yields that
    // layer's bias gradient.
    std::vector<T> da(static_cast<size_t>(rows * in));
    cpu::gemm<T>({false, false, rows, in, out, out, in, in}, T(1), g.data(), w, T(0), da.data());
    std::vector<T> dz(da.size());
    T* db_prev = grads + layout_[2 * (ul - 1) + 1].offset;
    cpu::bias_gelu_backward<T>(pre_[ul - 1].data(), da.data(), dz.data(), db_prev, rows, in);
    ready(2 * (ul - 1) + 1);
    g.swap(dz);
  }
  return mean_loss;
}

template class Mlp<float>;
template class Mlp<double>;

}  // namespace dts
