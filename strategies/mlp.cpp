// MLP forward/backward: Linear -> GeLU -> ... -> Linear -> softmax cross-entropy.
#include "strategies/mlp.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "kernels/cpu/cpu_kernels.h"

namespace dts {

namespace cpu = kernels::cpu;

template <class T>
Mlp<T>::Mlp(const ModelSpec& spec, MlpCompute compute, Memory memory)
    : spec_(spec), compute_(compute), table_(memory), layout_(parameter_layout(spec)), dims_(layer_dims(spec)),
      dlogits_(memory), scratch_(memory), zeros_(memory), rounded_params_(memory), labels_(memory) {
  if (compute_ == MlpCompute::bf16 && !std::is_same_v<T, float>) {
    throw Error(Error::Kind::invalid_argument, "bf16 compute keeps f32 master weights: use Mlp<float>");
  }
  count_ = layout_.back().offset + layout_.back().size();
}

template <class T>
void round_for(MlpCompute compute, T* values, int64_t n) {
  if (compute != MlpCompute::bf16) return;
  kernels::KernelTable<T>(Memory::host).round_to_bf16(values, n);  // float: vectorized, on the bits
}

template <class T>
void Mlp<T>::grow(std::vector<kernels::Array<T>>& arrays, int count) const {
  while (arrays.size() < static_cast<size_t>(count)) arrays.emplace_back(table_.memory());
}

template <class T>
void Mlp<T>::round(T* v, int64_t n) const {
  if (compute_ == MlpCompute::bf16) table_.round_to_bf16(v, n);
}

template <class T>
void Mlp<T>::round(kernels::Array<T>& v) const {
  round(v.data(), v.size());
}

template <class T>
double Mlp<T>::forward(const T* params, const Batch& batch) {
  const int64_t rows = batch.size;
  const int layers = spec_.layers;
  if (static_cast<int64_t>(batch.x.size()) != rows * dims_[0]) {
    throw Error(Error::Kind::invalid_argument, "batch does not match the model's input size");
  }
  rows_ = rows;
  // Every buffer is a member that keeps its capacity across steps: a fresh vector per layer
  // costs a memset and, past malloc's mmap threshold, page faults on every step; on a GPU a
  // cudaFree waits for the whole device (a DDP bucket's all_reduce in flight included), so
  // scratch_ takes its largest use up front rather than growing during backward.
  int64_t widest = 0;
  for (const int64_t d : dims_) widest = std::max(widest, d);
  scratch_.resize(rows * widest);
  grow(activations_, layers);
  grow(pre_, layers);
  // The inputs as T: each double rounded once.
  kernels::Array<T>& input = activations_[0];
  input.resize(static_cast<int64_t>(batch.x.size()));
  if (input.memory() == Memory::host) {
    std::copy(batch.x.begin(), batch.x.end(), input.data());
  } else {
    host_x_.assign(batch.x.begin(), batch.x.end());
    input.upload(host_x_.data(), static_cast<int64_t>(host_x_.size()));
  }
  round(input);
  if (compute_ == MlpCompute::bf16) {
    rounded_params_.resize(count_);
    table_.copy(rounded_params_.data(), params, count_);
    round(rounded_params_);
    params = rounded_params_.data();
  }
  activation_bytes_ = input.bytes();
  for (int l = 0; l < layers; ++l) {
    const auto ul = static_cast<size_t>(l);
    const int64_t in = dims_[ul], out = dims_[ul + 1];
    const T* w = params + layout_[2 * ul].offset;
    const T* b = params + layout_[2 * ul + 1].offset;
    // z = a W^T (W is out x in, row-major)
    table_.gemm({false, true, rows, out, in, in, in, out}, T(1), activations_[ul].data(), w, T(0), scratch_.data());
    kernels::Array<T>& pre = pre_[ul];
    pre.resize(rows * out);
    table_.bias_add(scratch_.data(), b, pre.data(), rows, out);
    round(pre);  // the matmul's one rounding, after its bias epilogue
    if (l + 1 < layers) {
      kernels::Array<T>& next = activations_[ul + 1];
      next.resize(rows * out);
      // z + b is already in pre; the kernel adds a zero bias (so the values are the ones
      // tensor/parallel_mlp.cpp computes, bit for bit) and applies GeLU.
      if (zeros_.size() < out) {
        zeros_.resize(out);
        table_.zero(zeros_.data(), out);
      }
      table_.bias_gelu_forward(pre.data(), zeros_.data(), scratch_.data(), next.data(), rows, out);
      round(next);
      activation_bytes_ += next.bytes();
    }
    activation_bytes_ += pre.bytes();
  }
  const int64_t classes = dims_.back();
  dlogits_.resize(rows * classes);
  const int32_t* labels = batch.labels.data();
  if (labels_.memory() != Memory::host) {
    labels_.resize(rows);
    labels_.upload(batch.labels.data(), rows);
    labels = labels_.data();
  }
  // Reads the loss back: on the device, the forward pass is done when this returns.
  return table_.softmax_cross_entropy(pre_.back().data(), labels, dlogits_.data(), rows, classes);
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
  const int64_t rows = rows_;
  const int layers = spec_.layers;
  // backprop_[l] is g_l, written in place: the last layer's from dlogits, each earlier one by the
  // GeLU backward of the layer after it.
  grow(backprop_, layers);
  kernels::Array<T>& g_last = backprop_.back();
  g_last.resize(dlogits_.size());
  table_.copy(g_last.data(), dlogits_.data(), dlogits_.size());
  if (loss_scale != 1.0) table_.scale(g_last.data(), static_cast<T>(loss_scale), g_last.size());
  round(g_last);
  const auto ready = [&](size_t index) {
    if (on_ready) on_ready(index);
  };
  for (int l = layers - 1; l >= 0; --l) {
    const auto ul = static_cast<size_t>(l);
    const int64_t in = dims_[ul], out = dims_[ul + 1];
    const T* g = backprop_[ul].data();
    T* dw = grads + layout_[2 * ul].offset;
    T* db = grads + layout_[2 * ul + 1].offset;
    const T* w = params + layout_[2 * ul].offset;
    if (l == layers - 1) {
      // Last layer: no activation; the bias gradient is the column sum of g.
      table_.column_sum(g, db, rows, out);
      round(db, out);
      ready(2 * ul + 1);
    }
    // dW = g^T a  (out x in)
    table_.gemm({true, false, out, in, rows, out, in, in}, T(1), g, activations_[ul].data(), T(0), dw);
    round(dw, out * in);
    ready(2 * ul);
    if (l == 0) break;
    // da = g W (rows x in), then back through the previous layer's GeLU, which also yields that
    // layer's bias gradient.
    scratch_.resize(rows * in);
    table_.gemm({false, false, rows, in, out, out, in, in}, T(1), g, w, T(0), scratch_.data());
    round(scratch_);
    kernels::Array<T>& dz = backprop_[ul - 1];
    dz.resize(rows * in);
    T* db_prev = grads + layout_[2 * (ul - 1) + 1].offset;
    table_.bias_gelu_backward(pre_[ul - 1].data(), scratch_.data(), dz.data(), db_prev, rows, in);
    if (compute_ == MlpCompute::bf16) {
      // The bias gradient sums the bf16 dz that leaves the GeLU backward, then rounds once.
      round(dz);
      table_.column_sum(dz.data(), db_prev, rows, in);
      round(db_prev, in);
    }
    ready(2 * (ul - 1) + 1);
  }
  return mean_loss;
}

template <class T>
void Mlp<T>::gradient_magnitudes(T* out) const {
  const int layers = spec_.layers;
  if (table_.memory() != Memory::host) {
    throw Error(Error::Kind::unsupported, "gradient_magnitudes: host memory only (the reference's bound)");
  }
  if (backprop_.size() != static_cast<size_t>(layers) || backprop_[0].empty()) {
    throw Error(Error::Kind::invalid_argument, "gradient_magnitudes: no backward pass to measure");
  }
  for (int l = 0; l < layers; ++l) {
    const auto ul = static_cast<size_t>(l);
    const int64_t in = dims_[ul], out_dim = dims_[ul + 1];
    const int64_t rows = backprop_[ul].size() / out_dim;
    const auto magnitudes = [](const kernels::Array<T>& a) {
      std::vector<T> m(static_cast<size_t>(a.size()));
      std::transform(a.data(), a.data() + a.size(), m.begin(), [](T v) { return std::fabs(v); });
      return m;
    };
    const std::vector<T> g_abs = magnitudes(backprop_[ul]), a_abs = magnitudes(activations_[ul]);
    cpu::gemm<T>({true, false, out_dim, in, rows, out_dim, in, in}, T(1), g_abs.data(), a_abs.data(), T(0),
                 out + layout_[2 * ul].offset);
    table_.column_sum(g_abs.data(), out + layout_[2 * ul + 1].offset, rows, out_dim);
  }
}

template void round_for<float>(MlpCompute, float*, int64_t);
template void round_for<double>(MlpCompute, double*, int64_t);
template class Mlp<float>;
template class Mlp<double>;

}  // namespace dts
