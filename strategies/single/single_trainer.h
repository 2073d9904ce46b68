// The reference trainer: one process, the whole global batch, in T = float or double. Every
// distributed strategy must end with the same parameters as this one (within the tolerance of
// suites/equivalence). Also exposes gradients and forward-only loss for gradient checks.
#pragma once
#include <vector>

#include "kernels/kernels.h"
#include "strategies/workload.h"

namespace dts {

enum class OptimizerKind { sgd, adamw };

struct TrainConfig {
  OptimizerKind optimizer = OptimizerKind::adamw;
  kernels::SgdMomentum sgd;
  kernels::AdamW adamw;
};

template <class T>
class SingleTrainer {
 public:
  SingleTrainer(const ModelSpec& spec, const TrainConfig& config);

  // Forward, backward and one optimizer step on `batch`; returns the mean loss before the step.
  double step(const Batch& batch);
  // Mean loss of `batch` at the current parameters (no update).
  double loss(const Batch& batch);
  // Gradient of the mean loss in the reference layout (no update).
  std::vector<double> gradients(const Batch& batch);

  std::vector<double> parameters() const;  // reference layout
  void set_parameters(const std::vector<double>& values);
  const ModelSpec& spec() const { return spec_; }

 private:
  double forward_backward(const Batch& batch, bool backward);

  ModelSpec spec_;
  TrainConfig config_;
  std::vector<ParameterInfo> layout_;
  std::vector<int64_t> dims_;
  std::vector<T> params_, grads_, state1_, state2_;  // state: velocity (sgd) or m, v (adamw)
  int64_t steps_ = 0;
  // Per layer l: input activation a_l (rows x dims[l]) and pre-activation z_l (rows x dims[l+1]).
  std::vector<std::vector<T>> activations_, pre_;
};

extern template class SingleTrainer<float>;
extern template class SingleTrainer<double>;

}  // namespace dts
