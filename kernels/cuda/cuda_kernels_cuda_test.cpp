// Every CUDA kernel (cuda_kernels.h) against its CPU kernel (cpu_kernels.h, float) on the same
// inputs: odd shapes, all gemm transposes, tolerances derived from the operations' rounding.
// Needs a GPU: exits 77 (ctest SKIP) without one. Run: ctest -R cuda_kernels --output-on-failure
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numbers>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/error.h"
#include "core/philox.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_kernels.h"

namespace dts::kernels {
namespace {

// One float rounding (round to nearest) is off by at most half an ulp, and ulp(v) <= eps |v|; the
// CPU and the GPU each round, so one operation's disagreement is at most eps |result|.
constexpr double kEps = FLT_EPSILON;
// Odd sizes: 1 (degenerate), 7 (under a warp), 33 (a warp and one), 257 (a 256-thread block and one).
constexpr int64_t kSizes[] = {1, 7, 33, 257};

// A device array filled from / read back to host vectors (dts::Buffer underneath).
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : size_(host.size()), buffer_(Memory::device, bytes()) {
    buffer_.copy_from_host(host.data(), bytes());
  }
  T* get() { return static_cast<T*>(buffer_.data()); }
  std::vector<T> to_host() const {
    cuda::synchronize();  // surfaces a kernel fault as an Error before the copy
    std::vector<T> out(size_);
    buffer_.copy_to_host(out.data(), bytes());
    return out;
  }

 private:
  size_t bytes() const { return size_ * sizeof(T); }
  size_t size_;
  Buffer buffer_;
};

// Uniform in [low, high), reproducible per (stream, index).
std::vector<float> random_floats(size_t n, uint64_t stream, double low, double high) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(low + (high - low) * philox_uniform(2024, stream, i));
  }
  return out;
}

// Tracks the worst |gpu - cpu| / tolerance over a case, so one failure line says how far off.
class Comparison {
 public:
  void add(double gpu, double cpu, double tolerance, size_t index) {
    double ratio = 0;
    if (std::isnan(gpu) || std::isnan(cpu)) {
      ratio = std::isnan(gpu) && std::isnan(cpu) ? 0 : INFINITY;
    } else if (gpu != cpu) {
      ratio = tolerance > 0 ? std::abs(gpu - cpu) / tolerance : INFINITY;
    }
    if (ratio > worst_) {
      worst_ = ratio;
      index_ = index;
      gpu_ = gpu;
      cpu_ = cpu;
      tolerance_ = tolerance;
    }
  }
  void expect_within(const std::string& what) const {
    EXPECT_TRUE(worst_ <= 1.0) << what << ": worst at [" << index_ << "]: gpu " << gpu_ << ", cpu " << cpu_
                               << ", tolerance " << tolerance_ << " (" << worst_ << "x)";
  }

 private:
  double worst_ = 0, gpu_ = 0, cpu_ = 0, tolerance_ = 0;
  size_t index_ = 0;
};

// ---- gemm -----------------------------------------------------------------------------------

// Each of CPU and GPU is within gamma_(k+2) ~ (k+2) u of the exact alpha op(A) op(B) + beta C,
// scaled by |alpha| sum_l |a_il||b_lj| + |beta c_ij| (Higham, Accuracy and Stability, 3.5, with
// two more roundings for alpha and beta); two of them, u = eps/2: (k+2) eps times that.
TEST(CudaKernels, GemmMatchesCpuForAllTransposesAndOddShapes) {
  const float alpha = 1.5f, beta = -0.5f;  // both paths of the update exercised
  uint64_t stream = 0;
  for (const bool trans_a : {false, true}) {
    for (const bool trans_b : {false, true}) {
      for (const int64_t m : kSizes) {
        for (const int64_t n : kSizes) {
          for (const int64_t k : kSizes) {
            // Padded strides (row + 3) make a stride/width mix-up visible.
            GemmShape shape{trans_a, trans_b, m, n, k, (trans_a ? m : k) + 3, (trans_b ? k : n) + 3, n + 3};
            const int64_t a_rows = trans_a ? k : m, b_rows = trans_b ? n : k;
            const auto a = random_floats(static_cast<size_t>(a_rows * shape.lda), ++stream, -1, 1);
            const auto b = random_floats(static_cast<size_t>(b_rows * shape.ldb), ++stream, -1, 1);
            auto c_cpu = random_floats(static_cast<size_t>(m * shape.ldc), ++stream, -1, 1);
            const auto c_in = c_cpu;
            DeviceArray<float> a_gpu(a), b_gpu(b), c_gpu(c_in);
            cuda::gemm(shape, alpha, a_gpu.get(), b_gpu.get(), beta, c_gpu.get());
            cpu::gemm(shape, alpha, a.data(), b.data(), beta, c_cpu.data());
            const auto c = c_gpu.to_host();

            Comparison cmp;
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                double magnitude = 0;
                for (int64_t l = 0; l < k; ++l) {
                  const float a_il = trans_a ? a[l * shape.lda + i] : a[i * shape.lda + l];
                  const float b_lj = trans_b ? b[j * shape.ldb + l] : b[l * shape.ldb + j];
                  magnitude += std::abs(double{a_il} * b_lj);
                }
                const auto idx = static_cast<size_t>(i * shape.ldc + j);
                const double scale = std::abs(alpha) * magnitude + std::abs(beta * double{c_in[idx]});
                cmp.add(c[idx], c_cpu[idx], static_cast<double>(k + 2) * kEps * scale, idx);
              }
            }
            // The padding between rows of C is not part of C: it must be untouched.
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = n; j < shape.ldc; ++j) {
                const auto idx = static_cast<size_t>(i * shape.ldc + j);
                ASSERT_EQ(std::bit_cast<uint32_t>(c[idx]), std::bit_cast<uint32_t>(c_in[idx])) << "padding written";
              }
            }
            cmp.expect_within("gemm ta=" + std::to_string(trans_a) + " tb=" + std::to_string(trans_b) +
                              " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
          }
        }
      }
    }
  }
}

// k = 0: the empty product leaves C = beta * C (BLAS's rule), with the natural stride lda = 0.
TEST(CudaKernels, GemmWithEmptyProductScalesC) {
  const GemmShape shape{false, false, 7, 5, 0, 0, 5, 5};
  auto c_cpu = random_floats(35, 1, -1, 1);
  DeviceArray<float> c_gpu(c_cpu), a_gpu(std::vector<float>(1)), b_gpu(std::vector<float>(1));
  cuda::gemm(shape, 1.0f, a_gpu.get(), b_gpu.get(), 0.25f, c_gpu.get());
  cpu::gemm<float>(shape, 1.0f, nullptr, nullptr, 0.25f, c_cpu.data());
  EXPECT_EQ(c_gpu.to_host(), c_cpu);  // multiplying by 0.25 is exact
}

// ---- bias + GeLU --------------------------------------------------------------------------------

// Each side against the exact GeLU, in eps (an ulp is at most eps relative). The CPU's float GeLU
// has its own erf (kernels/cpu/cpu_kernels.cpp; its tests bound it): x Phi within 8.5 eps, gelu'
// within 9 eps of Phi + |p| phi. CUDA: erfcf within 4 ulp of erfc at its rounded argument
// -p * fl(1/sqrt 2) (2 roundings, eps relative), which erfc's condition number kappa(p) = |p|
// phi(p) / Phi(p) (up to 37 at p = -6) magnifies to kappa eps; the product with p 0.5. phi:
// expf within 2 ulp at -0.5 p p, whose rounding (eps/2 relative) is p^2/4 eps on the result;
// the constant and two products 1.5.
constexpr double kCpuCdfUlps = 8.5, kCpuDerivativeUlps = 9, kCudaCdfUlps = 4.5, kCudaPdfTermUlps = 3.5;

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double normal_pdf(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi); }
double erfc_condition(double p) { return std::abs(p) * normal_pdf(p) / normal_cdf(p); }

TEST(CudaKernels, BiasGeluForwardMatchesCpu) {
  for (const int64_t rows : kSizes) {
    for (const int64_t cols : kSizes) {
      const auto n = static_cast<size_t>(rows * cols);
      // pre in [-6, 6): the whole working range of GeLU, down to Phi ~ 1e-9.
      const auto x = random_floats(n, 10 + static_cast<uint64_t>(rows * 1000 + cols), -4, 4);
      const auto bias = random_floats(static_cast<size_t>(cols), 11, -2, 2);
      std::vector<float> pre_cpu(n), y_cpu(n);
      DeviceArray<float> x_gpu(x), bias_gpu(bias), pre_gpu(pre_cpu), y_gpu(y_cpu);
      cuda::bias_gelu_forward(x_gpu.get(), bias_gpu.get(), pre_gpu.get(), y_gpu.get(), rows, cols);
      cpu::bias_gelu_forward(x.data(), bias.data(), pre_cpu.data(), y_cpu.data(), rows, cols);
      const auto pre = pre_gpu.to_host(), y = y_gpu.to_host();
      // pre is one IEEE addition on both sides: bit-identical.
      ASSERT_EQ(pre, pre_cpu) << rows << "x" << cols;
      Comparison cmp;
      for (size_t i = 0; i < n; ++i) {
        const double ulps = kCpuCdfUlps + kCudaCdfUlps + erfc_condition(pre_cpu[i]);
        cmp.add(y[i], y_cpu[i], ulps * kEps * std::abs(double{y_cpu[i]}) + FLT_TRUE_MIN, i);
      }
      cmp.expect_within("gelu forward " + std::to_string(rows) + "x" + std::to_string(cols));
    }
  }
}

TEST(CudaKernels, BiasGeluBackwardMatchesCpu) {
  for (const int64_t rows : kSizes) {
    for (const int64_t cols : kSizes) {
      const auto n = static_cast<size_t>(rows * cols);
      const auto pre = random_floats(n, 20 + static_cast<uint64_t>(rows * 1000 + cols), -6, 6);
      const auto dy = random_floats(n, 21, -1, 1);
      std::vector<float> dx_cpu(n), dbias_cpu(static_cast<size_t>(cols));
      DeviceArray<float> pre_gpu(pre), dy_gpu(dy), dx_gpu(dx_cpu),
          dbias_gpu(random_floats(dbias_cpu.size(), 22, -9, 9));
      cuda::bias_gelu_backward(pre_gpu.get(), dy_gpu.get(), dx_gpu.get(), dbias_gpu.get(), rows, cols);
      cpu::bias_gelu_backward(pre.data(), dy.data(), dx_cpu.data(), dbias_cpu.data(), rows, cols);
      const auto dx = dx_gpu.to_host(), dbias = dbias_gpu.to_host();

      // dx = dy (Phi + p phi): the two terms can cancel (gelu' = 0 near p = -0.75), so the bound
      // is on the terms' magnitudes, plus one rounding for the sum and one for the product.
      std::vector<double> dx_tolerance(n), abs_dx_sum(static_cast<size_t>(cols), 0.0);
      Comparison cmp_dx;
      for (size_t i = 0; i < n; ++i) {
        const double p = pre[i], cdf = normal_cdf(p), pdf_term = std::abs(p * normal_pdf(p));
        const double cuda = (kCudaCdfUlps + erfc_condition(p)) * cdf + (kCudaPdfTermUlps + p * p / 4) * pdf_term;
        dx_tolerance[i] = kEps * std::abs(double{dy[i]}) *
                              (kCpuDerivativeUlps * (cdf + pdf_term) + cuda + std::abs(cdf + p * normal_pdf(p))) +
                          kEps * std::abs(double{dx_cpu[i]});
        cmp_dx.add(dx[i], dx_cpu[i], dx_tolerance[i], i);
      }
      cmp_dx.expect_within("gelu backward dx " + std::to_string(rows) + "x" + std::to_string(cols));

      // dbias: both sides sum their own dx in double (in different orders), then round to float
      // once: the dx disagreements add up, plus rows double roundings and the final float one.
      Comparison cmp_dbias;
      for (int64_t c = 0; c < cols; ++c) {
        double tolerance = 0, magnitude = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const auto i = static_cast<size_t>(r * cols + c);
          tolerance += dx_tolerance[i];
          magnitude += std::abs(double{dx_cpu[i]});
        }
        const auto ci = static_cast<size_t>(c);
        tolerance += static_cast<double>(rows) * DBL_EPSILON * magnitude + kEps * std::abs(double{dbias_cpu[ci]});
        cmp_dbias.add(dbias[ci], dbias_cpu[ci], tolerance, ci);
      }
      cmp_dbias.expect_within("gelu backward dbias " + std::to_string(rows) + "x" + std::to_string(cols));
    }
  }
}

// No rows: dbias is still overwritten, with the empty sum.
TEST(CudaKernels, BiasGeluBackwardWithNoRowsZeroesDbias) {
  DeviceArray<float> dbias(std::vector<float>(33, 5.0f)), unused(std::vector<float>(1));
  cuda::bias_gelu_backward(unused.get(), unused.get(), unused.get(), dbias.get(), 0, 33);
  EXPECT_EQ(dbias.to_host(), std::vector<float>(33, 0.0f));
}

// The column sums use no atomics: two runs give the same bits.
TEST(CudaKernels, BiasGeluBackwardIsBitReproducible) {
  const int64_t rows = 1031, cols = 257;
  const auto n = static_cast<size_t>(rows * cols);
  DeviceArray<float> pre(random_floats(n, 30, -6, 6)), dy(random_floats(n, 31, -1, 1)), dx{std::vector<float>(n)};
  DeviceArray<float> first(std::vector<float>(static_cast<size_t>(cols))),
      second(std::vector<float>(static_cast<size_t>(cols)));
  cuda::bias_gelu_backward(pre.get(), dy.get(), dx.get(), first.get(), rows, cols);
  cuda::bias_gelu_backward(pre.get(), dy.get(), dx.get(), second.get(), rows, cols);
  EXPECT_EQ(first.to_host(), second.to_host());
}

// ---- softmax cross-entropy ------------------------------------------------------------------

std::vector<int32_t> random_labels(int64_t rows, int64_t classes, uint64_t stream) {
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  for (size_t r = 0; r < labels.size(); ++r) {
    labels[r] = static_cast<int32_t>(philox_bits(2024, stream, r) % static_cast<uint64_t>(classes));
  }
  return labels;
}

TEST(CudaKernels, SoftmaxCrossEntropyMatchesCpu) {
  for (const int64_t rows : kSizes) {
    for (const int64_t classes : kSizes) {
      const auto n = static_cast<size_t>(rows * classes);
      const auto logits = random_floats(n, 40 + static_cast<uint64_t>(rows * 1000 + classes), -8, 8);
      const auto labels = random_labels(rows, classes, 41);
      std::vector<float> d_cpu(n);
      DeviceArray<float> logits_gpu(logits), d_gpu(d_cpu);
      DeviceArray<int32_t> labels_gpu(labels);
      const double loss = cuda::softmax_cross_entropy(logits_gpu.get(), labels_gpu.get(), d_gpu.get(), rows, classes);
      const double loss_cpu = cpu::softmax_cross_entropy(logits.data(), labels.data(), d_cpu.data(), rows, classes);
      const auto d = d_gpu.to_host();
      const std::string name = std::to_string(rows) + "x" + std::to_string(classes);

      // Both take the same float l - max and sum their float exps in double: each exp is within
      // 2 ulp (CUDA) and 1.5 eps (the CPU's own exp, cpu_kernels.cpp), so the sums differ by at
      // most 3.5 eps relative, which log turns into 3.5 eps absolute per row and in the mean; the
      // double arithmetic adds (classes + rows + a few) double roundings.
      const double loss_tolerance =
          3.5 * kEps + static_cast<double>(classes + rows + 8) * DBL_EPSILON * (1 + std::abs(loss_cpu));
      EXPECT_NEAR(loss, loss_cpu, loss_tolerance) << name;

      // dlogits = (p - [label]) / rows with p = e / sum: 3.5 eps (e) + 3.5 eps (sum) relative on
      // p, then one float rounding of the result on each side.
      Comparison cmp;
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = &logits[static_cast<size_t>(r * classes)];
        double max = row[0], sum = 0;
        for (int64_t c = 1; c < classes; ++c) max = std::max<double>(max, row[c]);
        for (int64_t c = 0; c < classes; ++c) sum += std::exp(row[c] - max);
        for (int64_t c = 0; c < classes; ++c) {
          const auto i = static_cast<size_t>(r * classes + c);
          const double p = std::exp(row[c] - max) / sum;
          cmp.add(d[i], d_cpu[i], 7 * kEps * p / static_cast<double>(rows) + kEps * std::abs(double{d_cpu[i]}), i);
        }
      }
      cmp.expect_within("softmax dlogits " + name);
    }
  }
}

TEST(CudaKernels, SoftmaxCrossEntropyIsBitReproducible) {
  const int64_t rows = 257, classes = 1031;
  const auto n = static_cast<size_t>(rows * classes);
  DeviceArray<float> logits(random_floats(n, 50, -8, 8)), d{std::vector<float>(n)};
  DeviceArray<int32_t> labels(random_labels(rows, classes, 51));
  const double first = cuda::softmax_cross_entropy(logits.get(), labels.get(), d.get(), rows, classes);
  const double second = cuda::softmax_cross_entropy(logits.get(), labels.get(), d.get(), rows, classes);
  EXPECT_EQ(std::bit_cast<uint64_t>(first), std::bit_cast<uint64_t>(second));
}

TEST(CudaKernels, SoftmaxCrossEntropyRejectsLabelOutOfRange) {
  DeviceArray<float> logits(random_floats(21, 60, -1, 1)), d(std::vector<float>(21));
  DeviceArray<int32_t> labels(std::vector<int32_t>{0, 7, 2});  // 7 classes: label 7 is out of range
  try {
    cuda::softmax_cross_entropy(logits.get(), labels.get(), d.get(), 3, 7);
    ADD_FAILURE() << "no error for label 7 of 7 classes";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("row 1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cuda::softmax_cross_entropy(logits.get(), labels.get(), d.get(), 0, 7), 0.0);  // empty batch
}

// ---- optimizers -----------------------------------------------------------------------------

// Element counts: the odd sizes, and one past a full grid-stride sweep (4096 blocks x 256).
constexpr int64_t kOptimizerSizes[] = {1, 7, 33, 257, 4096 * 256 + 1};

// Bounds below: every float operation's result r contributes eps |r| (half an ulp per side; an
// FMA on the GPU rounds once where the CPU rounds twice, which the product's own term covers), and
// an input's disagreement is carried through the operations that use it.
TEST(CudaKernels, SgdMomentumStepMatchesCpu) {
  const SgdMomentum options[] = {{0.01, 0.9, 0.0}, {0.1, 0.5, 1e-4}};
  uint64_t stream = 100;
  for (const SgdMomentum& opt : options) {
    for (const int64_t n : kOptimizerSizes) {
      const auto size = static_cast<size_t>(n);
      auto param_cpu = random_floats(size, ++stream, -1, 1), velocity_cpu = random_floats(size, ++stream, -0.1, 0.1);
      const auto grad = random_floats(size, ++stream, -1, 1);
      const auto param_in = param_cpu, velocity_in = velocity_cpu;
      DeviceArray<float> param_gpu(param_cpu), grad_gpu(grad), velocity_gpu(velocity_cpu);
      cuda::sgd_momentum_step(param_gpu.get(), grad_gpu.get(), velocity_gpu.get(), n, opt);
      cpu::sgd_momentum_step(param_cpu.data(), grad.data(), velocity_cpu.data(), n, opt);
      const auto param = param_gpu.to_host(), velocity = velocity_gpu.to_host();

      const double lr = static_cast<float>(opt.lr), momentum = static_cast<float>(opt.momentum);
      const double weight_decay = static_cast<float>(opt.weight_decay);
      Comparison cmp_v, cmp_p;
      for (size_t i = 0; i < size; ++i) {
        const double decay_term = std::abs(weight_decay * param_in[i]);
        const double g = grad[i] + weight_decay * param_in[i];
        const double g_tolerance = kEps * (decay_term + std::abs(g));
        const double v_tolerance =
            g_tolerance + kEps * (std::abs(momentum * velocity_in[i]) + std::abs(double{velocity_cpu[i]}));
        const double p_tolerance =
            lr * v_tolerance + kEps * (std::abs(lr * velocity_cpu[i]) + std::abs(double{param_cpu[i]}));
        cmp_v.add(velocity[i], velocity_cpu[i], v_tolerance, i);
        cmp_p.add(param[i], param_cpu[i], p_tolerance, i);
      }
      const std::string name = "sgd n=" + std::to_string(n) + " weight_decay=" + std::to_string(opt.weight_decay);
      cmp_v.expect_within(name + " velocity");
      cmp_p.expect_within(name + " param");
    }
  }
}

TEST(CudaKernels, AdamWStepMatchesCpu) {
  const AdamW opt;  // PyTorch's defaults, weight decay 0.01
  uint64_t stream = 200;
  for (const int64_t step : {int64_t{1}, int64_t{10}, int64_t{1000}}) {
    for (const int64_t n : kOptimizerSizes) {
      const auto size = static_cast<size_t>(n);
      auto param_cpu = random_floats(size, ++stream, -1, 1), m_cpu = random_floats(size, ++stream, -0.1, 0.1);
      auto v_cpu = random_floats(size, ++stream, 0, 0.01);
      const auto grad = random_floats(size, ++stream, -1, 1);
      const auto param_in = param_cpu, m_in = m_cpu, v_in = v_cpu;
      DeviceArray<float> param_gpu(param_cpu), grad_gpu(grad), m_gpu(m_cpu), v_gpu(v_cpu);
      cuda::adamw_step(param_gpu.get(), grad_gpu.get(), m_gpu.get(), v_gpu.get(), n, opt, step);
      cpu::adamw_step(param_cpu.data(), grad.data(), m_cpu.data(), v_cpu.data(), n, opt, step);
      const auto param = param_gpu.to_host(), m = m_gpu.to_host(), v = v_gpu.to_host();

      // The same float scalars both sides use (computed in double, rounded once).
      const double t = static_cast<double>(step);
      const double step_size = static_cast<float>(opt.lr / (1 - std::pow(opt.beta1, t)));
      const double inv_sqrt_bc2 = static_cast<float>(1 / std::sqrt(1 - std::pow(opt.beta2, t)));
      const double decay = static_cast<float>(1 - opt.lr * opt.weight_decay);
      const double beta1 = static_cast<float>(opt.beta1), beta2 = static_cast<float>(opt.beta2);
      const double one_minus_beta1 = static_cast<float>(1 - opt.beta1),
                   one_minus_beta2 = static_cast<float>(1 - opt.beta2);
      const double eps = static_cast<float>(opt.eps);
      Comparison cmp_m, cmp_v, cmp_p;
      for (size_t i = 0; i < size; ++i) {
        const double g = grad[i], m_new = m_cpu[i], v_new = v_cpu[i];
        const double m_tolerance = kEps * (std::abs(beta1 * m_in[i]) + std::abs(one_minus_beta1 * g) + std::abs(m_new));
        // (1 - b2) g g is two products.
        const double v_tolerance = kEps * (beta2 * v_in[i] + 2 * one_minus_beta2 * g * g + v_new);
        const double root = std::sqrt(v_new);
        const double denom = root * inv_sqrt_bc2 + eps;
        // sqrt halves a relative error and rounds once; the scaling and + eps round once each.
        const double root_tolerance = (root > 0 ? 0.5 * v_tolerance / root : 0) + kEps * root;
        const double denom_tolerance = inv_sqrt_bc2 * root_tolerance + kEps * (root * inv_sqrt_bc2 + denom);
        const double update = step_size * m_new / denom;
        // step_size * m / denom: the inputs' disagreements, then a product and a quotient.
        const double update_tolerance =
            step_size * m_tolerance / denom + std::abs(update) * (denom_tolerance / denom + 2 * kEps);
        const double p_tolerance =
            update_tolerance + kEps * (std::abs(decay * param_in[i]) + std::abs(double{param_cpu[i]}));
        cmp_m.add(m[i], m_cpu[i], m_tolerance, i);
        cmp_v.add(v[i], v_cpu[i], v_tolerance, i);
        cmp_p.add(param[i], param_cpu[i], p_tolerance, i);
      }
      const std::string name = "adamw n=" + std::to_string(n) + " step=" + std::to_string(step);
      cmp_m.expect_within(name + " m");
      cmp_v.expect_within(name + " v");
      cmp_p.expect_within(name + " param");
    }
  }
}

TEST(CudaKernels, AdamWRejectsStepZero) {
  DeviceArray<float> x(std::vector<float>(4));
  EXPECT_THROW(cuda::adamw_step(x.get(), x.get(), x.get(), x.get(), 4, AdamW{}, 0), Error);
}

// ---- casts ----------------------------------------------------------------------------------

// Both sides round to nearest even, which has one answer: bit-exact, NaN aside (a NaN's payload
// is not specified: the CPU keeps its top bits, the GPU's cvt gives the canonical NaN).
void expect_same_bits(const std::vector<uint16_t>& gpu, const std::vector<uint16_t>& cpu, const std::vector<float>& in,
                      bool bf16, const char* what) {
  size_t mismatches = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (std::isnan(in[i])) {
      const uint16_t exponent = bf16 ? 0x7f80 : 0x7c00, mantissa = bf16 ? 0x007f : 0x03ff;
      const bool gpu_nan = (gpu[i] & exponent) == exponent && (gpu[i] & mantissa) != 0;
      if (!gpu_nan && ++mismatches <= 5) ADD_FAILURE() << what << ": NaN became " << gpu[i];
      continue;
    }
    if (gpu[i] != cpu[i] && ++mismatches <= 5) {
      ADD_FAILURE() << what << ": input bits 0x" << std::hex << std::bit_cast<uint32_t>(in[i]) << ": gpu 0x" << gpu[i]
                    << ", cpu 0x" << cpu[i];
    }
  }
  EXPECT_EQ(mismatches, 0u) << what;
}

// Every top-24-bit pattern (all signs, exponents, and leading mantissa bits) with low bytes 0x00
// (exact values and exact ties: bf16 ties have low 16 bits 0x8000, f16 ties low 13 bits 0x1000),
// 0x01 (just above) and 0xff (just below).
std::vector<float> cast_sweep() {
  std::vector<float> in;
  in.reserve(3u << 24);
  for (const uint32_t low : {0x00u, 0x01u, 0xffu}) {
    for (uint32_t top = 0; top < (1u << 24); ++top) in.push_back(std::bit_cast<float>(top << 8 | low));
  }
  return in;
}

TEST(CudaKernels, NarrowingCastsAreBitExact) {
  const auto in = cast_sweep();
  const auto n = static_cast<int64_t>(in.size());
  DeviceArray<float> in_gpu(in);
  std::vector<uint16_t> cpu_out(in.size());
  {
    DeviceArray<uint16_t> out(cpu_out);
    cuda::cast_f32_to_bf16(in_gpu.get(), out.get(), n);
    cpu::cast_f32_to_bf16(in.data(), cpu_out.data(), n);
    expect_same_bits(out.to_host(), cpu_out, in, true, "f32 -> bf16");
  }
  {
    DeviceArray<uint16_t> out(cpu_out);
    cuda::cast_f32_to_f16(in_gpu.get(), out.get(), n);
    cpu::cast_f32_to_f16(in.data(), cpu_out.data(), n);
    expect_same_bits(out.to_host(), cpu_out, in, false, "f32 -> f16");
  }
}

// Widening is exact: every one of the 65536 patterns, bit for bit (NaN: NaN).
TEST(CudaKernels, WideningCastsAreExactForEveryPattern) {
  std::vector<uint16_t> in(1u << 16);
  for (uint32_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint16_t>(i);
  DeviceArray<uint16_t> in_gpu(in);
  for (const bool bf16 : {true, false}) {
    std::vector<float> cpu_out(in.size());
    DeviceArray<float> out(cpu_out);
    if (bf16) {
      cuda::cast_bf16_to_f32(in_gpu.get(), out.get(), static_cast<int64_t>(in.size()));
      cpu::cast_bf16_to_f32(in.data(), cpu_out.data(), static_cast<int64_t>(in.size()));
    } else {
      cuda::cast_f16_to_f32(in_gpu.get(), out.get(), static_cast<int64_t>(in.size()));
      cpu::cast_f16_to_f32(in.data(), cpu_out.data(), static_cast<int64_t>(in.size()));
    }
    const auto gpu_out = out.to_host();
    size_t mismatches = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const bool same = std::isnan(cpu_out[i])
                            ? std::isnan(gpu_out[i])
                            : std::bit_cast<uint32_t>(gpu_out[i]) == std::bit_cast<uint32_t>(cpu_out[i]);
      if (!same && ++mismatches <= 5) {
        ADD_FAILURE() << (bf16 ? "bf16" : "f16") << " 0x" << std::hex << in[i] << ": gpu " << gpu_out[i] << ", cpu "
                      << cpu_out[i];
      }
    }
    EXPECT_EQ(mismatches, 0u) << (bf16 ? "bf16 -> f32" : "f16 -> f32");
  }
}

// ---- layer pieces: bias_add, column_sum, add, scale, divide, scale_in_double ----------------

// One float operation per element on both sides, rounded to nearest: the same bits.
TEST(CudaKernels, BiasAddAddAndScaleAreOneRoundingEach) {
  for (const int64_t rows : kSizes) {
    for (const int64_t cols : kSizes) {
      const auto n = static_cast<size_t>(rows * cols);
      const auto x = random_floats(n, 900 + static_cast<uint64_t>(rows * 1000 + cols), -3, 3);
      const auto bias = random_floats(static_cast<size_t>(cols), 901, -1, 1);
      DeviceArray<float> x_gpu(x), bias_gpu(bias), out(std::vector<float>(n, NAN));
      cuda::bias_add(x_gpu.get(), bias_gpu.get(), out.get(), rows, cols);
      std::vector<float> want(n);
      for (size_t i = 0; i < n; ++i) want[i] = x[i] + bias[i % static_cast<size_t>(cols)];
      EXPECT_EQ(out.to_host(), want) << "bias_add " << rows << "x" << cols;

      const auto y = random_floats(n, 902, -2, 2);
      DeviceArray<float> y_gpu(y);
      cuda::add(y_gpu.get(), x_gpu.get(), static_cast<int64_t>(n));
      cuda::scale(x_gpu.get(), 0.3f, static_cast<int64_t>(n));
      DeviceArray<float> q_gpu(y);
      cuda::divide(q_gpu.get(), 3.0f, static_cast<int64_t>(n));  // gossip's mixing of 3 models
      std::vector<float> sum(n), scaled(n), divided(n);
      for (size_t i = 0; i < n; ++i) sum[i] = y[i] + x[i], scaled[i] = x[i] * 0.3f, divided[i] = y[i] / 3.0f;
      EXPECT_EQ(y_gpu.to_host(), sum) << "add n=" << n;
      EXPECT_EQ(x_gpu.to_host(), scaled) << "scale n=" << n;
      EXPECT_EQ(q_gpu.to_host(), divided) << "divide n=" << n;  // not x * (1/3): another rounding
      // scale_in_double: the product in double, rounded once (23/11: no float holds it).
      cuda::scale_in_double(y_gpu.get(), 23.0 / 11.0, static_cast<int64_t>(n));
      for (float& v : sum) v = static_cast<float>(static_cast<double>(v) * (23.0 / 11.0));
      EXPECT_EQ(y_gpu.to_host(), sum) << "scale_in_double n=" << n;
    }
  }
}

// Both sums in double (orders differ: each within (rows - 1) DBL_EPSILON of sum |x|), then one
// float rounding each (eps |result| between them); no rows: 0.
TEST(CudaKernels, ColumnSumMatchesADoubleSumRoundedOnce) {
  for (const int64_t rows : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{33}, int64_t{1000}}) {
    for (const int64_t cols : kSizes) {
      const auto x = random_floats(static_cast<size_t>(std::max<int64_t>(rows * cols, 1)), 903, -1, 1);
      DeviceArray<float> x_gpu(x), out(std::vector<float>(static_cast<size_t>(cols), NAN));
      cuda::column_sum(x_gpu.get(), out.get(), rows, cols);
      const auto got = out.to_host();
      Comparison cmp;
      for (int64_t c = 0; c < cols; ++c) {
        double exact = 0, magnitude = 0;
        for (int64_t r = 0; r < rows; ++r) {
          exact += x[static_cast<size_t>(r * cols + c)];
          magnitude += std::abs(double{x[static_cast<size_t>(r * cols + c)]});
        }
        const auto want = static_cast<float>(exact);
        cmp.add(got[static_cast<size_t>(c)], want,
                static_cast<double>(rows) * DBL_EPSILON * magnitude + kEps * std::abs(double{want}),
                static_cast<size_t>(c));
      }
      cmp.expect_within("column_sum " + std::to_string(rows) + "x" + std::to_string(cols));
    }
  }
}

// ---- empty inputs ---------------------------------------------------------------------------

TEST(CudaKernels, EmptyInputsAreNoOps) {
  DeviceArray<float> f(std::vector<float>(1, 3.0f));
  DeviceArray<uint16_t> h(std::vector<uint16_t>(1, 7));
  EXPECT_NO_THROW({
    cuda::gemm(GemmShape{false, false, 0, 0, 0, 0, 0, 0}, 1.0f, f.get(), f.get(), 0.0f, f.get());
    cuda::bias_gelu_forward(f.get(), f.get(), f.get(), f.get(), 0, 7);
    cuda::bias_gelu_forward(f.get(), f.get(), f.get(), f.get(), 7, 0);
    cuda::sgd_momentum_step(f.get(), f.get(), f.get(), 0, SgdMomentum{});
    cuda::adamw_step(f.get(), f.get(), f.get(), f.get(), 0, AdamW{}, 1);
    cuda::cast_f32_to_bf16(f.get(), h.get(), 0);
    cuda::cast_f16_to_f32(h.get(), f.get(), 0);
    cuda::bias_add(f.get(), f.get(), f.get(), 0, 7);
    cuda::add(f.get(), f.get(), 0);
    cuda::scale(f.get(), 2.0f, 0);
    cuda::divide(f.get(), 2.0f, 0);
    cuda::scale_in_double(f.get(), 2.0, 0);
    cuda::synchronize();
  });
  EXPECT_EQ(f.to_host(), std::vector<float>(1, 3.0f));
  EXPECT_EQ(h.to_host(), std::vector<uint16_t>(1, 7));
}

}  // namespace
}  // namespace dts::kernels

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (!dts::kernels::cuda::available()) {
    std::printf("no CUDA device: skipping\n");
    return 77;
  }
  return RUN_ALL_TESTS();
}
