// The reference trainer: one process, the whole global batch, in T = float or double. Every
// distributed strategy must end with the same parameters as this one (within the tolerance of
// suites/equivalence). Also exposes gradients and forward-only loss for gradient checks.
#pragma once
#include <functional>
#include <vector>

#include "core/host_memory.h"
#include "kernels/kernels.h"
#include "strategies/mlp.h"
#include "strategies/workload.h"

namespace dts {

enum class OptimizerKind { sgd, adamw };

struct TrainConfig {
  OptimizerKind optimizer = OptimizerKind::adamw;
  kernels::SgdMomentum sgd;
  kernels::AdamW adamw;
};

// What an error bound needs of one reference step (suites/equivalence/tolerance.h): the
// gradient the optimizer used and, per parameter, the sum of its rows' contribution magnitudes.
struct StepTrace {
  std::vector<double> gradients, magnitudes;
};

template <class T>
class SingleTrainer {
 public:
  SingleTrainer(const ModelSpec& spec, const TrainConfig& config, MlpCompute compute = MlpCompute::native);

  // Forward, backward and one optimizer step on `batch`; returns the mean loss before the step.
  // With `trace`, also records the step's gradient and gradient magnitudes. With `perturb`, adds
  // perturb(i, magnitude of i) to gradient element i before the update: the equivalence bound's
  // sensitivity runs (suites/equivalence/tolerance.h).
  double step(const Batch& batch, StepTrace* trace = nullptr,
              const std::function<double(size_t, double)>& perturb = {});
  // The same step with gradient accumulation: `microbatches` slices of `batch` (even_split rows,
  // each with loss scale rows / batch rows), the first one's gradient written and each later one
  // added in order, then one optimizer step. What a pure pipeline must match bit for bit.
  double step_accumulated(const Batch& batch, int microbatches);
  // Mean loss of `batch` at the current parameters (no update).
  double loss(const Batch& batch);
  // Gradient of the mean loss in the reference layout (no update).
  std::vector<double> gradients(const Batch& batch);

  std::vector<double> parameters() const;  // reference layout
  void set_parameters(const std::vector<double>& values);
  const ModelSpec& spec() const { return spec_; }

 private:
  ModelSpec spec_;
  TrainConfig config_;
  Mlp<T> mlp_;
  // state: velocity (sgd) or m, v (adamw). Huge pages from 2 MiB (core/host_memory.h), as the
  // strategies' arrays have.
  std::vector<T, HostAllocator<T>> params_, grads_, micro_grads_, state1_, state2_;
  int64_t steps_ = 0;
};

// One optimizer step over n elements (the config's optimizer), shared by every strategy so the
// update is the same code wherever the parameters live. state2 is unused by SGD.
template <class T>
void optimizer_step(const TrainConfig& config, T* params, const T* grads, T* state1, T* state2, int64_t n,
                    int64_t step);
// The same on the memory of `table` (host or device: kernels/device/kernel_table.h); on the host
// the same kernels, so the same bits.
template <class T>
void optimizer_step(const kernels::KernelTable<T>& table, const TrainConfig& config, T* params, const T* grads,
                    T* state1, T* state2, int64_t n, int64_t step);

extern template class SingleTrainer<float>;
extern template class SingleTrainer<double>;

}  // namespace dts
