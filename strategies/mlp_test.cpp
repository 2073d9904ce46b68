// The MLP's bf16 compute mode (bf16 operands and activations, f32 accumulation, f32 master
// weights) and the gradient magnitudes the equivalence bound is built on.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "strategies/mlp.h"

namespace dts {
namespace {

const ModelSpec kSpec{3, 9, 7, 4, 21, 22};  // odd widths, every layer kind (first, hidden, last)

bool is_bf16_value(float v) { return float_from_bf16_bits(bf16_bits_from_double(v)) == v; }

TEST(MlpBf16, GradientsAreBf16ValuesNearTheF64Gradient) {
  const Batch batch = make_batch(kSpec, 0, 13);
  const std::vector<double> init = init_parameters(kSpec);
  std::vector<float> params(init.begin(), init.end()), grads(init.size());
  std::vector<double> params64 = init, grads64(init.size()), magnitudes(init.size());
  Mlp<float> bf16(kSpec, MlpCompute::bf16);
  Mlp<double> exact(kSpec);
  bf16.forward_backward(params.data(), grads.data(), batch, 1.0);
  exact.forward_backward(params64.data(), grads64.data(), batch, 1.0);
  exact.gradient_magnitudes(magnitudes.data());
  for (size_t i = 0; i < grads.size(); ++i) {
    // Parameter gradients leave backward rounded to bf16 (held in f32).
    EXPECT_TRUE(is_bf16_value(grads[i])) << i;
    // Each row's contribution passes a handful of bf16 roundings (input, weights, each layer's
    // output and backprop signal: at most 2 (layers) + 2 (layers) + 2 = 14 for 3 layers, each
    // 2^-8 relative, to first order) and the sum one more: |error| <= 15 * 2^-8 * M, with M the
    // sum of the contributions' magnitudes. A wrong rounding point (e.g. none at all, or
    // rounding to f16's 2^-11) would not be bf16-valued; a missing term would break this bound.
    EXPECT_LE(std::fabs(grads[i] - grads64[i]), 15 * 0x1p-8 * magnitudes[i] + 1e-30) << i;
  }
}

TEST(MlpBf16, NativeFloatIsNotRounded) {
  // Without bf16 compute, gradients are ordinary f32 values: most are not bf16-representable
  // (a bf16 value has 16 trailing zero bits; a random f32 does with probability 2^-16).
  const Batch batch = make_batch(kSpec, 0, 13);
  const std::vector<double> init = init_parameters(kSpec);
  std::vector<float> params(init.begin(), init.end()), grads(init.size());
  Mlp<float> native(kSpec);
  native.forward_backward(params.data(), grads.data(), batch, 1.0);
  size_t rounded = 0;
  for (float g : grads) rounded += is_bf16_value(g) ? 1 : 0;
  EXPECT_LT(rounded, grads.size() / 10);
}

TEST(MlpBf16, NeedsFloatMasters) {
  EXPECT_THROW(Mlp<double>(kSpec, MlpCompute::bf16), Error);
}

TEST(MlpMagnitudes, BoundTheGradientAndEqualItForOneRow) {
  const std::vector<double> init = init_parameters(kSpec);
  std::vector<double> grads(init.size()), magnitudes(init.size());
  Mlp<double> mlp(kSpec);
  // Many rows: |sum of contributions| <= sum of |contributions| (triangle inequality).
  mlp.forward_backward(init.data(), grads.data(), make_batch(kSpec, 0, 17), 1.0);
  mlp.gradient_magnitudes(magnitudes.data());
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_LE(std::fabs(grads[i]), magnitudes[i] * (1 + 1e-12)) << i;
  // One row: a single contribution, so the magnitude is exactly |gradient| (up to the product's
  // rounding, identical in both).
  mlp.forward_backward(init.data(), grads.data(), make_batch(kSpec, 5, 1), 1.0);
  mlp.gradient_magnitudes(magnitudes.data());
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_DOUBLE_EQ(std::fabs(grads[i]), magnitudes[i]) << i;
  // The loss scale scales both.
  std::vector<double> half(init.size());
  mlp.forward_backward(init.data(), grads.data(), make_batch(kSpec, 5, 1), 0.5);
  mlp.gradient_magnitudes(half.data());
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_DOUBLE_EQ(half[i], 0.5 * magnitudes[i]) << i;
}

TEST(MlpMagnitudes, NeedABackwardPass) {
  Mlp<double> mlp(kSpec);
  std::vector<double> out(static_cast<size_t>(mlp.parameter_count()));
  EXPECT_THROW(mlp.gradient_magnitudes(out.data()), Error);
}

}  // namespace
}  // namespace dts
