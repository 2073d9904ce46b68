// The device's kernel table (device_kernels.h): cuda forwards to kernels/cuda; emulated runs
// kernels/cpu on the host memory behind each checked device range.
#include "kernels/device/device_kernels.h"

#include <cstring>
#include <string>
#include <type_traits>

#include "core/buffer.h"
#include "core/error.h"
#include "dts/config.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/device/kernel_table.h"

#if DTS_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_kernels.h"
#endif

namespace dts::kernels::device {

namespace {
bool emulated() { return device_kind() == DeviceKind::emulated; }

// The host memory behind `count` elements at device address `p` (nullptr for none).
template <class T>
T* host(T* p, int64_t count) {
  if (count < 0) throw Error(Error::Kind::invalid_argument, "device kernel: negative count");
  if (count == 0) return p;
  using Bytes = std::conditional_t<std::is_const_v<T>, const void*, void*>;
  return static_cast<T*>(emulated_memory_of(static_cast<Bytes>(p), static_cast<size_t>(count) * sizeof(T)));
}

// The host's loops for the kernels kernels/cpu leaves to callers (kernel_table.h), run on the
// memory behind the emulated device's ranges. (Its column_sum is not the host's: the device sums
// in double, as kernels/cuda does.)
const KernelTable<float>& host_table() {
  static const KernelTable<float> table(Memory::host);
  return table;
}

// Elements a row-major matrix of `rows` x `cols` with row stride `ld` spans.
int64_t extent(int64_t rows, int64_t cols, int64_t ld) { return rows <= 0 || cols <= 0 ? 0 : (rows - 1) * ld + cols; }

#if DTS_HAVE_CUDA
void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw Error(Error::Kind::backend, std::string(what) + ": " + cudaGetErrorString(rc));
}
#endif

[[maybe_unused]] [[noreturn]] void no_cuda() {
  throw Error(Error::Kind::unsupported, "device kernels need a build with CUDA, or the emulated device");
}
}  // namespace

#if DTS_HAVE_CUDA
#define DTS_ON_CUDA(call) return cuda::call
#else
#define DTS_ON_CUDA(call) no_cuda()
#endif

void synchronize() {
  if (emulated()) return;
  DTS_ON_CUDA(synchronize());
}

void gemm(const GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c) {
  if (emulated()) {
    const int64_t a_extent = s.trans_a ? extent(s.k, s.m, s.lda) : extent(s.m, s.k, s.lda);
    const int64_t b_extent = s.trans_b ? extent(s.n, s.k, s.ldb) : extent(s.k, s.n, s.ldb);
    cpu::gemm<float>(s, alpha, host(a, a_extent), host(b, b_extent), beta, host(c, extent(s.m, s.n, s.ldc)));
    return;
  }
  DTS_ON_CUDA(gemm(s, alpha, a, b, beta, c));
}

void bias_gelu_forward(const float* x, const float* bias, float* pre, float* y, int64_t rows, int64_t cols) {
  if (emulated()) {
    const int64_t n = rows * cols;
    cpu::bias_gelu_forward<float>(host(x, n), host(bias, cols), host(pre, n), host(y, n), rows, cols);
    return;
  }
  DTS_ON_CUDA(bias_gelu_forward(x, bias, pre, y, rows, cols));
}

void bias_gelu_backward(const float* pre, const float* dy, float* dx, float* dbias, int64_t rows, int64_t cols) {
  if (emulated()) {
    const int64_t n = rows * cols;
    cpu::bias_gelu_backward<float>(host(pre, n), host(dy, n), host(dx, n), host(dbias, cols), rows, cols);
    return;
  }
  DTS_ON_CUDA(bias_gelu_backward(pre, dy, dx, dbias, rows, cols));
}

double softmax_cross_entropy(const float* logits, const int32_t* labels, float* dlogits, int64_t rows,
                             int64_t classes) {
  if (emulated()) {
    const int64_t n = rows * classes;
    return cpu::softmax_cross_entropy<float>(host(logits, n), host(labels, rows), host(dlogits, n), rows, classes);
  }
  DTS_ON_CUDA(softmax_cross_entropy(logits, labels, dlogits, rows, classes));
}

void sgd_momentum_step(float* param, const float* grad, float* velocity, int64_t n, const SgdMomentum& opt) {
  if (emulated()) {
    cpu::sgd_momentum_step<float>(host(param, n), host(grad, n), host(velocity, n), n, opt);
    return;
  }
  DTS_ON_CUDA(sgd_momentum_step(param, grad, velocity, n, opt));
}

void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, const AdamW& opt, int64_t step) {
  if (emulated()) {
    cpu::adamw_step<float>(host(param, n), host(grad, n), host(m, n), host(v, n), n, opt, step);
    return;
  }
  DTS_ON_CUDA(adamw_step(param, grad, m, v, n, opt, step));
}

void bias_add(const float* x, const float* bias, float* out, int64_t rows, int64_t cols) {
  if (emulated()) {
    host_table().bias_add(host(x, rows * cols), host(bias, cols), host(out, rows * cols), rows, cols);
    return;
  }
  DTS_ON_CUDA(bias_add(x, bias, out, rows, cols));
}

void column_sum(const float* x, float* out, int64_t rows, int64_t cols) {
  if (emulated()) {
    const float* hx = host(x, rows * cols);
    float* ho = host(out, cols);
    for (int64_t c = 0; c < cols; ++c) {
      double sum = 0;
      for (int64_t r = 0; r < rows; ++r) sum += static_cast<double>(hx[r * cols + c]);
      ho[c] = static_cast<float>(sum);
    }
    return;
  }
  DTS_ON_CUDA(column_sum(x, out, rows, cols));
}

void add(float* y, const float* x, int64_t n) {
  if (emulated()) {
    host_table().add(host(y, n), host(x, n), n);
    return;
  }
  DTS_ON_CUDA(add(y, x, n));
}

void scale(float* x, float alpha, int64_t n) {
  if (emulated()) {
    host_table().scale(host(x, n), alpha, n);
    return;
  }
  DTS_ON_CUDA(scale(x, alpha, n));
}

void divide(float* x, float divisor, int64_t n) {
  if (emulated()) {
    host_table().divide(host(x, n), divisor, n);
    return;
  }
  DTS_ON_CUDA(divide(x, divisor, n));
}

void scale_in_double(float* x, double alpha, int64_t n) {
  if (emulated()) {
    host_table().scale_in_double(host(x, n), alpha, n);
    return;
  }
  DTS_ON_CUDA(scale_in_double(x, alpha, n));
}

void round_to_bf16(float* x, int64_t n) {
  if (emulated()) {
    cpu::round_to_bf16(host(x, n), n);
    return;
  }
  DTS_ON_CUDA(round_to_bf16(x, n));
}

void zero(float* x, int64_t n) {
  if (n <= 0) return;
  if (emulated()) {
    std::memset(host(x, n), 0, static_cast<size_t>(n) * sizeof(float));
    return;
  }
#if DTS_HAVE_CUDA
  check_cuda(cudaMemsetAsync(x, 0, static_cast<size_t>(n) * sizeof(float), nullptr), "cudaMemsetAsync");
#else
  no_cuda();
#endif
}

void copy(float* dst, const float* src, int64_t n) {
  if (n <= 0 || dst == src) return;
  if (emulated()) {
    std::memmove(host(dst, n), host(src, n), static_cast<size_t>(n) * sizeof(float));
    return;
  }
#if DTS_HAVE_CUDA
  check_cuda(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, nullptr),
             "cudaMemcpyAsync");
#else
  no_cuda();
#endif
}

void delay(double seconds) {
  if (emulated()) {
    cpu::delay(seconds);
    return;
  }
  DTS_ON_CUDA(delay(seconds));
}

void cast_f32_to_bf16(const float* in, uint16_t* out, int64_t n) {
  if (emulated()) {
    cpu::cast_f32_to_bf16(host(in, n), host(out, n), n);
    return;
  }
  DTS_ON_CUDA(cast_f32_to_bf16(in, out, n));
}

void cast_bf16_to_f32(const uint16_t* in, float* out, int64_t n) {
  if (emulated()) {
    cpu::cast_bf16_to_f32(host(in, n), host(out, n), n);
    return;
  }
  DTS_ON_CUDA(cast_bf16_to_f32(in, out, n));
}

#undef DTS_ON_CUDA

}  // namespace dts::kernels::device
