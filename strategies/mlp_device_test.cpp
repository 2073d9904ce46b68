// Mlp<float> on device memory against Mlp<float> on host memory, on the same parameters and
// batch: the loss, every gradient within the bound the equivalence suite admits for the device
// (2 (B - 1 + R_device) u M per element, M the CPU's own gradient magnitudes, tolerance.h), the
// parameters in the same ready order, bf16 compute's rounding points, and the same bits run to
// run. Built twice: mlp_emulated_test on the emulated device (any machine), mlp_cuda_test on a
// GPU (exits 77, ctest SKIP, without one).
//   ctest -R 'mlp_(emulated|cuda)' --output-on-failure
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <vector>

#if !DTS_TEST_EMULATED_DEVICE
#include "kernels/cuda/cuda_kernels.h"
#endif
#include "core/half.h"
#include "kernels/device/kernel_table.h"
#include "strategies/mlp.h"
#include "suites/equivalence/tolerance.h"

namespace dts {
namespace {

// Uneven everywhere: 23 rows, width 13 (neither a warp nor a tile), 3 layers (two GeLUs).
const ModelSpec kSpec{3, 13, 7, 5, 7, 8};
constexpr int64_t kRows = 23;
constexpr double kLossScale = 0.5;  // as a shard of a larger global batch

struct Pass {
  double loss = 0;
  std::vector<float> grads;
  std::vector<size_t> ready;
};

Pass device_pass(const std::vector<float>& params, const Batch& batch, MlpCompute compute = MlpCompute::native) {
  Mlp<float> mlp(kSpec, compute, Memory::device);
  kernels::Array<float> p(Memory::device, static_cast<int64_t>(params.size()));
  kernels::Array<float> g(Memory::device, static_cast<int64_t>(params.size()));
  p.upload(params.data(), static_cast<int64_t>(params.size()));
  Pass pass;
  pass.loss = mlp.forward_backward(p.data(), g.data(), batch, kLossScale, [&](size_t i) { pass.ready.push_back(i); });
  pass.grads = g.download();
  return pass;
}

TEST(MlpOnTheDevice, MatchesTheHostMlpWithinTheDeviceBound) {
  const std::vector<double> init = init_parameters(kSpec);
  const std::vector<float> params(init.begin(), init.end());
  const Batch batch = make_batch(kSpec, 0, kRows);

  Mlp<float> cpu(kSpec);
  std::vector<float> grads(params.size()), magnitudes(params.size());
  std::vector<size_t> ready;
  const double loss = cpu.forward_backward(params.data(), grads.data(), batch, kLossScale,
                                           [&](size_t i) { ready.push_back(i); });
  cpu.gradient_magnitudes(magnitudes.data());

  const Pass device = device_pass(params, batch);
  EXPECT_EQ(device.ready, ready);
  // The mean of 23 losses, each within a few eps of the CPU's (softmax 3.5 eps, plus the logits'
  // reordered sums): 1e-5 relative is ~80 eps, ample and still far below a wrong layer's effect.
  EXPECT_NEAR(device.loss, loss, 1e-5 * std::abs(loss));

  const double u = FLT_EPSILON / 2;
  const double factor = 2.0 * static_cast<double>(kRows - 1 + device_kernel_terms(kSpec)) * u;
  size_t past = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    const double bound = factor * magnitudes[i] + FLT_TRUE_MIN;
    if (std::abs(double{device.grads[i]} - grads[i]) > bound && ++past <= 5) {
      ADD_FAILURE() << "gradient " << i << ": device " << device.grads[i] << ", cpu " << grads[i] << ", bound "
                    << bound;
    }
  }
  EXPECT_EQ(past, 0u);
}

// cuBLAS and the kernels use no atomics: the equivalence suite's "reproducible" check rests on it.
TEST(MlpOnTheDevice, GivesTheSameBitsTwice) {
  const std::vector<double> init = init_parameters(kSpec);
  const std::vector<float> params(init.begin(), init.end());
  const Batch batch = make_batch(kSpec, 5, kRows);
  const Pass first = device_pass(params, batch), second = device_pass(params, batch);
  EXPECT_EQ(first.grads, second.grads);
  EXPECT_EQ(first.loss, second.loss);
}

// bf16 compute on the device rounds where the host's does (mlp.h): every gradient is a bf16
// value, and within the host bf16 test's bound of the f64 gradient (mlp_test.cpp: 15 roundings
// of 2^-8 for 3 layers), widened by the device's reordered f32 sums (2 (B - 1 + R_device) u M).
// Rounding nowhere would leave f32 values; rounding to f16 or twice as often would break it.
TEST(MlpOnTheDevice, Bf16ComputeRoundsWhereTheHostDoes) {
  const std::vector<double> init = init_parameters(kSpec);
  const std::vector<float> params(init.begin(), init.end());
  const Batch batch = make_batch(kSpec, 3, kRows);
  Mlp<double> exact(kSpec);
  std::vector<double> params64 = init, grads64(init.size()), magnitudes(init.size());
  exact.forward_backward(params64.data(), grads64.data(), batch, kLossScale);
  exact.gradient_magnitudes(magnitudes.data());
  const Pass device = device_pass(params, batch, MlpCompute::bf16);
  const double bound = 15 * 0x1p-8 + 2.0 * static_cast<double>(kRows - 1 + device_kernel_terms(kSpec)) * FLT_EPSILON / 2;
  for (size_t i = 0; i < device.grads.size(); ++i) {
    const float g = device.grads[i];
    EXPECT_EQ(float_from_bf16_bits(bf16_bits_from_double(g)), g) << i;
    EXPECT_LE(std::fabs(g - grads64[i]), bound * magnitudes[i] + 1e-30) << i;
  }
}

}  // namespace
}  // namespace dts

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
#if DTS_TEST_EMULATED_DEVICE
  dts::use_device_kind(dts::DeviceKind::emulated);
#else
  if (!dts::kernels::cuda::available()) {
    std::printf("no CUDA device: skipping\n");
    return 77;
  }
#endif
  return RUN_ALL_TESTS();
}
