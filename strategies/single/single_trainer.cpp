// Reference trainer: the MLP (strategies/mlp.h) over the whole global batch, then one optimizer
// step over all parameters.
#include "strategies/single/single_trainer.h"

#include "core/error.h"
#include "strategies/strategy.h"

namespace dts {

template <class T>
void optimizer_step(const kernels::KernelTable<T>& table, const TrainConfig& config, T* params, const T* grads,
                    T* state1, T* state2, int64_t n, int64_t step) {
  if (config.optimizer == OptimizerKind::sgd) {
    table.sgd_momentum_step(params, grads, state1, n, config.sgd);
  } else {
    table.adamw_step(params, grads, state1, state2, n, config.adamw, step);
  }
}

template <class T>
void optimizer_step(const TrainConfig& config, T* params, const T* grads, T* state1, T* state2, int64_t n,
                    int64_t step) {
  optimizer_step(kernels::KernelTable<T>(Memory::host), config, params, grads, state1, state2, n, step);
}

template <class T>
SingleTrainer<T>::SingleTrainer(const ModelSpec& spec, const TrainConfig& config, MlpCompute compute)
    : spec_(spec), config_(config), mlp_(spec, compute) {
  const std::vector<double> init = init_parameters(spec);
  params_.assign(init.begin(), init.end());
  grads_.assign(params_.size(), T(0));
  state1_.assign(params_.size(), T(0));
  state2_.assign(params_.size(), T(0));
}

template <class T>
double SingleTrainer<T>::step(const Batch& batch, StepTrace* trace,
                              const std::function<double(size_t, double)>& perturb) {
  const double loss = mlp_.forward_backward(params_.data(), grads_.data(), batch, 1.0);
  if (trace || perturb) {
    std::vector<T> magnitudes(grads_.size());
    mlp_.gradient_magnitudes(magnitudes.data());
    if (trace) {
      trace->gradients.assign(grads_.begin(), grads_.end());
      trace->magnitudes.assign(magnitudes.begin(), magnitudes.end());
    }
    if (perturb) {
      for (size_t i = 0; i < grads_.size(); ++i) grads_[i] += static_cast<T>(perturb(i, magnitudes[i]));
    }
  }
  ++steps_;
  optimizer_step(config_, params_.data(), grads_.data(), state1_.data(), state2_.data(),
                 static_cast<int64_t>(params_.size()), steps_);
  return loss;
}

template <class T>
double SingleTrainer<T>::step_accumulated(const Batch& batch, int microbatches) {
  if (microbatches < 1 || batch.size < microbatches) {
    throw Error(Error::Kind::invalid_argument, "step_accumulated: every micro-batch needs a row");
  }
  double loss_sum = 0;
  micro_grads_.resize(grads_.size());
  for (int j = 0; j < microbatches; ++j) {
    const auto [first, rows] = even_split(batch.size, microbatches, j);
    const Batch micro = slice_batch(batch, first, rows);
    T* target = j == 0 ? grads_.data() : micro_grads_.data();
    const double scale = static_cast<double>(rows) / static_cast<double>(batch.size);
    loss_sum += mlp_.forward_backward(params_.data(), target, micro, scale) * static_cast<double>(rows);
    if (j > 0) {
      for (size_t e = 0; e < grads_.size(); ++e) grads_[e] += micro_grads_[e];
    }
  }
  ++steps_;
  optimizer_step(config_, params_.data(), grads_.data(), state1_.data(), state2_.data(),
                 static_cast<int64_t>(params_.size()), steps_);
  return loss_sum / static_cast<double>(batch.size);
}

template <class T>
double SingleTrainer<T>::loss(const Batch& batch) {
  return mlp_.loss(params_.data(), batch);
}

template <class T>
std::vector<double> SingleTrainer<T>::gradients(const Batch& batch) {
  mlp_.forward_backward(params_.data(), grads_.data(), batch, 1.0);
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

template void optimizer_step<float>(const TrainConfig&, float*, const float*, float*, float*, int64_t, int64_t);
template void optimizer_step<double>(const TrainConfig&, double*, const double*, double*, double*, int64_t, int64_t);
template void optimizer_step<float>(const kernels::KernelTable<float>&, const TrainConfig&, float*, const float*, float*,
                                    float*, int64_t, int64_t);
template void optimizer_step<double>(const kernels::KernelTable<double>&, const TrainConfig&, double*, const double*,
                                     double*, double*, int64_t, int64_t);
template class SingleTrainer<float>;
template class SingleTrainer<double>;

}  // namespace dts
