// How far a distributed strategy's parameters may be from the single-process reference after S
// training steps in the same precision: a bound per parameter, derived from an error model and
// carried along the reference run (not tuned until green). The equivalence suite passes a case
// when every parameter is within its own bound.
//
// Error model, part 1: the gradient. Every strategy computes each gradient element as the same
// sum of per-row contributions c_r as the reference, in another order (row shards, micro-batches,
// rank sums, reduce-scatter segments). Two orders of summing B terms in floating point each lie
// within gamma_{B-1} M of the exact sum, gamma_k = k u / (1 - k u) ~ k u, where M = sum_r |c_r|
// is measured on the reference itself at every step (Mlp::gradient_magnitudes), so
//     e_g = (2 (B - 1) u_acc + c_mixed) M
// with u_acc the unit roundoff of the accumulation (f64 2^-53; f32 and bf16 compute 2^-24).
// bf16 compute adds c_mixed = 4 u_bf16 (u_bf16 = 2^-8): a strategy rounds each partial gradient
// (a shard's, a micro-batch's) to bf16 before summing them in f32, where the reference rounds the
// whole sum once: |sum_j bf16(G_j) - bf16(sum_j G_j)| <= u_bf16 (sum_j |G_j| + |sum_j G_j|) <=
// 2 u_bf16 M; and a per-row value that lands on the other side of a bf16 rounding boundary (its
// f32 inputs differ in the last bits) moves each of a contribution's two factors by at most one
// bf16 rounding, another 2 u_bf16 M.
//
// Tensor parallelism also reorders sums inside the forward and backward passes (a row-parallel
// layer's output adds tp partial sums over its input features; a column-parallel layer's input
// gradient over its output features). Each such sum of k terms differs from the reference's by at
// most 2 gamma_{k-1} of its magnitude sum, a relative change of the values a row's contribution c_r
// is made of; to first order (GeLU and softmax are well conditioned on these inputs, and the
// sensitivity runs of part 3 measure what feeds back) that moves c_r by 2 (k - 1) u |c_r| per sum
// on its path, so e_g gains 2 R u_acc M, R = sum of (k - 1) over the reordered sums
// (tensor_parallel_reordered_terms, strategies/tensor/parallel_mlp.h).
//
// Part 2: the optimizer. The gradient error bound is carried through the optimizer's recurrences
// element by element, as intervals around the reference's own trajectory (replayed in f64):
//   SGD with momentum mu, weight decay wd:  e_v' = mu e_v + e_g + wd e_p + rounding,
//                                           e_p' = e_p + lr e_v' + rounding;
//   AdamW: e_m' = b1 e_m + (1 - b1) e_g, e_v' = b2 e_v + (1 - b2)(2 |g| e_g + e_g^2) (+ rounding),
//   and the update's error is the largest change of lr m^/(sqrt(v^) + eps) over the box
//   [m' +- e_m] x [max(0, v' - e_v), v' + e_v] (its corners: the update is monotone in each),
//   capped by the largest update any consistent (m, v) allows (Cauchy-Schwarz, tolerance.cpp);
//   e_p' = (1 - lr wd) e_p + e_update + rounding.
// Rounding: each side rounds every computed value, and two roundings of values that differ may
// land one unit apart, so each operation adds 2 u |value| (u of the master precision, f32 for
// bf16 compute). This is why AdamW needs a per-element bound: where a gradient is within its
// error bound of zero, the update m/sqrt(v) may take any value in [-lr, lr]-ish and the bound
// says so, while everywhere else it stays tight; one scalar bound for all elements would be
// either false or useless.
//
// Part 3: feedback. Parts 1-2 bound each step's own error; they leave out parameter errors
// feeding back into later gradients (H e_p, H the loss Hessian), which SGD damps but AdamW
// amplifies where |g| is small (its update divides by sqrt(v) ~ |g|). No Hessian is at hand, so
// the dynamics are measured instead: kSensitivityRuns more reference runs each add, at every step,
// a perturbation of exactly the admitted size, +-e_g per element with random signs, to the
// gradient before the update, and the bound gains 2 max_k |p_k - p_ref| per element. The first
// run draws new signs every step; the second keeps each element's sign for all steps, which is
// the worst case for errors correlated over steps (a sum split the same way every step). The admitted
// size e_g carries the worst-case (B - 1) factor, so it is larger than real reordering errors
// (which grow like sqrt(B) u), and a linear response to it dominates theirs; the factor 2
// covers a realization more aligned with the response than the sampled signs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "strategies/single/single_trainer.h"
#include "strategies/strategy.h"

namespace dts {

// The tolerance table: one row per precision the suite runs.
struct PrecisionModel {
  const char* name;               // f64, f32, bf16 (bf16 compute, f32 master weights)
  double unit_roundoff;           // of master parameters and optimizer state
  double accumulation_roundoff;   // of the gradient's sums over rows
  double mixed_term;              // c_mixed, in units of M
};
const PrecisionModel& precision_model(Precision precision);

// The per-parameter bound, advanced one reference step at a time.
class EquivalenceBound {
 public:
  // `initial`: the parameters every run starts from (init_parameters).
  // `reordered_terms`: R of tensor parallelism above (0 for strategies that only split the batch).
  EquivalenceBound(const TrainConfig& train, const PrecisionModel& model, int64_t batch_rows,
                   std::vector<double> initial, int64_t reordered_terms = 0);

  // One reference step: the gradient the optimizer used and its row magnitudes (StepTrace).
  void add_step(const StepTrace& trace);

  const std::vector<double>& bound() const { return error_params_; }
  // e_g = factor * M for this configuration.
  double gradient_factor() const { return gradient_factor_; }
  std::string describe() const;

 private:
  TrainConfig train_;
  PrecisionModel model_;
  int64_t batch_rows_;
  int64_t reordered_terms_;
  double gradient_factor_;
  int64_t steps_ = 0;
  // The reference trajectory (f64 replay) and the error bounds around it.
  std::vector<double> params_, state1_, state2_;
  std::vector<double> error_params_, error_state1_, error_state2_;
};

// The device (a strategy on device memory: cuBLAS and kernels/cuda) against the CPU reference (OpenBLAS
// and kernels/cpu), in R's units of 2 u_acc relative on a row's contribution c_r, to first order
// as for tensor parallelism above:
//   - every gemm sums in cuBLAS's order, not OpenBLAS's: the forward z = a W^T of each layer over
//     its in features (in - 1), the backward da = g W of each layer but the first over its out
//     features (out - 1); dW = g^T a sums over rows, part 1's (B - 1) already;
//   - each element-wise kernel disagrees with its CPU twin by the ulps cuda_kernels_cuda_test
//     bounds (an X eps disagreement is X units: eps = 2 u): GeLU forward 8.5 + 4.5 + erfc's
//     condition number (<= 10 for |p| <= 3), gelu' 9 + 4.5 + 10 + 3.5 + p^2/4 (<= 2.25), together
//     kDeviceGeluTerms per hidden layer; softmax's dlogits 7 + 1, kDeviceSoftmaxTerms.
// Past |p| = 3 the relative disagreement grows (erfc's condition number reaches 37 at p = -6), on
// values below 0.005 of the largest, whose contributions to M are as small.
inline constexpr int64_t kDeviceGeluTerms = 53, kDeviceSoftmaxTerms = 8;
int64_t device_kernel_terms(const ModelSpec& spec);

inline constexpr int kSensitivityRuns = 2;

// The single-process reference run in `precision` (S steps of `batch_rows`-row global batches,
// batch s holding samples [s B, (s + 1) B)) and the per-parameter bound of parts 1-3.
struct ReferenceWithBound {
  std::vector<double> parameters, bound;
  std::string description;
};
ReferenceWithBound reference_with_bound(const ModelSpec& spec, const TrainConfig& train, Precision precision,
                                        int steps, int64_t batch_rows, int64_t reordered_terms = 0);

// Compares `actual` with `reference` element by element against `bound`.
struct BoundCheck {
  double max_abs_error = 0;
  double max_ratio = 0;         // max |actual - reference| / bound (0/0 counts as 0)
  int64_t worst = -1;           // element of max_ratio
  int64_t violations = 0;       // elements past their bound
};
BoundCheck check_against_bound(const std::vector<double>& actual, const std::vector<double>& reference,
                               const std::vector<double>& bound);

}  // namespace dts
