// Host kernels of kernels/kernels.h: gemm through OpenBLAS's CBLAS, the elementwise and
// row-wise kernels as plain loops. The float and double instantiations are at the end.
#include "kernels/cpu/cpu_kernels.h"

#include <cblas.h>

#include <climits>
#include <cmath>
#include <cstdlib>
#include <numbers>
#include <string>
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

// Phi(x) = 0.5 erfc(-x / sqrt 2): the same value as 0.5 (1 + erf(x / sqrt 2)) but without the
// cancellation of 1 + erf for negative x (at x = -5 the erf form keeps only one float digit).
template <class T>
T normal_cdf(T x) {
  return T(0.5) * std::erfc(-x * T(std::numbers::sqrt2 / 2));
}
template <class T>
T normal_pdf(T x) {
  // 1 / sqrt(2 pi) = inv_sqrtpi / sqrt 2
  return T(std::numbers::inv_sqrtpi / std::numbers::sqrt2) * std::exp(T(-0.5) * x * x);
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
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * cols;
    for (int64_t j = 0; j < cols; ++j) {
      const T p = x[base + j] + bias[j];
      pre[base + j] = p;
      y[base + j] = p * normal_cdf(p);
    }
  }
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
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * cols;
    for (int64_t j = 0; j < cols; ++j) {
      const T p = pre[base + j];
      const T g = dy[base + j] * (normal_cdf(p) + p * normal_pdf(p));
      dx[base + j] = g;
      column_sum[static_cast<size_t>(j)] += static_cast<double>(g);
    }
  }
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
    // exp(l - max) <= 1, so nothing overflows whatever the logits' scale; the sum is in double.
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) {
      const T e = std::exp(row[j] - max);
      grad[j] = e;
      sum += static_cast<double>(e);
    }
    const int32_t label = labels[r];
    // logsumexp - l_label = (max - l_label) + log(sum), each term in double.
    loss_sum += static_cast<double>(max) - static_cast<double>(row[label]) + std::log(sum);
    const double scale = inv_rows / sum;
    for (int64_t j = 0; j < classes; ++j) grad[j] = static_cast<T>(static_cast<double>(grad[j]) * scale);
    // p - 1 formed in double: for a confident right answer p ~ 1 and the T subtraction would cancel.
    grad[label] = static_cast<T>((static_cast<double>(std::exp(row[label] - max)) / sum - 1.0) * inv_rows);
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
  const T lr = static_cast<T>(opt.lr), momentum = static_cast<T>(opt.momentum);
  const T weight_decay = static_cast<T>(opt.weight_decay);
  for (int64_t i = 0; i < n; ++i) {
    const T g = grad[i] + weight_decay * param[i];
    const T v = momentum * velocity[i] + g;
    velocity[i] = v;
    param[i] -= lr * v;
  }
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
  const T step_size = static_cast<T>(opt.lr / bias_correction1);
  const T inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(bias_correction2));
  const T decay = static_cast<T>(1.0 - opt.lr * opt.weight_decay);  // p -= lr wd p as one multiply
  const T beta1 = static_cast<T>(opt.beta1), beta2 = static_cast<T>(opt.beta2);
  const T one_minus_beta1 = static_cast<T>(1.0 - opt.beta1), one_minus_beta2 = static_cast<T>(1.0 - opt.beta2);
  const T eps = static_cast<T>(opt.eps);
  for (int64_t i = 0; i < n; ++i) {
    const T g = grad[i];
    const T mi = beta1 * m[i] + one_minus_beta1 * g;
    const T vi = beta2 * v[i] + one_minus_beta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const T denom = std::sqrt(vi) * inv_sqrt_bc2 + eps;
    param[i] = param[i] * decay - step_size * mi / denom;
  }
}

void cast_f32_to_bf16(const float* in, uint16_t* out, int64_t n) {
  require_count(n, "cast_f32_to_bf16");
  if (n == 0) return;
  require_pointer(in, "cast_f32_to_bf16", "in");
  require_pointer(out, "cast_f32_to_bf16", "out");
  // float -> double is exact, so the one rounding is core/half's round-to-nearest-even.
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_bits_from_double(static_cast<double>(in[i]));
}
void cast_bf16_to_f32(const uint16_t* in, float* out, int64_t n) {
  require_count(n, "cast_bf16_to_f32");
  if (n == 0) return;
  require_pointer(in, "cast_bf16_to_f32", "in");
  require_pointer(out, "cast_bf16_to_f32", "out");
  for (int64_t i = 0; i < n; ++i) out[i] = float_from_bf16_bits(in[i]);
}
void cast_f32_to_f16(const float* in, uint16_t* out, int64_t n) {
  require_count(n, "cast_f32_to_f16");
  if (n == 0) return;
  require_pointer(in, "cast_f32_to_f16", "in");
  require_pointer(out, "cast_f32_to_f16", "out");
  for (int64_t i = 0; i < n; ++i) out[i] = f16_bits_from_double(static_cast<double>(in[i]));
}
void cast_f16_to_f32(const uint16_t* in, float* out, int64_t n) {
  require_count(n, "cast_f16_to_f32");
  if (n == 0) return;
  require_pointer(in, "cast_f16_to_f32", "in");
  require_pointer(out, "cast_f16_to_f32", "out");
  for (int64_t i = 0; i < n; ++i) out[i] = float_from_f16_bits(in[i]);
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
