// CUDA implementations of kernels/kernels.h (API in cuda_kernels.h): gemm through cuBLAS, the
// rest as plain kernels on the default stream. Checked against the CPU kernels by
// cuda_kernels_cuda_test (`ctest -R cuda_kernels`; skips without a GPU).
#include "kernels/cuda/cuda_kernels.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <source_location>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/error.h"

namespace dts::kernels::cuda {

namespace {

// The throw site recorded in the Error is the caller's line (source_location is passed through),
// so a failing launch names the kernel call, not this helper.
void check_cuda(cudaError_t rc, const char* what,
                std::source_location where = std::source_location::current()) {
  if (rc != cudaSuccess) {
    throw Error(Error::Kind::backend, std::string(what) + ": " + cudaGetErrorString(rc), where);
  }
}

void check_cublas(cublasStatus_t status, const char* what,
                  std::source_location where = std::source_location::current()) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(Error::Kind::backend, std::string(what) + ": " + cublasGetStatusName(status), where);
  }
}

// Launch errors (bad configuration) surface at cudaGetLastError; faults inside the kernel surface
// at the next synchronizing call, which synchronize() checks.
void check_launch(const char* kernel, std::source_location where = std::source_location::current()) {
  check_cuda(cudaGetLastError(), kernel, where);
}

void check_count(int64_t n, const char* what) {
  if (n < 0) throw Error(Error::Kind::invalid_argument, std::string(what) + ": negative size");
}

constexpr int kThreads = 256;
// Grid-stride loops cover any n; more blocks than this only adds scheduling overhead (132 SMs on
// an H100 at 2048 threads each hold ~1000 blocks of 256).
constexpr int64_t kMaxBlocks = 4096;

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

// One handle per process: creating one costs milliseconds and allocates workspace. The magic
// static makes first use thread-safe; a failed cublasCreate throws and the next call retries.
// Never destroyed: at process exit the CUDA runtime may already be torn down.
cublasHandle_t cublas_handle() {
  static const cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    check_cublas(cublasCreate(&h), "cublasCreate");
    // FP32 gemm in FP32: no TF32 tensor cores, so results stay within the k*eps bound the tests
    // (and the CPU reference) assume.
    check_cublas(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    return h;
  }();
  return handle;
}

// ---- device math ------------------------------------------------------------------------------

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1 / sqrt(2 pi), normal density at 0

// Phi(x) = 0.5 erfc(-x / sqrt 2): the same value as 0.5 (1 + erf(x / sqrt 2)) without the
// cancellation of 1 + erf for negative x (at x = -5 the erf form keeps one digit). Written as the
// CPU kernel writes it, so both round the erfc argument identically.
__device__ float normal_cdf(float x) { return 0.5f * erfcf(-x * kInvSqrt2); }
__device__ float normal_pdf(float x) { return kInvSqrt2Pi * expf(-0.5f * x * x); }

__device__ float gelu(float x) { return x * normal_cdf(x); }
__device__ float gelu_grad(float x) { return normal_cdf(x) + x * normal_pdf(x); }

// kGelu false: bias_add (pre = x + bias only; y unused).
template <bool kGelu>
__global__ void bias_gelu_forward_kernel(const float* x, const float* bias, float* pre, float* y,
                                         int64_t n, int64_t cols) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float p = x[i] + bias[i % cols];
    pre[i] = p;
    if constexpr (kGelu) y[i] = gelu(p);
  }
}

// dbias needs a column sum, and this project wants bit-identical results run to run, so no
// atomics: each block owns kColumnTile columns; thread (tx, ty) walks rows ty, ty + kRowLanes, ...
// of column tx in order, then the kRowLanes partial sums are combined by a fixed tree. Reading
// consecutive columns per warp keeps the loads coalesced. dx is computed in the same pass. Sums
// are in double, as on the CPU: a float running sum over thousands of rows loses digits per row.
constexpr int kColumnTile = 32;
constexpr int kRowLanes = 16;

// kGelu false: column_sum (dbias = the column sums of dy; pre and dx unused).
template <bool kGelu>
__global__ void bias_gelu_backward_kernel(const float* pre, const float* dy, float* dx, float* dbias,
                                          int64_t rows, int64_t cols) {
  __shared__ double partial[kRowLanes][kColumnTile];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t col = blockIdx.x * int64_t{kColumnTile} + tx;
  double sum = 0.0;
  if (col < cols) {
    for (int64_t r = ty; r < rows; r += kRowLanes) {
      const int64_t i = r * cols + col;
      if constexpr (kGelu) {
        const float g = dy[i] * gelu_grad(pre[i]);
        dx[i] = g;
        sum += g;
      } else {
        sum += dy[i];
      }
    }
  }
  partial[ty][tx] = sum;
  __syncthreads();
  for (int stride = kRowLanes / 2; stride > 0; stride /= 2) {
    if (ty < stride) partial[ty][tx] += partial[ty + stride][tx];
    __syncthreads();
  }
  if (ty == 0 && col < cols) dbias[col] = static_cast<float>(partial[0][tx]);
}

// Block-wide reduction in a fixed order (shuffle tree within each warp, then warp 0 combines the
// warps' results the same way), so every run gives the same bits. blockDim.x must be a multiple
// of 32; every thread of the block must call it and every thread gets the result.
template <class T, class Op>
__device__ T block_reduce(T value, Op op, T identity, T* scratch /* [32] */) {
  for (int offset = 16; offset > 0; offset /= 2) value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  __syncthreads();  // a previous call's readers of scratch[0] are done before it is overwritten
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < warps ? scratch[lane] : identity;
    for (int offset = 16; offset > 0; offset /= 2) value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
    if (lane == 0) scratch[0] = value;
  }
  __syncthreads();
  return scratch[0];
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// One block per row: the row's max and sum of exponentials are block reductions, then each
// thread writes its classes' gradients. The arithmetic follows the CPU kernel: float exp of
// (l - max) <= 0, sums and the loss term in double, p - 1 for the label in double (a confident
// right answer has p ~ 1 and a float subtraction would cancel). Per-row losses go to row_loss;
// the mean is taken on the host in a fixed order. A label out of range marks *bad_row (the lowest).
__global__ void softmax_cross_entropy_kernel(const float* logits, const int32_t* labels, float* dlogits,
                                             double* row_loss, int* bad_row, int64_t classes, double inv_rows) {
  __shared__ float max_scratch[32];
  __shared__ double sum_scratch[32];
  const int64_t row = blockIdx.x;
  const float* x = logits + row * classes;
  float* d = dlogits + row * classes;

  float max_logit = -INFINITY;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) max_logit = fmaxf(max_logit, x[c]);
  max_logit = block_reduce(max_logit, MaxOp{}, -INFINITY, max_scratch);

  double sum_exp = 0.0;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) sum_exp += static_cast<double>(expf(x[c] - max_logit));
  sum_exp = block_reduce(sum_exp, SumOp{}, 0.0, sum_scratch);

  const int32_t label = labels[row];
  if (label < 0 || label >= classes) {
    if (threadIdx.x == 0) {
      row_loss[row] = NAN;
      atomicMin(bad_row, static_cast<int>(row));
    }
    return;  // the whole block: label is the same for every thread
  }
  if (threadIdx.x == 0) {
    // logsumexp - l_label = (max - l_label) + log(sum), each term in double.
    row_loss[row] = static_cast<double>(max_logit) - static_cast<double>(x[label]) + log(sum_exp);
  }
  const double scale = inv_rows / sum_exp;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    const double e = static_cast<double>(expf(x[c] - max_logit));
    d[c] = static_cast<float>(c == label ? (e / sum_exp - 1.0) * inv_rows : e * scale);
  }
}

__global__ void sgd_momentum_kernel(float* param, const float* grad, float* velocity, int64_t n, float lr,
                                    float momentum, float weight_decay) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float p = param[i];
    const float g = grad[i] + weight_decay * p;
    const float v = momentum * velocity[i] + g;
    velocity[i] = v;
    param[i] = p - lr * v;
  }
}

// Scalars that depend only on the step, computed once on the host in double (beta2^t for large t
// needs the digits), then rounded to float once; the same arrangement as the CPU kernel.
struct AdamWScalars {
  float decay;  // 1 - lr * weight_decay: p -= lr wd p as one multiply
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float step_size;     // lr / (1 - beta1^t)
  float inv_sqrt_bc2;  // 1 / sqrt(1 - beta2^t)
  float eps;
};

__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, int64_t n, AdamWScalars s) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = grad[i];
    const float m_new = s.beta1 * m[i] + s.one_minus_beta1 * g;
    const float v_new = s.beta2 * v[i] + s.one_minus_beta2 * g * g;
    m[i] = m_new;
    v[i] = v_new;
    const float denom = sqrtf(v_new) * s.inv_sqrt_bc2 + s.eps;
    param[i] = param[i] * s.decay - s.step_size * m_new / denom;
  }
}

// C = beta * C for an empty product (k = 0), BLAS's rule: beta == 0 overwrites, NaN included.
// Done here rather than trusting cuBLAS with k = 0, and to match the CPU kernel exactly.
__global__ void scale_matrix_kernel(float* c, int64_t rows, int64_t cols, int64_t ldc, float beta) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    float& value = c[(i / cols) * ldc + i % cols];
    value = beta == 0.0f ? 0.0f : beta * value;
  }
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    y[i] += x[i];
  }
}

__global__ void scale_kernel(float* x, float alpha, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    x[i] *= alpha;
  }
}

// __fdiv_rn: IEEE division rounded to nearest whatever the fast-math flags (the host's x / d).
__global__ void divide_kernel(float* x, float divisor, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = __fdiv_rn(x[i], divisor);
  }
}

__global__ void scale_in_double_kernel(float* x, double alpha, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = static_cast<float>(static_cast<double>(x[i]) * alpha);
  }
}

// The straggler's delay (delay()): one thread spins on the device's global nanosecond timer, so
// the device itself is busy for the time asked (a host wait would leave it idle, and an idle GPU
// lowers its clocks: a host wait of 2x a phase slowed ddp's steps 5.7x on an H100).
__global__ void delay_kernel(uint64_t nanoseconds) {
  uint64_t start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}

// Narrow-float casts: the device's round-to-nearest-even conversions, stored as raw bits.
__global__ void f32_to_bf16_kernel(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(in[i]));
  }
}
// bf16 compute's rounding in place (kernels/cpu round_to_bf16 on the host): f32 -> bf16 -> f32.
__global__ void round_to_bf16_kernel(float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
  }
}
__global__ void bf16_to_f32_kernel(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __bfloat162float(__ushort_as_bfloat16(in[i]));
  }
}
__global__ void f32_to_f16_kernel(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __half_as_ushort(__float2half_rn(in[i]));
  }
}
__global__ void f16_to_f32_kernel(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __half2float(__ushort_as_half(in[i]));
  }
}

int to_int(int64_t value, const char* what) {
  if (value < 0 || value > INT_MAX) {
    throw Error(Error::Kind::invalid_argument, std::string("cuda gemm: ") + what + " = " + std::to_string(value) +
                                                   " outside cuBLAS's int range");
  }
  return static_cast<int>(value);
}

}  // namespace

bool available() {
  int count = 0;
  // Without a driver this is cudaErrorInsufficientDriver (35); without a device,
  // cudaErrorNoDevice. Both mean "no GPU" here, not a failure.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return false;
  }
  return count > 0;
}

void synchronize() { check_cuda(cudaStreamSynchronize(0), "cudaStreamSynchronize"); }

void gemm(const GemmShape& shape, float alpha, const float* a, const float* b, float beta, float* c) {
  const int m = to_int(shape.m, "m"), n = to_int(shape.n, "n"), k = to_int(shape.k, "k");
  // Minimum row strides of the matrices as stored (row-major): op(A) is m x k, so A is m x k, or
  // k x m when transposed. cuBLAS would reject these too, but with a less telling status.
  const int64_t min_lda = shape.trans_a ? m : k, min_ldb = shape.trans_b ? k : n;
  if (shape.lda < min_lda || shape.ldb < min_ldb || shape.ldc < n) {
    throw Error(Error::Kind::invalid_argument, "cuda gemm: a row stride is smaller than its row");
  }
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // cuBLAS refuses the natural stride 0 of a k = 0 matrix; nothing is read anyway.
    const int64_t count = int64_t{m} * n;
    scale_matrix_kernel<<<grid_for(count), kThreads>>>(c, m, n, shape.ldc, beta);
    check_launch("scale_matrix_kernel");
    return;
  }
  const int lda = to_int(shape.lda, "lda"), ldb = to_int(shape.ldb, "ldb"), ldc = to_int(shape.ldc, "ldc");
  // A row-major matrix with row stride ld, read column-major, is its transpose with leading
  // dimension ld. So row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the
  // operands and m/n; each operand keeps its own transpose flag.
  const cublasOperation_t op_a = shape.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = shape.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_cublas(cublasSgemm(cublas_handle(), op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc),
               "cublasSgemm");
}

void bias_gelu_forward(const float* x, const float* bias, float* pre, float* y, int64_t rows, int64_t cols) {
  check_count(rows, "bias_gelu_forward rows");
  check_count(cols, "bias_gelu_forward cols");
  const int64_t n = rows * cols;
  if (n == 0) return;
  bias_gelu_forward_kernel<true><<<grid_for(n), kThreads>>>(x, bias, pre, y, n, cols);
  check_launch("bias_gelu_forward_kernel");
}

void bias_add(const float* x, const float* bias, float* out, int64_t rows, int64_t cols) {
  check_count(rows, "bias_add rows");
  check_count(cols, "bias_add cols");
  const int64_t n = rows * cols;
  if (n == 0) return;
  bias_gelu_forward_kernel<false><<<grid_for(n), kThreads>>>(x, bias, out, nullptr, n, cols);
  check_launch("bias_add_kernel");
}

void bias_gelu_backward(const float* pre, const float* dy, float* dx, float* dbias, int64_t rows, int64_t cols) {
  check_count(rows, "bias_gelu_backward rows");
  check_count(cols, "bias_gelu_backward cols");
  if (cols == 0) return;
  // rows == 0 still launches: dbias is overwritten with the empty sum, 0.
  const auto blocks = static_cast<unsigned>((cols + kColumnTile - 1) / kColumnTile);
  bias_gelu_backward_kernel<true><<<blocks, dim3(kColumnTile, kRowLanes)>>>(pre, dy, dx, dbias, rows, cols);
  check_launch("bias_gelu_backward_kernel");
}

void column_sum(const float* x, float* out, int64_t rows, int64_t cols) {
  check_count(rows, "column_sum rows");
  check_count(cols, "column_sum cols");
  if (cols == 0) return;
  const auto blocks = static_cast<unsigned>((cols + kColumnTile - 1) / kColumnTile);
  bias_gelu_backward_kernel<false><<<blocks, dim3(kColumnTile, kRowLanes)>>>(nullptr, x, nullptr, out, rows, cols);
  check_launch("column_sum_kernel");
}

void add(float* y, const float* x, int64_t n) {
  check_count(n, "add n");
  if (n == 0) return;
  add_kernel<<<grid_for(n), kThreads>>>(y, x, n);
  check_launch("add_kernel");
}

void scale(float* x, float alpha, int64_t n) {
  check_count(n, "scale n");
  if (n == 0) return;
  scale_kernel<<<grid_for(n), kThreads>>>(x, alpha, n);
  check_launch("scale_kernel");
}

void divide(float* x, float divisor, int64_t n) {
  check_count(n, "divide n");
  if (n == 0) return;
  divide_kernel<<<grid_for(n), kThreads>>>(x, divisor, n);
  check_launch("divide_kernel");
}

void scale_in_double(float* x, double alpha, int64_t n) {
  check_count(n, "scale_in_double n");
  if (n == 0) return;
  scale_in_double_kernel<<<grid_for(n), kThreads>>>(x, alpha, n);
  check_launch("scale_in_double_kernel");
}

void delay(double seconds) {
  if (!(seconds > 0)) return;
  delay_kernel<<<1, 1>>>(static_cast<uint64_t>(seconds * 1e9 + 0.5));
  check_launch("delay_kernel");
}

double softmax_cross_entropy(const float* logits, const int32_t* labels, float* dlogits, int64_t rows,
                             int64_t classes) {
  check_count(rows, "softmax_cross_entropy rows");
  check_count(classes, "softmax_cross_entropy classes");
  if (rows > INT_MAX) throw Error(Error::Kind::invalid_argument, "softmax_cross_entropy: rows exceed the grid");
  // An empty batch adds nothing to a data-parallel sum of losses (the CPU kernel's convention).
  if (rows == 0) return 0.0;
  if (classes == 0) throw Error(Error::Kind::invalid_argument, "softmax_cross_entropy: rows > 0 but no classes");

  // Per-row losses, then one int: the lowest row whose label is out of range (INT_MAX if none).
  Buffer scratch(Memory::device, static_cast<size_t>(rows) * sizeof(double) + sizeof(int));
  auto* row_loss = static_cast<double*>(scratch.data());
  auto* bad_row = reinterpret_cast<int*>(row_loss + rows);
  const int no_bad_row = INT_MAX;
  check_cuda(cudaMemcpy(bad_row, &no_bad_row, sizeof(int), cudaMemcpyHostToDevice), "cudaMemcpy");
  softmax_cross_entropy_kernel<<<static_cast<unsigned>(rows), kThreads>>>(logits, labels, dlogits, row_loss, bad_row,
                                                                          classes, 1.0 / static_cast<double>(rows));
  check_launch("softmax_cross_entropy_kernel");

  std::vector<double> host(static_cast<size_t>(rows) + 1);
  scratch.copy_to_host(host.data(), scratch.bytes());  // waits for the kernel (default stream)
  int first_bad = 0;
  std::memcpy(&first_bad, &host[static_cast<size_t>(rows)], sizeof(int));
  if (first_bad != no_bad_row) {
    throw Error(Error::Kind::invalid_argument,
                "softmax_cross_entropy: label out of [0, " + std::to_string(classes) + ") at row " +
                    std::to_string(first_bad));
  }
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) total += host[static_cast<size_t>(r)];
  return total * (1.0 / static_cast<double>(rows));
}

void sgd_momentum_step(float* param, const float* grad, float* velocity, int64_t n, const SgdMomentum& opt) {
  check_count(n, "sgd_momentum_step n");
  if (n == 0) return;
  sgd_momentum_kernel<<<grid_for(n), kThreads>>>(param, grad, velocity, n, static_cast<float>(opt.lr),
                                                 static_cast<float>(opt.momentum),
                                                 static_cast<float>(opt.weight_decay));
  check_launch("sgd_momentum_kernel");
}

void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, const AdamW& opt, int64_t step) {
  check_count(n, "adamw_step n");
  if (step < 1) throw Error(Error::Kind::invalid_argument, "adamw_step: step counts from 1");
  if (n == 0) return;
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1.0 - std::pow(opt.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(opt.beta2, t);
  const AdamWScalars scalars{
      .decay = static_cast<float>(1.0 - opt.lr * opt.weight_decay),
      .beta1 = static_cast<float>(opt.beta1),
      .one_minus_beta1 = static_cast<float>(1.0 - opt.beta1),
      .beta2 = static_cast<float>(opt.beta2),
      .one_minus_beta2 = static_cast<float>(1.0 - opt.beta2),
      .step_size = static_cast<float>(opt.lr / bias_correction1),
      .inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bias_correction2)),
      .eps = static_cast<float>(opt.eps),
  };
  adamw_kernel<<<grid_for(n), kThreads>>>(param, grad, m, v, n, scalars);
  check_launch("adamw_kernel");
}

void cast_f32_to_bf16(const float* in, uint16_t* out, int64_t n) {
  check_count(n, "cast_f32_to_bf16 n");
  if (n == 0) return;
  f32_to_bf16_kernel<<<grid_for(n), kThreads>>>(in, out, n);
  check_launch("f32_to_bf16_kernel");
}

void round_to_bf16(float* x, int64_t n) {
  check_count(n, "round_to_bf16 n");
  if (n == 0) return;
  round_to_bf16_kernel<<<grid_for(n), kThreads>>>(x, n);
  check_launch("round_to_bf16_kernel");
}

void cast_bf16_to_f32(const uint16_t* in, float* out, int64_t n) {
  check_count(n, "cast_bf16_to_f32 n");
  if (n == 0) return;
  bf16_to_f32_kernel<<<grid_for(n), kThreads>>>(in, out, n);
  check_launch("bf16_to_f32_kernel");
}

void cast_f32_to_f16(const float* in, uint16_t* out, int64_t n) {
  check_count(n, "cast_f32_to_f16 n");
  if (n == 0) return;
  f32_to_f16_kernel<<<grid_for(n), kThreads>>>(in, out, n);
  check_launch("f32_to_f16_kernel");
}

void cast_f16_to_f32(const uint16_t* in, float* out, int64_t n) {
  check_count(n, "cast_f16_to_f32 n");
  if (n == 0) return;
  f16_to_f32_kernel<<<grid_for(n), kThreads>>>(in, out, n);
  check_launch("f16_to_f32_kernel");
}

}  // namespace dts::kernels::cuda
