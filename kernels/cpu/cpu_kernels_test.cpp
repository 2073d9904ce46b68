// Tests of kernels/cpu against independent references: a naive double gemm, the erf formula,
// central finite differences (in double) for every gradient, and hand-stepped optimizers.
// Every tolerance is an error bound written next to it, not a tuned constant.
#include "kernels/cpu/cpu_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"

namespace dts::kernels::cpu {
namespace {

// Unit roundoff: the largest relative error of one correctly rounded operation.
template <class T>
constexpr double kUnitRoundoff = std::numeric_limits<T>::epsilon() / 2;

// Fixed seed: a failure reproduces bit for bit.
constexpr uint32_t kSeed = 20240611;

template <class T>
std::vector<T> random_values(size_t count, std::mt19937& rng, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> out(count);
  for (auto& x : out) x = static_cast<T>(dist(rng));
  return out;
}

// ---------------------------------------------------------------------------------------------
// gemm

struct GemmCase {
  bool trans_a, trans_b;
  int64_t m, n, k;
};

std::string gemm_case_name(const testing::TestParamInfo<GemmCase>& info) {
  const GemmCase& c = info.param;
  return std::string(c.trans_a ? "T" : "N") + (c.trans_b ? "T" : "N") + "_m" + std::to_string(c.m) + "_n" +
         std::to_string(c.n) + "_k" + std::to_string(c.k);
}

// Every transpose pair over m, n, k in {1, 7, 33}: 1 is the degenerate vector/scalar case, 7 is
// odd and below any SIMD width, 33 crosses a 32-wide register block by one.
std::vector<GemmCase> gemm_cases() {
  std::vector<GemmCase> cases;
  const int64_t sizes[] = {1, 7, 33};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t m : sizes)
        for (int64_t n : sizes)
          for (int64_t k : sizes) cases.push_back({ta, tb, m, n, k});
  return cases;
}

class GemmTest : public testing::TestWithParam<GemmCase> {
 protected:
  template <class T>
  void check() {
    const GemmCase& p = GetParam();
    std::mt19937 rng(kSeed);
    GemmShape s;
    s.trans_a = p.trans_a;
    s.trans_b = p.trans_b;
    s.m = p.m;
    s.n = p.n;
    s.k = p.k;
    // Stored shapes (rows x cols); strides padded by 3 so a kernel that assumes ld == cols
    // reads the padding, which holds NaN and poisons the result.
    const int64_t a_rows = p.trans_a ? p.k : p.m, a_cols = p.trans_a ? p.m : p.k;
    const int64_t b_rows = p.trans_b ? p.n : p.k, b_cols = p.trans_b ? p.k : p.n;
    s.lda = a_cols + 3;
    s.ldb = b_cols + 3;
    s.ldc = p.n + 3;
    const T nan = std::numeric_limits<T>::quiet_NaN();
    std::vector<T> a(static_cast<size_t>(a_rows * s.lda), nan), b(static_cast<size_t>(b_rows * s.ldb), nan);
    std::vector<T> c(static_cast<size_t>(p.m * s.ldc), nan);
    std::uniform_real_distribution<double> dist(-1, 1);
    for (int64_t i = 0; i < a_rows; ++i)
      for (int64_t j = 0; j < a_cols; ++j) a[static_cast<size_t>(i * s.lda + j)] = static_cast<T>(dist(rng));
    for (int64_t i = 0; i < b_rows; ++i)
      for (int64_t j = 0; j < b_cols; ++j) b[static_cast<size_t>(i * s.ldb + j)] = static_cast<T>(dist(rng));
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) c[static_cast<size_t>(i * s.ldc + j)] = static_cast<T>(dist(rng));
    const std::vector<T> c0 = c;
    // Exactly representable, and neither 1 nor 0, so a kernel that drops alpha or beta fails.
    const T alpha = T(1.5), beta = T(-0.75);

    gemm<T>(s, alpha, a.data(), b.data(), beta, c.data());

    auto op_a = [&](int64_t i, int64_t l) { return static_cast<double>(p.trans_a ? a[size_t(l * s.lda + i)] : a[size_t(i * s.lda + l)]); };
    auto op_b = [&](int64_t l, int64_t j) { return static_cast<double>(p.trans_b ? b[size_t(j * s.ldb + l)] : b[size_t(l * s.ldb + j)]); };
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        double dot = 0, magnitude = 0;
        for (int64_t l = 0; l < p.k; ++l) {
          dot += op_a(i, l) * op_b(l, j);
          magnitude += std::abs(op_a(i, l) * op_b(l, j));
        }
        const double c_old = static_cast<double>(c0[size_t(i * s.ldc + j)]);
        const double expected = static_cast<double>(alpha) * dot + static_cast<double>(beta) * c_old;
        // Higham's dot-product bound |fl(x.y) - x.y| <= gamma_k sum|x_l y_l|, gamma_k ~ k u, in any
        // summation order (blocked, FMA). Scaling by alpha, forming beta*c and the final add are
        // 3 more roundings: (k + 3) u (|alpha| sum|a||b| + |beta||c|). The double reference obeys
        // the same bound with u of double, so both are added.
        const double scale = std::abs(static_cast<double>(alpha)) * magnitude + std::abs(static_cast<double>(beta) * c_old);
        const double tolerance = double(p.k + 3) * (kUnitRoundoff<T> + kUnitRoundoff<double>) * scale;
        const double got = static_cast<double>(c[size_t(i * s.ldc + j)]);
        ASSERT_NEAR(got, expected, tolerance) << "C[" << i << "][" << j << "]";
      }
      // The padding of C is not C: it must still be NaN.
      for (int64_t j = p.n; j < s.ldc; ++j) ASSERT_TRUE(std::isnan(c[size_t(i * s.ldc + j)])) << "ldc padding written";
    }
  }
};

TEST_P(GemmTest, FloatMatchesNaiveDouble) { check<float>(); }
TEST_P(GemmTest, DoubleMatchesNaiveDouble) { check<double>(); }
INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest, testing::ValuesIn(gemm_cases()), gemm_case_name);

TEST(Gemm, EmptyProductScalesCByBeta) {
  // k = 0: op(A) op(B) is the m x n zero matrix, so C = beta C; BLAS's beta == 0 overwrites, NaN included.
  GemmShape s;
  s.m = 2;
  s.n = 3;
  s.k = 0;
  s.ldb = 3;  // B is k x n = 0 x 3: a row stride of n
  s.ldc = 3;
  std::vector<double> c = {1, 2, 3, 4, 5, std::numeric_limits<double>::quiet_NaN()};
  gemm<double>(s, 2.0, nullptr, nullptr, 0.5, c.data());
  EXPECT_EQ(c[0], 0.5);
  EXPECT_EQ(c[4], 2.5);
  EXPECT_TRUE(std::isnan(c[5]));  // 0.5 * NaN
  gemm<double>(s, 2.0, nullptr, nullptr, 0.0, c.data());
  for (double x : c) EXPECT_EQ(x, 0.0);
}

TEST(Gemm, EmptyOutputTouchesNothing) {
  GemmShape s;
  s.m = 0;
  s.n = 5;
  s.k = 4;
  s.lda = 4;
  s.ldb = 5;
  s.ldc = 5;
  EXPECT_NO_THROW(gemm<float>(s, 1.0f, nullptr, nullptr, 0.0f, nullptr));
}

TEST(Gemm, RejectsShortStridesAndNegativeSizes) {
  std::vector<float> buf(64, 0.0f);
  GemmShape s;
  s.m = 2;
  s.n = 3;
  s.k = 4;
  s.lda = 3;  // < k = 4 columns of A
  s.ldb = 3;
  s.ldc = 3;
  EXPECT_THROW(gemm<float>(s, 1.0f, buf.data(), buf.data(), 0.0f, buf.data()), Error);
  s.lda = 4;
  s.trans_b = true;  // B stored n x k: ldb must be >= k = 4
  EXPECT_THROW(gemm<float>(s, 1.0f, buf.data(), buf.data(), 0.0f, buf.data()), Error);
  s.trans_b = false;
  s.m = -1;
  EXPECT_THROW(gemm<float>(s, 1.0f, buf.data(), buf.data(), 0.0f, buf.data()), Error);
}

// ---------------------------------------------------------------------------------------------
// bias + GeLU

// The definition, in long double: x Phi(x) with the erf form of kernels.h.
double gelu_reference(double x) {
  const long double xl = x;
  return static_cast<double>(0.5L * xl * (1.0L + std::erf(xl / std::sqrt(2.0L))));
}

template <class T>
class BiasGeluTest : public testing::Test {};
using FloatTypes = testing::Types<float, double>;
TYPED_TEST_SUITE(BiasGeluTest, FloatTypes);

TYPED_TEST(BiasGeluTest, ForwardAtKnownPoints) {
  using T = TypeParam;
  // bias = {0, 0.5, -0.5} and x chosen so every pre is 0 or +-1 (sums exact in binary):
  // row 0 reaches them with x = +-0.5, row 1 with x = 1, -1.5, 1.5.
  const std::vector<T> x = {0, T(0.5), T(-0.5), 1, T(-1.5), T(1.5)};
  const std::vector<T> bias = {0, T(0.5), T(-0.5)};
  std::vector<T> pre(6), y(6);
  bias_gelu_forward<T>(x.data(), bias.data(), pre.data(), y.data(), 2, 3);
  const double expected_pre[] = {0, 1, -1, 1, -1, 1};
  // gelu(0) = 0; gelu(1) = Phi(1) = 0.8413447460685429; gelu(-1) = -(1 - Phi(1)) = -0.15865525393145707.
  const double g1 = 0.8413447460685429, gm1 = -0.15865525393145707;
  const double expected[] = {0, g1, gm1, g1, gm1, g1};
  // Relative error: erfc's condition number at z = 1/sqrt 2 is 1.5, erfc itself is within a few
  // ulp, and there are ~4 more roundings: < 8 u (double); float's budget for |x| <= 3 is 12.4 u
  // (ForwardMatchesErfFormulaOnGrid); 16 u is the grid test's bound.
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(static_cast<double>(pre[i]), expected_pre[i]) << i;
    EXPECT_NEAR(static_cast<double>(y[i]), expected[i], 16 * kUnitRoundoff<T> * std::abs(expected[i])) << i;
  }
}

TYPED_TEST(BiasGeluTest, ForwardMatchesErfFormulaOnGrid) {
  using T = TypeParam;
  // x = j / 16 over [-3, 3]: exact in both types. Error of x Phi(x) in double: Phi = 0.5
  // erfc(-x/sqrt 2) with condition number |z erfc'(z) / erfc(z)| <= 10 for z <= 2.13 (x >= -3),
  // plus ~4 roundings and erfc's own few ulp: < 16 u relative. In float, the budget of
  // FloatForwardWithinBudgetOverItsRange restricted to |x| <= 3, where the tail's q <= 0 (its
  // sensitivity 0.8 instead of 2, Horner 2.4 u instead of 3.2): 12.4 u < 16 u. The long double
  // reference is exact to ~1e-16 relative on this range (1 + erf(-2.13) = 2.7e-3 loses 3 of its
  // 19 digits).
  const int64_t count = 97;
  const auto size = static_cast<size_t>(count);
  std::vector<T> x(size), bias = {T(0)}, pre(size), y(size);
  for (int64_t j = 0; j < count; ++j) x[size_t(j)] = static_cast<T>(double(j - 48) / 16.0);
  bias_gelu_forward<T>(x.data(), bias.data(), pre.data(), y.data(), count, 1);
  for (int64_t j = 0; j < count; ++j) {
    const double ref = gelu_reference(static_cast<double>(x[size_t(j)]));
    EXPECT_NEAR(static_cast<double>(y[size_t(j)]), ref, 16 * kUnitRoundoff<T> * std::abs(ref) + 1e-16 * std::abs(ref))
        << "x = " << x[size_t(j)];
  }
}

TEST(BiasGelu, BackwardMatchesFiniteDifferencesInDouble) {
  // pre on the grid j/8 in [-3, 3] and h = 2^-20: pre +- h are exact, so the quotient differences
  // exactly the intended points. Central difference error:
  //   truncation  h^2/6 max|gelu'''|, gelu''' = phi(x)(x^3 - 4x), |.| < 0.8 everywhere -> use 1;
  //   rounding    2 * (16 u |gelu|) / (2h) with the forward bound above, |gelu(pre +- h)| <= 3 + h.
  const double h = std::ldexp(1.0, -20);
  const int64_t rows = 7, cols = 7;  // 49 points: j/8 for j = -24..24
  std::vector<double> pre(49), dy(49), dx(49), dbias(7);
  std::mt19937 rng(kSeed);
  std::uniform_real_distribution<double> dist(-2, 2);
  for (int j = 0; j < 49; ++j) {
    pre[size_t(j)] = double(j - 24) / 8.0;
    dy[size_t(j)] = dist(rng);
  }
  bias_gelu_backward<double>(pre.data(), dy.data(), dx.data(), dbias.data(), rows, cols);

  const std::vector<double> zero_bias(49, 0.0);
  std::vector<double> plus(49), minus(49), scratch(49), y_plus(49), y_minus(49);
  for (int j = 0; j < 49; ++j) {
    plus[size_t(j)] = pre[size_t(j)] + h;
    minus[size_t(j)] = pre[size_t(j)] - h;
  }
  // Differentiate the forward kernel itself, so the test ties backward to forward.
  bias_gelu_forward<double>(plus.data(), zero_bias.data(), scratch.data(), y_plus.data(), 49, 1);
  bias_gelu_forward<double>(minus.data(), zero_bias.data(), scratch.data(), y_minus.data(), 49, 1);
  const double u = kUnitRoundoff<double>;
  for (int j = 0; j < 49; ++j) {
    const double derivative = (y_plus[size_t(j)] - y_minus[size_t(j)]) / (2 * h);
    const double magnitude = std::abs(pre[size_t(j)]) + h;
    const double tolerance = std::abs(dy[size_t(j)]) * (h * h / 6 + 2 * 16 * u * magnitude / (2 * h));
    EXPECT_NEAR(dx[size_t(j)], dy[size_t(j)] * derivative, tolerance) << "pre = " << pre[size_t(j)];
  }
  // dbias = column sums of dx: 7 terms, any order, error <= 7 u sum|dx|.
  for (int64_t c = 0; c < cols; ++c) {
    double sum = 0, magnitude = 0;
    for (int64_t r = 0; r < rows; ++r) {
      sum += dx[size_t(r * cols + c)];
      magnitude += std::abs(dx[size_t(r * cols + c)]);
    }
    EXPECT_NEAR(dbias[size_t(c)], sum, double(rows) * u * magnitude) << "column " << c;
  }
}

TEST(BiasGelu, FloatBackwardMatchesDouble) {
  // Same pre (exact in float) through both instantiations. gelu' = Phi + x phi cancels near
  // x = -0.75 (a zero of gelu'), so the bound is on the terms, not the result:
  // |err| <= 18 u_f |dy| (Phi(x) + |x| phi(x)) from the float budget (FloatForwardWithinBudget-
  // OverItsRange): Phi within 16 u (17 u less the product by x); x phi = x (e / sqrt(2 pi)) within
  // 2.7 u (e) + 1 (the constant) + 2 (two products); the sum and the product by dy 1 u each. The
  // double side is within 20 u_d (erfc's condition number <= 17 at x = -4, plus 3 roundings).
  const int64_t rows = 33, cols = 5;  // odd, and 33 rows so dbias sums more than a handful
  std::mt19937 rng(kSeed);
  const auto pre_f = random_values<float>(size_t(rows * cols), rng, -4, 4);
  const auto dy_f = random_values<float>(size_t(rows * cols), rng, -1, 1);
  std::vector<double> pre_d(pre_f.begin(), pre_f.end()), dy_d(dy_f.begin(), dy_f.end());
  std::vector<float> dx_f(pre_f.size()), dbias_f(static_cast<size_t>(cols));
  std::vector<double> dx_d(pre_f.size()), dbias_d(static_cast<size_t>(cols));
  bias_gelu_backward<float>(pre_f.data(), dy_f.data(), dx_f.data(), dbias_f.data(), rows, cols);
  bias_gelu_backward<double>(pre_d.data(), dy_d.data(), dx_d.data(), dbias_d.data(), rows, cols);
  const double u = kUnitRoundoff<float>;
  std::vector<double> column_bound(size_t(cols), 0.0);
  for (size_t i = 0; i < pre_f.size(); ++i) {
    const double x = pre_d[i];
    const double phi = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
    const double terms = 0.5 * std::erfc(-x / std::numbers::sqrt2) + std::abs(x) * phi;
    const double bound = 18 * u * std::abs(dy_d[i]) * terms + 20 * kUnitRoundoff<double> * std::abs(dx_d[i]);
    EXPECT_NEAR(static_cast<double>(dx_f[i]), dx_d[i], bound) << "pre = " << x;
    column_bound[i % size_t(cols)] += bound + u * std::abs(dx_d[i]);
  }
  // dbias: each summand off by its bound; the sum (in any order, float or wider) adds rows u per term.
  for (size_t c = 0; c < size_t(cols); ++c) {
    double magnitude = 0;
    for (int64_t r = 0; r < rows; ++r) magnitude += std::abs(dx_d[size_t(r) * size_t(cols) + c]);
    EXPECT_NEAR(static_cast<double>(dbias_f[c]), dbias_d[c], column_bound[c] + double(rows) * u * magnitude);
  }
}

// The float GeLU's own erf (kernels/cpu/cpu_kernels.cpp) against the library's, in long double:
// Phi = 0.5 erfc(-x / sqrt 2), erf's complement, which keeps its digits in the lower tail where
// 1 + erf cancels (at x = -9 the erf form would keep none of a long double's).
long double normal_cdf_reference(long double x) { return 0.5L * std::erfc(-x / std::sqrt(2.0L)); }
long double normal_pdf_reference(long double x) {
  return std::exp(-0.5L * x * x) / std::sqrt(2.0L * std::numbers::pi_v<long double>);
}

TEST(BiasGelu, FloatForwardWithinBudgetOverItsRange) {
  // Every 1021st float (a prime stride: every exponent, varied mantissas) in [0, 12.75] and its
  // negative: 2.1 M points through forward (gelu) and backward (gelu', dy = 1). Budget of the
  // relative error of x Phi(x), u = 2^-24:
  //   |x| <= 0.75: C's fit 0.6 + Horner 1.3 + the product x C 1, so x C within 3 u; 1/2 + x C
  //     rounds once and cancels by at most 0.5 / Phi(-0.75) = 2.2: 0.273 * 3 / 0.2266 + 1 = 4.6 u;
  //   |x| > 0.75: Phi(-|x|) = e (1 - q) G(q): G's fit 0.8 + Horner 3.2; q's three roundings (3 u)
  //     times the sensitivity of (1 - q) G to q, at most 2.0: 6 u; (1 - q), its product with G and
  //     with e: 3 u; e = exp(-x^2/2) with x^2 split exactly: reduction 0.7 + fit 0.3 + roundings
  //     1.7 = 2.7 u; 1 - Phi(-x) for x > 0 only shrinks it (Phi(-x) <= 0.23). Sum 15.7 u;
  //   the product x Phi: 1 u. Bound 17 u; a result below FLT_MIN also rounds absolutely, by at
  //   most half of 2^-149.
  // gelu' = Phi + x phi: 18 u (Phi + |x| phi), derived in FloatBackwardMatchesDouble.
  const uint32_t last = std::bit_cast<uint32_t>(12.75f);
  std::vector<float> x;
  for (uint32_t bits = 0; bits <= last; bits += 1021) {
    x.push_back(std::bit_cast<float>(bits));
    x.push_back(-std::bit_cast<float>(bits));
  }
  const auto n = static_cast<int64_t>(x.size());
  const std::vector<float> zero_bias = {0.0f}, dy(x.size(), 1.0f);
  std::vector<float> pre(x.size()), y(x.size()), dx(x.size()), dbias(1);
  bias_gelu_forward<float>(x.data(), zero_bias.data(), pre.data(), y.data(), n, 1);
  bias_gelu_backward<float>(x.data(), dy.data(), dx.data(), dbias.data(), n, 1);
  const long double u = kUnitRoundoff<float>, half_subnormal = std::ldexp(1.0L, -150);
  long double worst_forward = 0, worst_backward = 0;  // in u, for the record
  for (size_t i = 0; i < x.size(); ++i) {
    const long double xi = x[i], cdf = normal_cdf_reference(xi), pdf = normal_pdf_reference(xi);
    const long double gelu = xi * cdf, derivative = cdf + xi * pdf, terms = cdf + std::fabs(xi) * pdf;
    const long double forward_error = std::fabs(y[i] - gelu), backward_error = std::fabs(dx[i] - derivative);
    ASSERT_LE(forward_error, 17 * u * std::fabs(gelu) + half_subnormal) << "gelu at x = " << x[i];
    ASSERT_LE(backward_error, 18 * u * terms) << "gelu' at x = " << x[i];
    if (std::fabs(gelu) >= std::numeric_limits<float>::min()) {
      worst_forward = std::max(worst_forward, forward_error / (u * std::fabs(gelu)));
    }
    worst_backward = std::max(worst_backward, backward_error / (u * terms));
  }
  RecordProperty("max_forward_error_u", std::to_string(static_cast<double>(worst_forward)));
  RecordProperty("max_backward_error_u", std::to_string(static_cast<double>(worst_backward)));
}

TEST(BiasGelu, FloatBeyondItsRangeIsIdentityOrZero) {
  // Past |x| = 12.75 the float GeLU returns x (x > 0) or 0 (x < 0), and gelu' 1 or 0: the true
  // values differ from those by at most 12.75 Phi(-12.75) = 2.0e-36 (gelu) and 12.75 phi(12.75)
  // = 2.6e-35 (gelu'). Infinities: gelu(inf) = inf; -inf times Phi = 0 is NaN, as x times the
  // erfc-based Phi always gave. NaN stays NaN in both passes.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {std::nextafter(12.75f, inf), 13.0f, 100.0f, 3e38f, inf,
                                std::nextafter(-12.75f, -inf), -13.0f, -100.0f, -3e38f, -inf, nan};
  const auto n = static_cast<int64_t>(x.size());
  const std::vector<float> zero_bias = {0.0f}, dy(x.size(), 1.0f);
  std::vector<float> pre(x.size()), y(x.size()), dx(x.size()), dbias(1);
  bias_gelu_forward<float>(x.data(), zero_bias.data(), pre.data(), y.data(), n, 1);
  bias_gelu_backward<float>(x.data(), dy.data(), dx.data(), dbias.data(), n, 1);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(y[i], x[i]) << x[i];
    EXPECT_EQ(dx[i], 1.0f) << x[i];
  }
  EXPECT_EQ(y[4], inf);
  for (size_t i = 5; i < 9; ++i) {
    EXPECT_EQ(y[i], 0.0f) << x[i];
    EXPECT_EQ(dx[i], 0.0f) << x[i];
  }
  EXPECT_TRUE(std::isnan(y[9]));
  EXPECT_TRUE(std::isnan(y[10]));
  EXPECT_TRUE(std::isnan(dx[10]));
}

TEST(BiasGelu, FloatValueDoesNotDependOnItsPosition) {
  // A vectorized loop runs most elements in its vector body and the last few in a remainder; both
  // must compute the same function, or a strategy that splits the batch (or the row) differently
  // from the reference sees other bits (the equivalence suite's bit_exact checks). 67 values (odd,
  // past every vector width) through one call, and each one alone in a call of its own.
  std::mt19937 rng(kSeed);
  const auto x = random_values<float>(67, rng, -14, 14);
  const auto dy = random_values<float>(67, rng, -1, 1);
  const std::vector<float> zero_bias(67, 0.0f);
  std::vector<float> pre(67), y(67), dx(67), dbias(67);
  bias_gelu_forward<float>(x.data(), zero_bias.data(), pre.data(), y.data(), 1, 67);
  bias_gelu_backward<float>(x.data(), dy.data(), dx.data(), dbias.data(), 1, 67);
  for (size_t i = 0; i < 67; ++i) {
    float pre1 = 0, y1 = 0, dx1 = 0, dbias1 = 0;
    bias_gelu_forward<float>(&x[i], zero_bias.data(), &pre1, &y1, 1, 1);
    bias_gelu_backward<float>(&x[i], &dy[i], &dx1, &dbias1, 1, 1);
    EXPECT_EQ(std::bit_cast<uint32_t>(y1), std::bit_cast<uint32_t>(y[i])) << "x = " << x[i];
    EXPECT_EQ(std::bit_cast<uint32_t>(dx1), std::bit_cast<uint32_t>(dx[i])) << "x = " << x[i];
  }
}

TEST(BiasGelu, NoRowsZeroesDbias) {
  std::vector<float> dbias = {1, 2, 3};  // the sum over no rows is 0, and dbias is overwritten
  bias_gelu_backward<float>(nullptr, nullptr, nullptr, dbias.data(), 0, 3);
  for (float d : dbias) EXPECT_EQ(d, 0.0f);
}

// ---------------------------------------------------------------------------------------------
// softmax cross-entropy

template <class T>
class SoftmaxTest : public testing::Test {};
TYPED_TEST_SUITE(SoftmaxTest, FloatTypes);

TYPED_TEST(SoftmaxTest, UniformLogitsGiveLogClasses) {
  using T = TypeParam;
  // Equal logits: softmax = 1/C for every label, so loss = log C and dlogits = (1/C - [c == y]) / rows.
  const int64_t rows = 3, classes = 7;
  const std::vector<T> logits(size_t(rows * classes), T(3.25));  // any value; 3.25 is exact
  const std::vector<int32_t> labels = {0, 6, 3};
  std::vector<T> dlogits(logits.size());
  const double loss = softmax_cross_entropy<T>(logits.data(), labels.data(), dlogits.data(), rows, classes);
  // exp(0) = 1 exactly so the sum is exactly C; log is within 1 ulp, then a rows-term mean:
  // (rows + 2) u log C.
  EXPECT_NEAR(loss, std::log(7.0), double(rows + 2) * kUnitRoundoff<double> * std::log(7.0));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < classes; ++c) {
      const double expected = (1.0 / 7 - (c == labels[size_t(r)] ? 1.0 : 0.0)) / 3;
      // At most 5 roundings (1/rows, divide by the sum, subtract 1, scale, convert to T): 5 u.
      EXPECT_NEAR(static_cast<double>(dlogits[size_t(r * classes + c)]), expected,
                  5 * kUnitRoundoff<T> * std::abs(expected));
    }
  }
}

TYPED_TEST(SoftmaxTest, GradientRowsSumToZero) {
  using T = TypeParam;
  // sum_c (p_c - [c == y]) / rows = (sum p - 1) / rows = 0. Each term carries <= 5 u relative error
  // and sum|terms| <= 2/rows; summing C terms adds C u: bound (C + 5) u * 2 / rows.
  const int64_t rows = 5, classes = 33;
  std::mt19937 rng(kSeed);
  const auto logits = random_values<T>(size_t(rows * classes), rng, -8, 8);
  const std::vector<int32_t> labels = {0, 32, 5, 17, 5};
  std::vector<T> dlogits(logits.size());
  softmax_cross_entropy<T>(logits.data(), labels.data(), dlogits.data(), rows, classes);
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += static_cast<double>(dlogits[size_t(r * classes + c)]);
    EXPECT_NEAR(sum, 0.0, double(classes + 5) * kUnitRoundoff<T> * 2.0 / double(rows)) << "row " << r;
  }
}

TYPED_TEST(SoftmaxTest, LargeLogitsStayFinite) {
  using T = TypeParam;
  // exp(1000) overflows both types; the max-subtracted form never forms it.
  // Row 0: {1000, 1000, -1000}, label 0: p = {1/2, 1/2, e^-2000 = 0}, loss = log 2.
  // Row 1: {1000, 0, 0}, label 1: loss = 1000 + log(1 + 2 e^-1000) = 1000 (to double precision).
  const std::vector<T> logits = {1000, 1000, -1000, 1000, 0, 0};
  const std::vector<int32_t> labels = {0, 1};
  std::vector<T> dlogits(6);
  const double loss = softmax_cross_entropy<T>(logits.data(), labels.data(), dlogits.data(), 2, 3);
  ASSERT_TRUE(std::isfinite(loss));
  const double expected = (std::log(2.0) + 1000.0) / 2;
  EXPECT_NEAR(loss, expected, 4 * kUnitRoundoff<double> * expected);  // a few double roundings
  for (T g : dlogits) EXPECT_TRUE(std::isfinite(static_cast<double>(g)));
  // (p - onehot)/rows with p exactly 1/2, 1/2, 0 and 1, 0, 0: all exact in binary.
  const double expected_grad[] = {-0.25, 0.25, 0, 0.5, -0.5, 0};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(static_cast<double>(dlogits[size_t(i)]), expected_grad[i]) << i;
}

TEST(Softmax, GradientMatchesFiniteDifferencesInDouble) {
  // Logits on a 1/16 grid in [-4, 4] and h = 2^-20: logits +- h are exact. Error of the central
  // difference of L (the mean loss):
  //   truncation  h^2/6 max|d^3 L / dl^3| = h^2/6 * max|p(1-p)(1-2p)| / rows <= h^2/6 * 0.1 / rows;
  //   rounding    2 e_L / (2h), e_L <= (C + rows + 4) u (|L| + 1): C terms in each exp-sum,
  //               rows in the mean, a few for log, max subtraction and the label term.
  const int64_t rows = 3, classes = 5;
  std::mt19937 rng(kSeed);
  std::uniform_int_distribution<int> grid(-64, 64);
  std::vector<double> logits(size_t(rows * classes));
  for (auto& l : logits) l = grid(rng) / 16.0;
  const std::vector<int32_t> labels = {4, 0, 2};
  std::vector<double> dlogits(logits.size()), scratch(logits.size());
  const double loss = softmax_cross_entropy<double>(logits.data(), labels.data(), dlogits.data(), rows, classes);
  const double h = std::ldexp(1.0, -20), u = kUnitRoundoff<double>;
  const double e_loss = double(classes + rows + 4) * u * (std::abs(loss) + 1);
  const double tolerance = h * h / 6 * 0.1 / double(rows) + e_loss / h;
  for (size_t i = 0; i < logits.size(); ++i) {
    auto shifted = logits;
    shifted[i] = logits[i] + h;
    const double up = softmax_cross_entropy<double>(shifted.data(), labels.data(), scratch.data(), rows, classes);
    shifted[i] = logits[i] - h;
    const double down = softmax_cross_entropy<double>(shifted.data(), labels.data(), scratch.data(), rows, classes);
    EXPECT_NEAR(dlogits[i], (up - down) / (2 * h), tolerance) << "logit " << i;
  }
}

TEST(Softmax, FloatMatchesLongDouble) {
  // Float's exp is the kernels' own (cpu_kernels.cpp): reduction 0.7 u + fit 0.3 u + roundings
  // 1.7 u, within 3 u relative, flushed to 0 below exp(-87). Logits on a 1/16 grid in [-120, 8]
  // make every l - max exact (so only exp's error enters) and put some l - max below -87, where
  // the true p < e^-87 = 1.7e-38 becomes 0. Then each e within 3 u, their double sum within 3 u
  // (relative: all terms positive), p = e / sum within 6 u plus the double roundings and the cast
  // to float (1 u); for the label (p - 1) is formed in double: |dlogit - ref| <= (7 u p + u |p -
  // [c == y]|) / rows + 1.7e-38 / rows <= 8 u (p + [c == y]) / rows + 1.7e-38 / rows. The loss
  // is (max - l_y) + log(sum) in double: log(sum)'s error is the sum's relative error, 3 u.
  const int64_t rows = 7, classes = 37;  // odd row length: a vector body and a remainder per row
  std::mt19937 rng(kSeed);
  std::uniform_int_distribution<int> grid(-120 * 16, 8 * 16);
  std::vector<float> logits(size_t(rows * classes));
  for (auto& l : logits) l = static_cast<float>(grid(rng)) / 16;
  const std::vector<int32_t> labels = {0, 36, 5, 17, 5, 20, 1};
  std::vector<float> dlogits(logits.size());
  const double loss = softmax_cross_entropy<float>(logits.data(), labels.data(), dlogits.data(), rows, classes);
  const long double u = kUnitRoundoff<float>, flushed = 1.7e-38L;
  long double loss_ref = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * classes;
    const long double max = *std::max_element(row, row + classes);
    long double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<long double>(row[c]) - max);
    const int32_t y = labels[size_t(r)];
    loss_ref += (max - row[y] + std::log(sum)) / rows;
    for (int64_t c = 0; c < classes; ++c) {
      const long double p = std::exp(static_cast<long double>(row[c]) - max) / sum, hot = c == y ? 1 : 0;
      const long double ref = (p - hot) / rows;
      EXPECT_LE(std::fabs(dlogits[size_t(r * classes + c)] - ref), (8 * u * (p + hot) + flushed) / rows)
          << "row " << r << " class " << c;
    }
  }
  EXPECT_LE(std::fabs(loss - loss_ref), 4 * u);  // 3 u from log(sum), and the double mean's few ulp
}

TYPED_TEST(SoftmaxTest, NanLogitMakesItsRowNan) {
  using T = TypeParam;
  // A NaN anywhere in a row (first, where it becomes the max, or later) makes the row's loss and
  // every gradient of the row NaN, so a corrupted logit cannot pass for a number; the other row
  // stays finite. (Float's own exp must also keep NaN away from its float-to-int conversion.)
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> logits = {nan, 1, 2, 1, nan, 2, 1, 2, 3};
  const std::vector<int32_t> labels = {0, 1, 2};
  std::vector<T> dlogits(logits.size());
  const double loss = softmax_cross_entropy<T>(logits.data(), labels.data(), dlogits.data(), 2, 3);
  EXPECT_TRUE(std::isnan(loss));
  for (size_t i = 0; i < 6; ++i) EXPECT_TRUE(std::isnan(static_cast<double>(dlogits[i]))) << i;
  const double finite = softmax_cross_entropy<T>(logits.data() + 6, labels.data() + 2, dlogits.data() + 6, 1, 3);
  EXPECT_TRUE(std::isfinite(finite));
  for (size_t i = 6; i < 9; ++i) EXPECT_TRUE(std::isfinite(static_cast<double>(dlogits[i]))) << i;
}

TEST(Softmax, BadLabelThrowsAndLeavesOutputAlone) {
  const std::vector<float> logits = {1, 2, 3, 4};
  const std::vector<int32_t> labels = {0, 2};  // 2 is not in [0, 2)
  std::vector<float> dlogits(4, 7.0f);
  EXPECT_THROW(softmax_cross_entropy<float>(logits.data(), labels.data(), dlogits.data(), 2, 2), Error);
  for (float g : dlogits) EXPECT_EQ(g, 7.0f);
}

// ---------------------------------------------------------------------------------------------
// optimizers

template <class T>
class OptimizerTest : public testing::Test {};
TYPED_TEST_SUITE(OptimizerTest, FloatTypes);

TYPED_TEST(OptimizerTest, SgdMomentumTwoStepsByHand) {
  using T = TypeParam;
  const SgdMomentum opt{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01};
  std::vector<T> p = {1, -2}, v = {0, 0};
  const std::vector<T> grad = {T(0.5), T(0.25)};
  // Element 0, by hand:
  //   step 1: g = 0.5 + 0.01*1 = 0.51;        v = 0.51;                   p = 1 - 0.051 = 0.949
  //   step 2: g = 0.5 + 0.01*0.949 = 0.50949; v = 0.9*0.51 + 0.50949 = 0.96849; p = 0.949 - 0.096849 = 0.852151
  // Element 1:
  //   step 1: g = 0.25 - 0.02 = 0.23;         v = 0.23;                   p = -2 - 0.023 = -2.023
  //   step 2: g = 0.25 - 0.02023 = 0.22977;   v = 0.207 + 0.22977 = 0.43677; p = -2.023 - 0.043677 = -2.066677
  sgd_momentum_step<T>(p.data(), grad.data(), v.data(), 2, opt);
  sgd_momentum_step<T>(p.data(), grad.data(), v.data(), 2, opt);
  // ~5 roundings a step (lr, momentum, decay are themselves rounded to T), values of size <= 2.1:
  // 2 steps * 8 u * 2.1, with room.
  const double tolerance = 2 * 8 * kUnitRoundoff<T> * 2.1;
  EXPECT_NEAR(static_cast<double>(p[0]), 0.852151, tolerance);
  EXPECT_NEAR(static_cast<double>(v[0]), 0.96849, tolerance);
  EXPECT_NEAR(static_cast<double>(p[1]), -2.066677, tolerance);
  EXPECT_NEAR(static_cast<double>(v[1]), 0.43677, tolerance);
}

TYPED_TEST(OptimizerTest, AdamWFirstStepIsSignedLr) {
  using T = TypeParam;
  // Step 1: m_hat = g and v_hat = g^2 exactly (bias correction), so the update is
  // lr g / (|g| + eps) = lr sign(g) (1 - eps/|g| + ...), whatever |g|; plus the decay lr wd p.
  const AdamW opt{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1};
  std::vector<T> p = {1, -3, T(0.5), 2}, m(4, 0), v(4, 0);
  const std::vector<T> grad = {T(1e-3), T(-7), T(250), T(-0.125)};  // 5 decades of |g|
  const auto p0 = p;
  adamw_step<T>(p.data(), grad.data(), m.data(), v.data(), 4, opt, 1);
  for (size_t i = 0; i < 4; ++i) {
    const double g = static_cast<double>(grad[i]), before = static_cast<double>(p0[i]);
    const double expected = before * (1 - opt.lr * opt.weight_decay) - opt.lr * (g > 0 ? 1 : -1);
    // eps/|g| <= 1e-5 relative on the lr step, plus ~8 roundings on |p| + lr.
    const double tolerance = opt.lr * opt.eps / std::abs(g) + 8 * kUnitRoundoff<T> * (std::abs(before) + opt.lr);
    EXPECT_NEAR(static_cast<double>(p[i]), expected, tolerance) << i;
  }
}

TYPED_TEST(OptimizerTest, AdamWThreeStepsMatchHandComputation) {
  using T = TypeParam;
  const AdamW opt{.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
  // Gradients change sign and size across steps so m and v disagree and bias correction matters.
  const std::vector<std::vector<T>> grads = {{T(0.3), T(-2), T(1e-4)}, {T(-0.2), T(-1), T(2e-4)}, {T(0.5), T(3), T(-1e-4)}};
  std::vector<T> p = {T(0.75), T(-1.5), T(2)}, m(3, 0), v(3, 0);
  // The same recurrences as kernels.h, in long double, with the bound accumulated as we go:
  // per step the decay is 2 roundings on |p| and the update ~10 on |update|.
  std::vector<long double> p_ref(p.begin(), p.end()), m_ref(3, 0), v_ref(3, 0);
  std::vector<double> bound(3, 0.0);
  const double u = kUnitRoundoff<T>;
  for (int64_t step = 1; step <= 3; ++step) {
    adamw_step<T>(p.data(), grads[size_t(step - 1)].data(), m.data(), v.data(), 3, opt, step);
    for (size_t i = 0; i < 3; ++i) {
      const long double g = grads[size_t(step - 1)][i];
      p_ref[i] -= static_cast<long double>(opt.lr * opt.weight_decay) * p_ref[i];
      m_ref[i] = opt.beta1 * m_ref[i] + (1 - static_cast<long double>(opt.beta1)) * g;
      v_ref[i] = opt.beta2 * v_ref[i] + (1 - static_cast<long double>(opt.beta2)) * g * g;
      const long double m_hat = m_ref[i] / (1 - std::pow(static_cast<long double>(opt.beta1), step));
      const long double v_hat = v_ref[i] / (1 - std::pow(static_cast<long double>(opt.beta2), step));
      const long double update = opt.lr * m_hat / (std::sqrt(v_hat) + opt.eps);
      p_ref[i] -= update;
      bound[i] += 2 * u * std::abs(static_cast<double>(p_ref[i])) + 10 * u * std::abs(static_cast<double>(update));
    }
  }
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(static_cast<double>(p[i]), static_cast<double>(p_ref[i]), bound[i]) << i;
}

TYPED_TEST(OptimizerTest, ElementsDoNotDependOnTheirPosition) {
  using T = TypeParam;
  // The optimizer loops are vectorized (a vector body and a remainder, built per x86-64 width):
  // one call over 67 elements (odd, past every vector width) must give each element the bits
  // that a call over that element alone gives, or shards of different sizes (ZeRO) would update
  // replicated values differently.
  std::mt19937 rng(kSeed);
  const auto p0 = random_values<T>(67, rng), grad = random_values<T>(67, rng), state0 = random_values<T>(67, rng, 0, 1);
  const SgdMomentum sgd{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4};
  const AdamW adamw;
  std::vector<T> p_sgd = p0, velocity = state0, p_adamw = p0, m = state0, v = state0;
  sgd_momentum_step<T>(p_sgd.data(), grad.data(), velocity.data(), 67, sgd);
  adamw_step<T>(p_adamw.data(), grad.data(), m.data(), v.data(), 67, adamw, 3);
  for (size_t i = 0; i < 67; ++i) {
    T p1 = p0[i], velocity1 = state0[i], p2 = p0[i], m1 = state0[i], v1 = state0[i];
    sgd_momentum_step<T>(&p1, &grad[i], &velocity1, 1, sgd);
    adamw_step<T>(&p2, &grad[i], &m1, &v1, 1, adamw, 3);
    EXPECT_EQ(std::memcmp(&p1, &p_sgd[i], sizeof(T)), 0) << i;
    EXPECT_EQ(std::memcmp(&velocity1, &velocity[i], sizeof(T)), 0) << i;
    EXPECT_EQ(std::memcmp(&p2, &p_adamw[i], sizeof(T)), 0) << i;
    EXPECT_EQ(std::memcmp(&m1, &m[i], sizeof(T)), 0) << i;
    EXPECT_EQ(std::memcmp(&v1, &v[i], sizeof(T)), 0) << i;
  }
}

TEST(Optimizer, AdamWRejectsStepZero) {
  std::vector<float> p(1), g(1), m(1), v(1);
  EXPECT_THROW(adamw_step<float>(p.data(), g.data(), m.data(), v.data(), 1, AdamW{}, 0), Error);
}

// ---------------------------------------------------------------------------------------------
// casts

bool is_nan_bits(uint16_t bits, int mantissa_bits) {
  const uint16_t exp_mask = uint16_t(0x7fff & ~((1 << mantissa_bits) - 1));
  return (bits & exp_mask) == exp_mask && (bits & ((1 << mantissa_bits) - 1)) != 0;
}

TEST(Casts, EveryNarrowValueRoundTrips) {
  // Each of the 65536 bf16 / f16 values is exactly a float, so narrow -> f32 -> narrow is the
  // identity; NaNs only have to stay NaN (a signalling NaN is quieted on the way, changing a bit).
  std::vector<uint16_t> all(65536), back(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = uint16_t(i);
  std::vector<float> wide(65536);
  struct Format {
    const char* name;
    int mantissa_bits;
    void (*to_f32)(const uint16_t*, float*, int64_t);
    void (*from_f32)(const float*, uint16_t*, int64_t);
    double (*decode)(uint16_t);
  };
  const Format formats[] = {{"bf16", 7, cast_bf16_to_f32, cast_f32_to_bf16, double_from_bf16_bits},
                            {"f16", 10, cast_f16_to_f32, cast_f32_to_f16, double_from_f16_bits}};
  for (const Format& f : formats) {
    f.to_f32(all.data(), wide.data(), 65536);
    f.from_f32(wide.data(), back.data(), 65536);
    for (uint32_t i = 0; i < 65536; ++i) {
      if (is_nan_bits(all[i], f.mantissa_bits)) {
        ASSERT_TRUE(std::isnan(wide[i])) << f.name << " " << i;
        ASSERT_TRUE(is_nan_bits(back[i], f.mantissa_bits)) << f.name << " " << i;
        continue;
      }
      ASSERT_EQ(static_cast<double>(wide[i]), f.decode(all[i])) << f.name << " widening of " << i;
      ASSERT_EQ(back[i], all[i]) << f.name << " round trip of " << i;
    }
  }
}

TEST(Casts, TiesRoundToEven) {
  // bf16 keeps 7 mantissa bits: at 1 its ulp is 2^-7, so 1 + 2^-8 is a tie between 1 (even,
  // 0x3f80) and 1 + 2^-7 (odd, 0x3f81) -> 0x3f80; 1 + 3*2^-8 ties 0x3f81 (odd) and 0x3f82 -> 0x3f82.
  // One float bit above a tie rounds up. FLT_MAX is above bf16's largest finite + half ulp -> inf.
  const std::vector<float> bf16_in = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-23f,
                                      -(1.0f + 0x1p-8f), std::numeric_limits<float>::max()};
  const std::vector<uint16_t> bf16_expected = {0x3f80, 0x3f82, 0x3f81, 0xbf80, 0x7f80};
  std::vector<uint16_t> out(bf16_in.size());
  cast_f32_to_bf16(bf16_in.data(), out.data(), int64_t(bf16_in.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i], bf16_expected[i]) << i;
    EXPECT_EQ(out[i], bf16_bits_from_double(bf16_in[i])) << i;  // and agrees with core/half
  }
  // f16 keeps 10 bits: same pattern at 2^-11 / 2^-10. 65520 = 65504 + 16 is the tie between the
  // largest finite (0x7bff, odd) and the next power of two, which is inf (0x7c00); 65519 stays finite.
  const std::vector<float> f16_in = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-11f + 0x1p-23f, 65520.0f,
                                     65519.0f};
  const std::vector<uint16_t> f16_expected = {0x3c00, 0x3c02, 0x3c01, 0x7c00, 0x7bff};
  out.resize(f16_in.size());
  cast_f32_to_f16(f16_in.data(), out.data(), int64_t(f16_in.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i], f16_expected[i]) << i;
    EXPECT_EQ(out[i], f16_bits_from_double(f16_in[i])) << i;
  }
}

TEST(Casts, RandomFloatBitsAgreeWithCoreHalf) {
  // Random 32-bit patterns cover every exponent (subnormal, overflow, NaN) and every low-bit pattern.
  std::mt19937 rng(kSeed);
  std::vector<float> in(1 << 16);
  for (auto& x : in) x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
  std::vector<uint16_t> bf16(in.size()), f16(in.size());
  cast_f32_to_bf16(in.data(), bf16.data(), int64_t(in.size()));
  cast_f32_to_f16(in.data(), f16.data(), int64_t(in.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(bf16[i], bf16_bits_from_double(in[i])) << i;
    ASSERT_EQ(f16[i], f16_bits_from_double(in[i])) << i;
  }
}

TEST(Casts, EveryFloatWithLowByteZeroAgreesWithCoreHalf) {
  // All 2^24 floats whose low 8 bits are 0: every sign, exponent and top-16 mantissa pattern, so
  // every bf16 and f16 rounding case (ties: bit 15 or bit 12 set with nothing below it), f16's
  // subnormal and overflow boundaries, infinities and NaNs, against core/half's rounding of the
  // exact value. round_to_bf16 must equal the two casts, bit for bit.
  const size_t count = size_t{1} << 24;
  std::vector<float> in(count);
  for (size_t i = 0; i < count; ++i) in[i] = std::bit_cast<float>(static_cast<uint32_t>(i << 8));
  std::vector<uint16_t> bf16(count), f16(count);
  cast_f32_to_bf16(in.data(), bf16.data(), int64_t(count));
  cast_f32_to_f16(in.data(), f16.data(), int64_t(count));
  std::vector<float> rounded = in;
  round_to_bf16(rounded.data(), int64_t(count));
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(bf16[i], bf16_bits_from_double(in[i])) << "bits " << std::hex << (i << 8);
    ASSERT_EQ(f16[i], f16_bits_from_double(in[i])) << "bits " << std::hex << (i << 8);
    ASSERT_EQ(std::bit_cast<uint32_t>(rounded[i]), uint32_t{bf16[i]} << 16) << "bits " << std::hex << (i << 8);
  }
}

TEST(Casts, RoundToBf16IsBothCastsOnRandomBits) {
  // Random 32-bit patterns reach the low 16 bits the test above keeps at zero (sticky bits of a
  // rounding): rounding in place equals cast_f32_to_bf16 then cast_bf16_to_f32, NaNs included.
  std::mt19937 rng(kSeed);
  std::vector<float> in(1 << 16);
  for (auto& x : in) x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
  std::vector<uint16_t> narrow(in.size());
  std::vector<float> widened(in.size()), rounded = in;
  cast_f32_to_bf16(in.data(), narrow.data(), int64_t(in.size()));
  cast_bf16_to_f32(narrow.data(), widened.data(), int64_t(in.size()));
  round_to_bf16(rounded.data(), int64_t(in.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(rounded[i]), std::bit_cast<uint32_t>(widened[i])) << i;
  }
  EXPECT_THROW(round_to_bf16(nullptr, -1), Error);
  EXPECT_NO_THROW(round_to_bf16(nullptr, 0));  // nothing to round, nothing read
}

TEST(Casts, F16WideningKeepsNanPayload) {
  // A NaN widens to a NaN with the same top payload bits (as F16C's vcvtph2ps, minus the quiet
  // bit it would set): 0x7c01 (signalling, payload 1) -> 0x7f802000; 0xfe00 -> 0xffc00000.
  const std::vector<uint16_t> in = {0x7c01, 0xfe00, 0x7c00, 0xfc00};
  std::vector<float> out(in.size());
  cast_f16_to_f32(in.data(), out.data(), int64_t(in.size()));
  EXPECT_EQ(std::bit_cast<uint32_t>(out[0]), 0x7f802000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(out[1]), 0xffc00000u);
  EXPECT_EQ(out[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[3], -std::numeric_limits<float>::infinity());
}

TEST(Casts, NegativeCountThrows) {
  EXPECT_THROW(cast_f32_to_bf16(nullptr, nullptr, -1), Error);
}

}  // namespace
}  // namespace dts::kernels::cpu

// The straggler's wait holds at least the time asked: it sleeps to 1 ms short of the end and
// yields for the rest, so the timer's slack cannot end it early (only late, which the straggler's
// measured slowdown reports). Nothing for 0, a negative or a NaN.
TEST(Delay, HoldsAtLeastTheTimeAsked) {
  using clock = std::chrono::steady_clock;
  for (const double seconds : {0.0, 5e-5, 0.0004, 0.003}) {
    const auto start = clock::now();
    dts::kernels::cpu::delay(seconds);
    EXPECT_GE(std::chrono::duration<double>(clock::now() - start).count(), seconds);
  }
  dts::kernels::cpu::delay(-1.0);
  dts::kernels::cpu::delay(std::nan(""));
}
