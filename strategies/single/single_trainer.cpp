// Reference trainer: Linear -> GeLU -> ... -> Linear -> softmax cross-entropy, with the gradient
// written out layer by layer (last layer first, the order DDP buckets see them).
#include "strategies/single/single_trainer.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cpu/cpu_kernels.h"

namespace dts {

namespace cpu = kernels::cpu;

template <class T>
SingleTrainer<T>::SingleTrainer(const ModelSpec& spec, const TrainConfig& config)
    : spec_(spec), config_(config), layout_(parameter_layout(spec)), dims_(layer_dims(spec)) {
  const std::vector<double> init = init_parameters(spec);
  params_.assign(init.begin(), init.end());
  grads_.assign(params_.size(), T(0));
  state1_.assign(params_.size(), T(0));
  state2_.assign(params_.size(), T(0));
}

template <class T>
double SingleTrainer<T>::forward_backward(const Batch& batch, bool backward) {
  const int64_t rows = batch.size;
  const int layers = spec_.layers;
  if (static_cast<int64_t>(batch.x.size()) != rows * dims_[0]) {
    throw Error(Error::Kind::invalid_argument, "batch does not match the model's input size");
  }
  activations_.resize(static_cast<size_t>(layers));
  pre_.resize(static_cast<size_t>(layers));
  activations_[0].assign(batch.x.begin(), batch.x.end());
  for (int l = 0; l < layers; ++l) {
    const int64_t in = dims_[static_cast<size_t>(l)], out = dims_[static_cast<size_t>(l) + 1];
    const T* w = params_.data() + layout_[static_cast<size_t>(2 * l)].offset;
    const T* b = params_.data() + layout_[static_cast<size_t>(2 * l + 1)].offset;
    std::vector<T>& z = pre_[static_cast<size_t>(l)];
    z.assign(static_cast<size_t>(rows * out), T(0));
    // z = a W^T (W is out x in, row-major)
    cpu::gemm<T>({false, true, rows, out, in, in, in, out}, T(1), activations_[static_cast<size_t>(l)].data(), w,
                 T(0), z.data());
    if (l + 1 < layers) {
      std::vector<T>& next = activations_[static_cast<size_t>(l) + 1];
      next.resize(z.size());
      std::vector<T> biased(z.size());
      cpu::bias_gelu_forward<T>(z.data(), b, biased.data(), next.data(), rows, out);
      z.swap(biased);  // keep the pre-activation (with bias) for backward
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < out; ++c) z[static_cast<size_t>(r * out + c)] += b[c];
      }
    }
  }
  const int64_t classes = dims_.back();
  std::vector<T> g(static_cast<size_t>(rows * classes));
  const double loss = cpu::softmax_cross_entropy<T>(pre_.back().data(), batch.labels.data(), g.data(), rows, classes);
  if (!backward) return loss;

  for (int l = layers - 1; l >= 0; --l) {
    const int64_t in = dims_[static_cast<size_t>(l)], out = dims_[static_cast<size_t>(l) + 1];
    T* dw = grads_.data() + layout_[static_cast<size_t>(2 * l)].offset;
    T* db = grads_.data() + layout_[static_cast<size_t>(2 * l + 1)].offset;
    const T* w = params_.data() + layout_[static_cast<size_t>(2 * l)].offset;
    if (l == layers - 1) {
      // Last layer: no activation; the bias gradient is the column sum of g.
      std::fill(db, db + out, T(0));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < out; ++c) db[c] += g[static_cast<size_t>(r * out + c)];
      }
    }
    // dW = g^T a  (out x in)
    cpu::gemm<T>({true, false, out, in, rows, out, in, in}, T(1), g.data(), activations_[static_cast<size_t>(l)].data(),
                 T(0), dw);
    if (l == 0) break;
    // da = g W (rows x in), then through GeLU of the previous layer: its bias gradient comes out too.
    std::vector<T> da(static_cast<size_t>(rows * in));
    cpu::gemm<T>({false, false, rows, in, out, out, in, in}, T(1), g.data(), w, T(0), da.data());
    std::vector<T> dz(da.size());
    T* db_prev = grads_.data() + layout_[static_cast<size_t>(2 * (l - 1) + 1)].offset;
    cpu::bias_gelu_backward<T>(pre_[static_cast<size_t>(l) - 1].data(), da.data(), dz.data(), db_prev, rows, in);
    g.swap(dz);
  }
  return loss;
}

template <class T>
double SingleTrainer<T>::step(const Batch& batch) {
  const double loss = forward_backward(batch, true);
  ++steps_;
  const auto n = static_cast<int64_t>(params_.size());
  if (config_.optimizer == OptimizerKind::sgd) {
    cpu::sgd_momentum_step<T>(params_.data(), grads_.data(), state1_.data(), n, config_.sgd);
  } else {
    cpu::adamw_step<T>(params_.data(), grads_.data(), state1_.data(), state2_.data(), n, config_.adamw, steps_);
  }
  return loss;
}

template <class T>
double SingleTrainer<T>::loss(const Batch& batch) {
  return forward_backward(batch, false);
}

template <class T>
std::vector<double> SingleTrainer<T>::gradients(const Batch& batch) {
  forward_backward(batch, true);
  return {grads_.begin(), grads_.end()};
}

template <class T>
std::vector<double> SingleTrainer<T>::parameters() const {
  return {params_.begin(), params_.end()};
}

template <class T>
void SingleTrainer<T>::set_parameters(const std::vector<double>& values) {
  if (values.size() != params_.size()) throw Error(Error::Kind::invalid_argument, "set_parameters: wrong size");
  for (size_t i = 0; i < values.size(); ++i) params_[i] = static_cast<T>(values[i]);
}

template class SingleTrainer<float>;
template class SingleTrainer<double>;

}  // namespace dts
