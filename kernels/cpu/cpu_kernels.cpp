// Host kernels of kernels/kernels.h: gemm through OpenBLAS's CBLAS, the elementwise and
// row-wise kernels as loops that the compiler vectorizes (float GeLU and the casts are written
// branch-free for that). The float and double instantiations are at the end.
#include "kernels/cpu/cpu_kernels.h"

#include <cblas.h>

#include <bit>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numbers>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/half.h"

namespace dts::kernels::cpu {

namespace {

[[noreturn]] void fail(const std::string& message) { throw Error(Error::Kind::invalid_argument, message); }

// The message is a string literal; checks whose message needs numbers call fail() inside an if,
// so the string is only built on the failure path (the label check runs once per row).
void require(bool ok, const char* message) {
  if (!ok) fail(message);
}

void require_count(int64_t n, const char* kernel) {
  if (n < 0) fail(std::string(kernel) + ": negative element count " + std::to_string(n));
}

void require_pointer(const void* p, const char* kernel, const char* what) {
  if (p == nullptr) fail(std::string(kernel) + ": " + what + " is null");
}

// OpenBLAS starts one worker per core and spins them while a call runs. With several MPI ranks on
// one node (the usual test set-up on a 2-core shared machine) those workers oversubscribe the
// cores and every rank slows down many times over; one thread per rank is the right default.
// A user who sets OPENBLAS_NUM_THREADS has chosen, so that wins. A function-local static makes
// the set-up run once even when the first gemm calls race.
void limit_openblas_threads_once() {
  static const bool configured = [] {
    if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) openblas_set_num_threads(1);
    return true;
  }();
  (void)configured;
}

void check_blas_int(int64_t value, const char* what) {
  // Debian's OpenBLAS is built with 32-bit blasint (USE_64BITINT empty).
  if (value > INT_MAX) {
    throw Error(Error::Kind::unsupported,
                std::string("gemm: ") + what + " = " + std::to_string(value) + " exceeds OpenBLAS's 32-bit int");
  }
}

void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha, const double* a,
               int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// ---- GeLU's normal CDF and density.
//
// double: the library's erfc and exp (the f64 reference; speed is not its point). float: the same
// functions as branch-free float arithmetic on its own exp, so the loops over them vectorize (GCC
// and Clang at -O3, any SIMD width; libm calls would keep them scalar at ~0.7 GB/s). Every lane
// runs the same operations, so a value's result never depends on its position in the loop, and
// no operation is contracted or reassociated (see kernels/CMakeLists.txt), so it is one function
// of its input on every x86-64 level and every compiler that honours IEEE arithmetic.
// Accuracy, u = 2^-24: gelu within 17 u relative and gelu' within 18 u of Phi + |x| phi for
// |x| <= 12.75, by the error budget in the kernel tests, which check it on 2 M floats against
// long double erfc (6.1 u and 4.4 u measured over every 7th float of the range); beyond, Phi is 0
// or 1 and the density 0 (Phi(-12.75) < 2e-37, so GeLU's error there is below 3e-36).

// Phi(x) = 0.5 erfc(-x / sqrt 2): the same value as 0.5 (1 + erf(x / sqrt 2)) but without the
// cancellation of 1 + erf for negative x (at x = -5 the erf form keeps only one float digit).
double normal_cdf(double x) { return 0.5 * std::erfc(-x * (std::numbers::sqrt2 / 2)); }
double normal_pdf(double x) {
  // 1 / sqrt(2 pi) = inv_sqrtpi / sqrt 2
  return (std::numbers::inv_sqrtpi / std::numbers::sqrt2) * std::exp(-0.5 * x * x);
}

// exp(hi + lo) for hi in [-87, 0] and |lo| <= 2^-10 |hi|, as if hi + lo were not rounded (GeLU
// passes -x^2/2 split exactly, so exp's result does not inherit x^2's rounding, 8 u at x = 4).
// Cody-Waite reduction: n = round(hi / ln 2) by the 1.5 * 2^23 trick (float adds round to
// nearest; no libm call), r = hi - n ln2_hi exactly (ln2_hi has 15 significant bits and n at most
// 7, so n ln2_hi is exact; hi and n ln2_hi are within a factor 2, so their difference is, by
// Sterbenz), then exp(r) = 1 + r + r^2 P(r) on |r| <= ln 2 / 2 (P: a degree-4 Chebyshev fit of
// (exp(r) - 1 - r) / r^2, relative error 2.3 u after rounding its coefficients to float, which r^2
// <= 0.12 shrinks), and 2^n from its exponent bits. The 1 + r form makes exp(0) exactly 1.
inline float exp_split(float hi, float lo) {
  constexpr float kLog2e = 0x1.715476p+0f, kRoundMagic = 0x1.8p+23f;
  constexpr float kLn2Hi = 0x1.62e4p-1f, kLn2Lo = 0x1.7f7d1cp-20f;  // ln 2 = hi + lo to 6e-14
  const float n = (hi * kLog2e + kRoundMagic) - kRoundMagic;
  const float r = ((hi - n * kLn2Hi) - n * kLn2Lo) + lo;
  const float p = 0x1.6d127p-10f;
  const float poly = (((p * r + 0x1.120cd4p-7f) * r + 0x1.555518p-5f) * r + 0x1.5554dcp-3f) * r + 0x1p-1f;
  const float exp_r = 1.0f + (r + (r * r) * poly);
  const auto two_to_n = std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
  return exp_r * two_to_n;
}

// exp(x) for x <= 0 or NaN (softmax's max-subtracted logits); results below FLT_MIN (x < -87)
// are flushed to 0, so nothing slows on subnormals and exp(-inf) is 0. NaN stays NaN, and never
// reaches exp_split's float-to-int conversion (undefined behaviour for NaN).
inline float exp_nonpositive(float x) {
  constexpr float kMin = -87.0f;  // exp(-87) = 1.6e-38 > FLT_MIN = 1.2e-38
  const float clamped = x >= kMin ? x : kMin;
  const float e = exp_split(clamped, 0.0f);
  return x >= kMin ? e : (x < kMin ? 0.0f : x);
}

// Phi(x) and e = exp(-x^2/2) for float, branch-free. |x| <= 0.75: Phi = 1/2 + x C(x^2), C a
// degree-4 fit of (Phi(x) - 1/2) / x (0.6 u); the sum cancels at most by (1/2) / Phi(-0.75) = 2.2.
// 0.75 < |x| <= 12.75: Phi(-|x|) = e R(|x|) with R = Phi(-a) exp(a^2/2) = (1 - q) G(q), q = (a - 3)
// / (a + 3) in [-0.6, 0.62] and G a degree-8 fit (0.8 u); Phi(x) = 1 - Phi(-x) for x > 0.
// |x| > 12.75: e = 0 and Phi = 0 or 1 (where exp(-x^2/2) would leave float's normal range).
struct NormalCdf {
  float cdf, exp_half_square;
};
inline NormalCdf normal_cdf_float(float x) {
  constexpr float kCenter = 0.75f, kLimit = 12.75f, kTailShift = 3.0f;
  const float a = std::fabs(x);
  const float ac = a < kLimit ? a : kLimit;  // NaN becomes kLimit; x * Phi stays NaN
  // a^2 = a_hi^2 + a_lo (a + a_hi) exactly: a_hi keeps 12 significant bits, so a_hi^2 is exact.
  const float a_hi = std::bit_cast<float>(std::bit_cast<uint32_t>(ac) & 0xfffff000u);
  const float a_lo = ac - a_hi;
  const float e_in_range = exp_split(-0.5f * (a_hi * a_hi), -0.5f * (a_lo * (ac + a_hi)));
  const float e = a > kLimit ? 0.0f : e_in_range;
  const float q = (ac - kTailShift) / (ac + kTailShift);
  float g = -0x1.05fa9cp-15f;
  g = g * q - 0x1.42a27ap-13f;
  g = g * q + 0x1.5f188cp-13f;
  g = g * q + 0x1.2f29eap-10f;
  g = g * q - 0x1.c8fe3ep-10f;
  g = g * q - 0x1.0219a4p-7f;
  g = g * q + 0x1.3a0cf8p-5f;
  g = g * q - 0x1.5bb43cp-4f;
  g = g * q + 0x1.f1b89cp-4f;
  const float lower_tail = e * ((1.0f - q) * g);  // Phi(-a)
  const float s = x * x;
  const float c = (((0x1.afe3cp-14f * s - 0x1.35acf8p-10f) * s + 0x1.46c63ap-7f) * s - 0x1.105822p-4f) * s +
                  0x1.988454p-2f;
  const float center = 0.5f + x * c;
  const float tail = x < 0.0f ? lower_tail : 1.0f - lower_tail;
  return {a <= kCenter ? center : tail, e};
}

// gelu(p) = p Phi(p) and gelu'(p) = Phi(p) + p phi(p) (kernels.h), one overload per type.
inline double gelu(double p) { return p * normal_cdf(p); }
inline double gelu_derivative(double p) { return normal_cdf(p) + p * normal_pdf(p); }
inline float gelu(float p) { return p * normal_cdf_float(p).cdf; }
inline float gelu_derivative(float p) {
  constexpr float kInvSqrt2Pi = 0x1.988454p-2f;  // 1 / sqrt(2 pi)
  const NormalCdf n = normal_cdf_float(p);
  return n.cdf + p * (kInvSqrt2Pi * n.exp_half_square);
}

inline double exp_nonpositive(double x) { return std::exp(x); }

// ---- f32 <-> bf16 / f16 on the bits, branch-free (vectorizing loops), each equal to core/half's
// conversion through double for every value that is not a NaN (the kernel tests check all 2^16
// narrow values and random f32 bit patterns). A NaN stays a NaN with its top payload bits;
// narrowing also sets the quiet bit, as core/half does, so a NaN cannot round into infinity.

// Round to nearest even on the 16 dropped bits: add 0x7fff plus the lowest kept bit, then drop.
// A carry into the exponent is the right result, up to infinity; f32 subnormals round the same way
// (bf16 shares f32's exponent range).
inline uint16_t bf16_bits(float value) {
  const auto bits = std::bit_cast<uint32_t>(value);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x40u;
  return static_cast<uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

inline uint16_t f16_bits(float value) {
  const auto bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  // Normal results: rebias the exponent from 127 to 15 (adding (15 - 127) << 23 modulo 2^32) and
  // round the 13 dropped mantissa bits to nearest even, as for bf16.
  const uint32_t normal = (magnitude + 0xc8000fffu + ((magnitude >> 13) & 1u)) >> 13;
  // |value| < 2^-14, f16's subnormals: in 0.5 + |value| the units of the last place are 2^-24,
  // f16's smallest subnormal, so the float add itself rounds |value| to nearest even in them.
  const uint32_t subnormal = std::bit_cast<uint32_t>(std::bit_cast<float>(magnitude) + 0.5f) - 0x3f000000u;
  uint32_t result = magnitude < 0x38800000u ? subnormal : normal;
  // 65520 = 65504 + half an ulp is a tie whose even neighbour is 2^16: infinity, as is all above.
  result = magnitude >= 0x477ff000u ? 0x7c00u : result;
  result = magnitude > 0x7f800000u ? 0x7e00u | ((magnitude >> 13) & 0x3ffu) : result;
  return static_cast<uint16_t>(sign | result);
}

inline float f32_from_f16_bits(uint16_t half) {
  const uint32_t h = half;
  const uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  const uint32_t normal = ((exponent + 112u) << 23) | (mantissa << 13);  // rebias 15 -> 127
  const uint32_t special = 0x7f800000u | (mantissa << 13);               // infinity, or NaN and its payload
  // Subnormal (and zero): mantissa * 2^-24, both exact in float.
  const auto subnormal = std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(mantissa)) * 0x1p-24f);
  const uint32_t magnitude = exponent == 0 ? subnormal : (exponent == 0x1fu ? special : normal);
  return std::bit_cast<float>(sign | magnitude);
}

// ---- The elementwise loops. Each float loop is built for three x86-64 vector widths (SSE2,
// AVX2, AVX-512: function multi-versioning, the widest the CPU runs is picked when the library
// loads); with no contraction and no reassociation (kernels/CMakeLists.txt) every build computes
// the same bits. Elsewhere, and for double, one portable build. The bodies are templates that
// always inline, so each clone vectorizes them at its own width (Clang clones no templates).
#if defined(__x86_64__) && defined(__ELF__) && (defined(__GNUC__) || defined(__clang__))
#define DTS_SIMD_CLONES __attribute__((target_clones("default", "avx2", "avx512f")))
#else
#define DTS_SIMD_CLONES
#endif

template <class T>
[[gnu::always_inline]] inline void gelu_forward_loop(const T* x, const T* bias, T* pre, T* y, int64_t rows,
                                                     int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * cols;
    for (int64_t j = 0; j < cols; ++j) {
      const T p = x[base + j] + bias[j];
      pre[base + j] = p;
      y[base + j] = gelu(p);
    }
  }
}

template <class T>
[[gnu::always_inline]] inline void gelu_backward_loop(const T* pre, const T* dy, T* dx, double* column_sum,
                                                      int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * cols;
    for (int64_t j = 0; j < cols; ++j) {
      const T g = dy[base + j] * gelu_derivative(pre[base + j]);
      dx[base + j] = g;
      column_sum[j] += static_cast<double>(g);
    }
  }
}

template <class T>
[[gnu::always_inline]] inline void sgd_loop(T* param, const T* grad, T* velocity, int64_t n, T lr, T momentum,
                                            T weight_decay) {
  for (int64_t i = 0; i < n; ++i) {
    const T g = grad[i] + weight_decay * param[i];
    const T v = momentum * velocity[i] + g;
    velocity[i] = v;
    param[i] -= lr * v;
  }
}

// AdamW's per-step scalars, in T (adamw_step derives them in double).
template <class T>
struct AdamWScalars {
  T step_size, inv_sqrt_bc2, decay, beta1, beta2, one_minus_beta1, one_minus_beta2, eps;
};

template <class T>
[[gnu::always_inline]] inline void adamw_loop(T* param, const T* grad, T* m, T* v, int64_t n,
                                              const AdamWScalars<T>& s) {
  for (int64_t i = 0; i < n; ++i) {
    const T g = grad[i];
    const T mi = s.beta1 * m[i] + s.one_minus_beta1 * g;
    const T vi = s.beta2 * v[i] + s.one_minus_beta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const T denom = std::sqrt(vi) * s.inv_sqrt_bc2 + s.eps;
    param[i] = param[i] * s.decay - s.step_size * mi / denom;
  }
}

// Each loop for float (cloned per width) and double (portable).
DTS_SIMD_CLONES void gelu_forward_simd(const float* x, const float* bias, float* pre, float* y, int64_t rows,
                                       int64_t cols) {
  gelu_forward_loop(x, bias, pre, y, rows, cols);
}
DTS_SIMD_CLONES void gelu_backward_simd(const float* pre, const float* dy, float* dx, double* column_sum,
                                        int64_t rows, int64_t cols) {
  gelu_backward_loop(pre, dy, dx, column_sum, rows, cols);
}
DTS_SIMD_CLONES void sgd_simd(float* param, const float* grad, float* velocity, int64_t n, float lr, float momentum,
                              float weight_decay) {
  sgd_loop(param, grad, velocity, n, lr, momentum, weight_decay);
}
DTS_SIMD_CLONES void adamw_simd(float* param, const float* grad, float* m, float* v, int64_t n,
                                const AdamWScalars<float>& s) {
  adamw_loop(param, grad, m, v, n, s);
}
// double: the portable build (its GeLU calls libm, which no width vectorizes).
void gelu_forward_simd(const double* x, const double* bias, double* pre, double* y, int64_t rows, int64_t cols) {
  gelu_forward_loop(x, bias, pre, y, rows, cols);
}
void gelu_backward_simd(const double* pre, const double* dy, double* dx, double* column_sum, int64_t rows,
                        int64_t cols) {
  gelu_backward_loop(pre, dy, dx, column_sum, rows, cols);
}
void sgd_simd(double* param, const double* grad, double* velocity, int64_t n, double lr, double momentum,
              double weight_decay) {
  sgd_loop(param, grad, velocity, n, lr, momentum, weight_decay);
}
void adamw_simd(double* param, const double* grad, double* m, double* v, int64_t n, const AdamWScalars<double>& s) {
  adamw_loop(param, grad, m, v, n, s);
}
// The casts (bf16 or f16) and rounding to bf16 in place.
DTS_SIMD_CLONES void narrow_simd(const float* in, uint16_t* out, int64_t n, bool bf16) {
  if (bf16) {
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_bits(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = f16_bits(in[i]);
  }
}
DTS_SIMD_CLONES void widen_simd(const uint16_t* in, float* out, int64_t n, bool bf16) {
  if (bf16) {
    for (int64_t i = 0; i < n; ++i) out[i] = float_from_bf16_bits(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = f32_from_f16_bits(in[i]);
  }
}
DTS_SIMD_CLONES void round_to_bf16_simd(float* values, int64_t n) {
  for (int64_t i = 0; i < n; ++i) values[i] = float_from_bf16_bits(bf16_bits(values[i]));
}

}  // namespace

template <class T>
void gemm(const GemmShape& s, T alpha, const T* a, const T* b, T beta, T* c) {
  if (s.m < 0 || s.n < 0 || s.k < 0) {
    fail("gemm: negative dimension (m=" + std::to_string(s.m) + ", n=" + std::to_string(s.n) + ", k=" +
         std::to_string(s.k) + ")");
  }
  // Row strides must cover a stored row: A is m x k (k x m when transposed), B is k x n (n x k).
  const int64_t a_cols = s.trans_a ? s.m : s.k;
  const int64_t b_cols = s.trans_b ? s.k : s.n;
  if (s.lda < a_cols) fail("gemm: lda " + std::to_string(s.lda) + " < " + std::to_string(a_cols));
  if (s.ldb < b_cols) fail("gemm: ldb " + std::to_string(s.ldb) + " < " + std::to_string(b_cols));
  if (s.ldc < s.n) fail("gemm: ldc " + std::to_string(s.ldc) + " < " + std::to_string(s.n));
  if (s.m == 0 || s.n == 0) return;
  require_pointer(c, "gemm", "C");
  if (s.k == 0) {
    // BLAS's rule for an empty product: C = beta * C, and beta == 0 overwrites (NaN in C included).
    // Done here because CBLAS rejects lda = 0, the natural stride of a k = 0 matrix.
    for (int64_t i = 0; i < s.m; ++i) {
      T* row = c + i * s.ldc;
      for (int64_t j = 0; j < s.n; ++j) row[j] = beta == T(0) ? T(0) : beta * row[j];
    }
    return;
  }
  require_pointer(a, "gemm", "A");
  require_pointer(b, "gemm", "B");
  check_blas_int(s.m, "m");
  check_blas_int(s.n, "n");
  check_blas_int(s.k, "k");
  check_blas_int(s.lda, "lda");
  check_blas_int(s.ldb, "ldb");
  check_blas_int(s.ldc, "ldc");
  limit_openblas_threads_once();
  blas_gemm(s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(s.m),
            static_cast<int>(s.n), static_cast<int>(s.k), alpha, a, static_cast<int>(s.lda), b,
            static_cast<int>(s.ldb), beta, c, static_cast<int>(s.ldc));
}

template <class T>
void bias_gelu_forward(const T* x, const T* bias, T* pre, T* y, int64_t rows, int64_t cols) {
  require(rows >= 0 && cols >= 0, "bias_gelu_forward: negative shape");
  if (rows == 0 || cols == 0) return;
  require_pointer(x, "bias_gelu_forward", "x");
  require_pointer(bias, "bias_gelu_forward", "bias");
  require_pointer(pre, "bias_gelu_forward", "pre");
  require_pointer(y, "bias_gelu_forward", "y");
  gelu_forward_simd(x, bias, pre, y, rows, cols);
}

template <class T>
void bias_gelu_backward(const T* pre, const T* dy, T* dx, T* dbias, int64_t rows, int64_t cols) {
  require(rows >= 0 && cols >= 0, "bias_gelu_backward: negative shape");
  if (cols == 0) return;
  require_pointer(dbias, "bias_gelu_backward", "dbias");
  // Column sums in double: a float running sum over thousands of rows loses digits per row.
  std::vector<double> column_sum(static_cast<size_t>(cols), 0.0);
  if (rows > 0) {
    require_pointer(pre, "bias_gelu_backward", "pre");
    require_pointer(dy, "bias_gelu_backward", "dy");
    require_pointer(dx, "bias_gelu_backward", "dx");
  }
  gelu_backward_simd(pre, dy, dx, column_sum.data(), rows, cols);
  for (int64_t j = 0; j < cols; ++j) dbias[j] = static_cast<T>(column_sum[static_cast<size_t>(j)]);
}

template <class T>
double softmax_cross_entropy(const T* logits, const int32_t* labels, T* dlogits, int64_t rows, int64_t classes) {
  require(rows >= 0 && classes >= 0, "softmax_cross_entropy: negative shape");
  // An empty batch adds nothing to a data-parallel sum of losses; the caller weights by rows.
  if (rows == 0) return 0.0;
  require(classes > 0, "softmax_cross_entropy: rows > 0 but no classes");
  require_pointer(logits, "softmax_cross_entropy", "logits");
  require_pointer(labels, "softmax_cross_entropy", "labels");
  require_pointer(dlogits, "softmax_cross_entropy", "dlogits");
  // Labels first, so a bad one leaves dlogits untouched.
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] < 0 || labels[r] >= classes) {
      fail("softmax_cross_entropy: label " + std::to_string(labels[r]) + " of row " + std::to_string(r) +
           " not in [0, " + std::to_string(classes) + ")");
    }
  }
  const double inv_rows = 1.0 / static_cast<double>(rows);
  double loss_sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = logits + r * classes;
    T* grad = dlogits + r * classes;
    T max = row[0];
    for (int64_t j = 1; j < classes; ++j) max = row[j] > max ? row[j] : max;
    // exp(l - max) <= 1, so nothing overflows whatever the logits' scale; the sum is in double,
    // in its own loop: an ordered sum does not vectorize, and the exps should.
    for (int64_t j = 0; j < classes; ++j) grad[j] = exp_nonpositive(row[j] - max);
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) sum += static_cast<double>(grad[j]);
    const int32_t label = labels[r];
    // logsumexp - l_label = (max - l_label) + log(sum), each term in double.
    loss_sum += static_cast<double>(max) - static_cast<double>(row[label]) + std::log(sum);
    const double scale = inv_rows / sum;
    for (int64_t j = 0; j < classes; ++j) grad[j] = static_cast<T>(static_cast<double>(grad[j]) * scale);
    // p - 1 formed in double: for a confident right answer p ~ 1 and the T subtraction would cancel.
    grad[label] = static_cast<T>((static_cast<double>(exp_nonpositive(row[label] - max)) / sum - 1.0) * inv_rows);
  }
  return loss_sum * inv_rows;
}

template <class T>
void sgd_momentum_step(T* param, const T* grad, T* velocity, int64_t n, const SgdMomentum& opt) {
  require_count(n, "sgd_momentum_step");
  if (n == 0) return;
  require_pointer(param, "sgd_momentum_step", "param");
  require_pointer(grad, "sgd_momentum_step", "grad");
  require_pointer(velocity, "sgd_momentum_step", "velocity");
  sgd_simd(param, grad, velocity, n, static_cast<T>(opt.lr), static_cast<T>(opt.momentum),
           static_cast<T>(opt.weight_decay));
}

template <class T>
void adamw_step(T* param, const T* grad, T* m, T* v, int64_t n, const AdamW& opt, int64_t step) {
  require_count(n, "adamw_step");
  if (step < 1) fail("adamw_step: step " + std::to_string(step) + " < 1 (bias correction divides by 1 - beta^step)");
  if (n == 0) return;
  require_pointer(param, "adamw_step", "param");
  require_pointer(grad, "adamw_step", "grad");
  require_pointer(m, "adamw_step", "m");
  require_pointer(v, "adamw_step", "v");
  // The per-step scalars in double, then once to T: beta2^t for large t needs the digits.
  const double bias_correction1 = 1.0 - std::pow(opt.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(opt.beta2, static_cast<double>(step));
  const AdamWScalars<T> scalars{.step_size = static_cast<T>(opt.lr / bias_correction1),
                                .inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(bias_correction2)),
                                .decay = static_cast<T>(1.0 - opt.lr * opt.weight_decay),  // p -= lr wd p at once
                                .beta1 = static_cast<T>(opt.beta1),
                                .beta2 = static_cast<T>(opt.beta2),
                                .one_minus_beta1 = static_cast<T>(1.0 - opt.beta1),
                                .one_minus_beta2 = static_cast<T>(1.0 - opt.beta2),
                                .eps = static_cast<T>(opt.eps)};
  adamw_simd(param, grad, m, v, n, scalars);
}

void cast_f32_to_bf16(const float* in, uint16_t* out, int64_t n) {
  require_count(n, "cast_f32_to_bf16");
  if (n == 0) return;
  require_pointer(in, "cast_f32_to_bf16", "in");
  require_pointer(out, "cast_f32_to_bf16", "out");
  narrow_simd(in, out, n, true);
}
void cast_bf16_to_f32(const uint16_t* in, float* out, int64_t n) {
  require_count(n, "cast_bf16_to_f32");
  if (n == 0) return;
  require_pointer(in, "cast_bf16_to_f32", "in");
  require_pointer(out, "cast_bf16_to_f32", "out");
  widen_simd(in, out, n, true);
}
void cast_f32_to_f16(const float* in, uint16_t* out, int64_t n) {
  require_count(n, "cast_f32_to_f16");
  if (n == 0) return;
  require_pointer(in, "cast_f32_to_f16", "in");
  require_pointer(out, "cast_f32_to_f16", "out");
  narrow_simd(in, out, n, false);
}
void round_to_bf16(float* values, int64_t n) {
  require_count(n, "round_to_bf16");
  if (n == 0) return;
  require_pointer(values, "round_to_bf16", "values");
  round_to_bf16_simd(values, n);
}

void delay(double seconds) {
  if (!(seconds > 0)) return;
  using clock = std::chrono::steady_clock;
  const auto end = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
  constexpr auto margin = std::chrono::milliseconds(1);
  std::this_thread::sleep_until(end - margin);  // returns at once when the end is nearer than that
  while (clock::now() < end) std::this_thread::yield();
}
void cast_f16_to_f32(const uint16_t* in, float* out, int64_t n) {
  require_count(n, "cast_f16_to_f32");
  if (n == 0) return;
  require_pointer(in, "cast_f16_to_f32", "in");
  require_pointer(out, "cast_f16_to_f32", "out");
  widen_simd(in, out, n, false);
}

#define DTS_INSTANTIATE_CPU_KERNELS(T)                                                                    \
  template void gemm<T>(const GemmShape&, T, const T*, const T*, T, T*);                                  \
  template void bias_gelu_forward<T>(const T*, const T*, T*, T*, int64_t, int64_t);                       \
  template void bias_gelu_backward<T>(const T*, const T*, T*, T*, int64_t, int64_t);                      \
  template double softmax_cross_entropy<T>(const T*, const int32_t*, T*, int64_t, int64_t);               \
  template void sgd_momentum_step<T>(T*, const T*, T*, int64_t, const SgdMomentum&);                      \
  template void adamw_step<T>(T*, const T*, T*, T*, int64_t, const AdamW&, int64_t);
DTS_INSTANTIATE_CPU_KERNELS(float)
DTS_INSTANTIATE_CPU_KERNELS(double)
#undef DTS_INSTANTIATE_CPU_KERNELS

}  // namespace dts::kernels::cpu
