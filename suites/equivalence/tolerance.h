// How far a distributed strategy's parameters may be from the single-process reference after S
// training steps in the same precision, derived from an error model (not tuned until green).
//
// Error model. Every strategy computes each gradient element as the same sum of per-row
// contributions as the reference, in another order (row shards, micro-batches, rank sums,
// reduce-scatter segments). Two orders of summing n terms differ by at most 2 * gamma_{n-1} *
// sum|terms|, gamma_k = k u / (1 - k u) ~ k u, u the unit roundoff (2^-24 f32, 2^-53 f64), n the
// global batch rows B. With the mean loss, sum over rows |contribution| <= A: each row adds
// |dlogit| <= 1/B times an activation; inputs are N(0, 1) and hidden GeLU activations of O(1)
// pre-activations, so |activation| < 8 = A with overwhelming probability. Hence
//     |delta g| <= 2 (B - 1) u A.
// SGD with momentum mu and learning rate lr spreads one step's gradient error over later steps
// by at most 1 / (1 - mu), so after S steps
//     |delta p| <= S * lr / (1 - mu) * 2 (B - 1) u A          (max_abs_error tolerance)
// (the feedback of a parameter error into later gradients is second order for lr * L << 1 and is
// covered by the slack in A). A dropped rank changes gradients by O(1/N) of their size, far above
// this bound; a single low-bit flip is below it, which is why replicated strategies are also
// required to hold bit-identical replicas.
//
// AdamW divides each step by sqrt(v): a gradient within rounding of zero can flip the sign of its
// whole step, so no bound of this form is useful for it; its tolerance model is future work and
// its equivalence cases are reported as skipped.
#pragma once
#include <string>

namespace dts {

struct EquivalenceTolerance {
  double max_abs_error = 0;
  std::string formula;  // the bound with its numbers, for the record's detail
};

// unit_roundoff: 2^-24 for f32, 2^-53 for f64.
EquivalenceTolerance sgd_equivalence_tolerance(int steps, double lr, double momentum, int batch_rows,
                                               double unit_roundoff);

}  // namespace dts
