// MLP forward/backward: Linear -> GeLU -> ... -> Linear -> softmax cross-entropy.
#include "strategies/mlp.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "core/half.h"
#include "kernels/cpu/cpu_kernels.h"

namespace dts {

namespace cpu = kernels::cpu;

template <class T>
Mlp<T>::Mlp(const ModelSpec& spec, MlpCompute compute)
    : spec_(spec), compute_(compute), layout_(parameter_layout(spec)), dims_(layer_dims(spec)) {
  if (compute_ == MlpCompute::bf16 && !std::is_same_v<T, float>) {
    throw Error(Error::Kind::invalid_argument, "bf16 compute keeps f32 master weights: use Mlp<float>");
  }
  count_ = layout_.back().offset + layout_.back().size();
}

template <class T>
void round_for(MlpCompute compute, T* values, int64_t n) {
  if (compute != MlpCompute::bf16) return;
  if constexpr (std::is_same_v<T, float>) {
    cpu::round_to_bf16(values, n);  // the same rounding, on the bits, vectorized
  } else {
    for (int64_t i = 0; i < n; ++i) values[i] = static_cast<T>(float_from_bf16_bits(bf16_bits_from_double(values[i])));
  }
}

template <class T>
void Mlp<T>::round(T* v, int64_t n) const {
  round_for(compute_, v, n);
}

template <class T>
void Mlp<T>::round(std::vector<T>& v) const {
  round(v.data(), static_cast<int64_t>(v.size()));
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
  round(activations_[0]);
  if (compute_ == MlpCompute::bf16) {
    rounded_params_.assign(params, params + count_);
    round(rounded_params_);
    params = rounded_params_.data();
  }
  activation_bytes_ = static_cast<int64_t>(activations_[0].size() * sizeof(T));
  for (int l = 0; l < layers; ++l) {
    const auto ul = static_cast<size_t>(l);
    const int64_t in = dims_[ul], out = dims_[ul + 1];
    const auto size = static_cast<size_t>(rows * out);
    const T* w = params + layout_[2 * ul].offset;
    const T* b = params + layout_[2 * ul + 1].offset;
    // Every buffer is a member that keeps its capacity across steps: a fresh vector per layer
    // costs a memset and, past malloc's mmap threshold, page faults on every step.
    scratch_.resize(size);
    // z = a W^T (W is out x in, row-major)
    cpu::gemm<T>({false, true, rows, out, in, in, in, out}, T(1), activations_[ul].data(), w, T(0), scratch_.data());
    std::vector<T>& pre = pre_[ul];
    pre.resize(size);
    for (int64_t r = 0; r < rows; ++r) {
      const T* z = scratch_.data() + r * out;
      T* pre_row = pre.data() + r * out;
      for (int64_t c = 0; c < out; ++c) pre_row[c] = z[c] + b[c];
    }
    round(pre);  // the matmul's one rounding, after its bias epilogue
    if (l + 1 < layers) {
      std::vector<T>& next = activations_[ul + 1];
      next.resize(size);
      // z + b is already in pre; the kernel adds a zero bias (so the values are the ones
      // tensor/parallel_mlp.cpp computes, bit for bit) and applies GeLU.
      if (zeros_.size() < static_cast<size_t>(out)) zeros_.assign(static_cast<size_t>(out), T(0));
      cpu::bias_gelu_forward<T>(pre.data(), zeros_.data(), scratch_.data(), next.data(), rows, out);
      round(next);
      activation_bytes_ += static_cast<int64_t>(next.size() * sizeof(T));
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
  if (compute_ == MlpCompute::bf16) params = rounded_params_.data();
  const int64_t rows = batch.size;
  const int layers = spec_.layers;
  // backprop_[l] is g_l, written in place: the last layer's from dlogits, each earlier one by the
  // GeLU backward of the layer after it.
  backprop_.resize(static_cast<size_t>(layers));
  std::vector<T>& g_last = backprop_.back();
  g_last.assign(dlogits_.begin(), dlogits_.end());
  if (loss_scale != 1.0) {
    for (T& v : g_last) v = static_cast<T>(v * static_cast<T>(loss_scale));
  }
  round(g_last);
  const auto ready = [&](size_t index) {
    if (on_ready) on_ready(index);
  };
  for (int l = layers - 1; l >= 0; --l) {
    const auto ul = static_cast<size_t>(l);
    const int64_t in = dims_[ul], out = dims_[ul + 1];
    const std::vector<T>& g = backprop_[ul];
    T* dw = grads + layout_[2 * ul].offset;
    T* db = grads + layout_[2 * ul + 1].offset;
    const T* w = params + layout_[2 * ul].offset;
    if (l == layers - 1) {
      // Last layer: no activation; the bias gradient is the column sum of g.
      std::fill(db, db + out, T(0));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < out; ++c) db[c] += g[static_cast<size_t>(r * out + c)];
      }
      round(db, out);
      ready(2 * ul + 1);
    }
    // dW = g^T a  (out x in)
    cpu::gemm<T>({true, false, out, in, rows, out, in, in}, T(1), g.data(), activations_[ul].data(), T(0), dw);
    round(dw, out * in);
    ready(2 * ul);
    if (l == 0) break;
    // da = g W (rows x in), then back through the previous layer's GeLU, which also yields that
    // layer's bias gradient.
    scratch_.resize(static_cast<size_t>(rows * in));
    cpu::gemm<T>({false, false, rows, in, out, out, in, in}, T(1), g.data(), w, T(0), scratch_.data());
    round(scratch_);
    std::vector<T>& dz = backprop_[ul - 1];
    dz.resize(scratch_.size());
    T* db_prev = grads + layout_[2 * (ul - 1) + 1].offset;
    cpu::bias_gelu_backward<T>(pre_[ul - 1].data(), scratch_.data(), dz.data(), db_prev, rows, in);
    if (compute_ == MlpCompute::bf16) {
      // The bias gradient sums the bf16 dz that leaves the GeLU backward, then rounds once.
      round(dz);
      std::fill(db_prev, db_prev + in, T(0));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < in; ++c) db_prev[c] += dz[static_cast<size_t>(r * in + c)];
      }
      round(db_prev, in);
    }
    ready(2 * (ul - 1) + 1);
  }
  return mean_loss;
}

template <class T>
void Mlp<T>::gradient_magnitudes(T* out) const {
  const int layers = spec_.layers;
  if (backprop_.size() != static_cast<size_t>(layers) || backprop_[0].empty()) {
    throw Error(Error::Kind::invalid_argument, "gradient_magnitudes: no backward pass to measure");
  }
  for (int l = 0; l < layers; ++l) {
    const auto ul = static_cast<size_t>(l);
    const int64_t in = dims_[ul], out_dim = dims_[ul + 1];
    const int64_t rows = static_cast<int64_t>(backprop_[ul].size()) / out_dim;
    std::vector<T> g_abs(backprop_[ul].size()), a_abs(activations_[ul].size());
    std::transform(backprop_[ul].begin(), backprop_[ul].end(), g_abs.begin(), [](T v) { return std::fabs(v); });
    std::transform(activations_[ul].begin(), activations_[ul].end(), a_abs.begin(), [](T v) { return std::fabs(v); });
    cpu::gemm<T>({true, false, out_dim, in, rows, out_dim, in, in}, T(1), g_abs.data(), a_abs.data(), T(0),
                 out + layout_[2 * ul].offset);
    T* bias = out + layout_[2 * ul + 1].offset;
    std::fill(bias, bias + out_dim, T(0));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < out_dim; ++c) bias[c] += g_abs[static_cast<size_t>(r * out_dim + c)];
    }
  }
}

template void round_for<float>(MlpCompute, float*, int64_t);
template void round_for<double>(MlpCompute, double*, int64_t);
template class Mlp<float>;
template class Mlp<double>;

}  // namespace dts
