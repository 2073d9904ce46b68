// The per-parameter equivalence bound (tolerance.h) against closed forms it must reduce to, and
// the element-wise check's handling of zero bounds and NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "suites/equivalence/tolerance.h"

namespace dts {
namespace {

TrainConfig sgd(double lr, double momentum) {
  TrainConfig t;
  t.optimizer = OptimizerKind::sgd;
  t.sgd.lr = lr;
  t.sgd.momentum = momentum;
  return t;
}

TEST(EquivalenceBound, SgdOnZeroParametersIsTheClosedForm) {
  // Parameters 0 and gradients 0 (so every rounding term, 2u|value|, vanishes) and magnitude M
  // each step: e_v(s) = sum_{j<s} mu^j e_g, e_p(S) = lr sum_s e_v(s), e_g = 2 (B - 1) u M.
  const double lr = 0.1, mu = 0.5, magnitude = 3;
  const int64_t rows = 9;
  const PrecisionModel& f64 = precision_model(Precision::f64);
  EquivalenceBound bound(sgd(lr, mu), f64, rows, std::vector<double>(4, 0.0));
  StepTrace trace{std::vector<double>(4, 0.0), std::vector<double>(4, magnitude)};
  const double e_g = 2.0 * (rows - 1) * 0x1p-53 * magnitude;
  EXPECT_DOUBLE_EQ(bound.gradient_factor() * magnitude, e_g);
  double e_v = 0, e_p = 0;
  for (int s = 0; s < 3; ++s) {
    bound.add_step(trace);
    e_v = mu * e_v + e_g;
    e_p += lr * e_v;
    for (double b : bound.bound()) EXPECT_NEAR(b, e_p, 1e-12 * e_p);
  }
}

TEST(EquivalenceBound, Bf16AddsFourBf16UnitsPerMagnitude) {
  // tolerance.h: c_mixed = 4 u_bf16 = 4 * 2^-8 on top of the f32 accumulation term.
  const int64_t rows = 5;
  EquivalenceBound bf16(sgd(0.1, 0), precision_model(Precision::bf16), rows, {0.0});
  EXPECT_DOUBLE_EQ(bf16.gradient_factor(), 2.0 * (rows - 1) * 0x1p-24 + 4 * 0x1p-8);
  EquivalenceBound f32(sgd(0.1, 0), precision_model(Precision::f32), rows, {0.0});
  EXPECT_DOUBLE_EQ(f32.gradient_factor(), 2.0 * (rows - 1) * 0x1p-24);
}

TEST(EquivalenceBound, AdamwIsTightWhereTheGradientIsLargeAndWideWhereItIsNot) {
  // Element 0: |g| = 1 >> e_g: the first Adam step is lr m/sqrt(v) = lr g/|g|; the box moves m
  // and sqrt(v) each by e_g/|g| relative, in opposite directions at the corner, so the update
  // moves by lr 2 e_g; add the parameter's roundings 2u (|p| + |p'|) ~ 4u * 0.5 and the update's
  // (10 u lr, plus m's and v's, < 40 u lr). Element 1: g = 0 with M = 1: the sign of the step is
  // undetermined, and the bound must allow about a full step (lr) either way.
  TrainConfig adamw;
  adamw.optimizer = OptimizerKind::adamw;
  adamw.adamw.lr = 0.01;
  EquivalenceBound bound(adamw, precision_model(Precision::f32), 64, {0.5, 0.5});
  bound.add_step(StepTrace{{1.0, 0.0}, {1.0, 1.0}});
  const double lr = adamw.adamw.lr, u = 0x1p-24, e_g = 2.0 * 63 * u * 1.0;
  EXPECT_LT(bound.bound()[0], 2 * u * 2 * 0.5 + lr * 2 * e_g + 40 * u * lr);
  EXPECT_GT(bound.bound()[1], 0.9 * lr);
  // ... but never more than the largest step any consistent (m, v) allows, plus the
  // reference's own: 2 lr at step 1 (tolerance.cpp), plus rounding.
  EXPECT_LE(bound.bound()[1], 2 * lr * (1 + 1e-5));
}

TEST(CheckAgainstBound, CountsViolationsAndNamesTheWorst) {
  const std::vector<double> reference{1, 2, 3, 4};
  const std::vector<double> bound{0.1, 0.1, 0, 1};
  const BoundCheck ok = check_against_bound({1.05, 2, 3, 4.5}, reference, bound);
  EXPECT_EQ(ok.violations, 0);
  EXPECT_DOUBLE_EQ(ok.max_ratio, 0.5);  // 0.05 / 0.1 and 0.5 / 1
  EXPECT_DOUBLE_EQ(ok.max_abs_error, 0.5);
  // An element with a zero bound must match exactly; any difference is infinitely past it.
  const BoundCheck exact = check_against_bound({1, 2, 3.0000001, 4}, reference, bound);
  EXPECT_EQ(exact.violations, 1);
  EXPECT_EQ(exact.worst, 2);
  EXPECT_TRUE(std::isinf(exact.max_ratio));
  // NaN is never within a bound.
  const BoundCheck nan = check_against_bound({1, NAN, 3, 4}, reference, bound);
  EXPECT_EQ(nan.violations, 1);
  EXPECT_EQ(nan.worst, 1);
}

TEST(ReferenceWithBound, ContainsItsOwnRerunAndGrowsWithSteps) {
  // The reference is deterministic, so a second reference run is within its bound at distance
  // 0, and more steps can only widen the bound (errors accumulate, nothing shrinks them in SGD
  // with momentum >= 0).
  const ModelSpec spec{2, 6, 5, 3, 7, 8};
  const ReferenceWithBound a = reference_with_bound(spec, sgd(0.05, 0.9), Precision::f32, 2, 11);
  const ReferenceWithBound b = reference_with_bound(spec, sgd(0.05, 0.9), Precision::f32, 3, 11);
  EXPECT_EQ(check_against_bound(a.parameters, a.parameters, a.bound).violations, 0);
  for (size_t i = 0; i < a.bound.size(); ++i) {
    EXPECT_GT(a.bound[i], 0) << i;
    EXPECT_LE(a.bound[i], b.bound[i] * (1 + 1e-12)) << i;
  }
}

// The device's reordered terms, counted by hand for a 3-layer model 5 -> 6 -> 6 -> 3: forward
// sums over in features 4 + 5 + 5, backward da sums over out features of layers 1 and 2: 5 + 2,
// two hidden GeLUs, one softmax. Growing the width by one adds a term to each sum over it.
TEST(DeviceKernelTerms, CountEveryGemmSumAndKernelOnTheWay) {
  const ModelSpec spec{3, 6, 5, 3, 7, 8};
  EXPECT_EQ(device_kernel_terms(spec), (4 + 5 + 5) + (5 + 2) + 2 * kDeviceGeluTerms + kDeviceSoftmaxTerms);
  ModelSpec wider = spec;
  wider.width = 7;  // layer 1's and 2's forward sums, layer 1's backward sum
  EXPECT_EQ(device_kernel_terms(wider), device_kernel_terms(spec) + 3);
  const ModelSpec one_layer{1, 6, 5, 3, 7, 8};  // no hidden layer: one sum over 5 inputs, a softmax
  EXPECT_EQ(device_kernel_terms(one_layer), 4 + kDeviceSoftmaxTerms);
}

}  // namespace
}  // namespace dts
