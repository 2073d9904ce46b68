// The kernel table (kernel_table.h): host memory to kernels/cpu, device memory to kernels/device.
#include "kernels/device/kernel_table.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/half.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/device/device_kernels.h"

namespace dts::kernels {

template <class T>
KernelTable<T>::KernelTable(Memory memory) : memory_(memory) {
  if (memory == Memory::device && !std::is_same_v<T, float>) {
    throw Error(Error::Kind::unsupported, "the device's kernels are f32 (bf16 by rounding f32): f64 runs on host memory");
  }
}

// Host memory runs the first statement; device memory (float only, as the constructor holds) the second.
#define DTS_ON_MEMORY(host_call, device_call)   \
  do {                                          \
    if (memory_ == Memory::host) {              \
      host_call;                                \
    } else if constexpr (std::is_same_v<T, float>) { \
      device_call;                              \
    }                                           \
  } while (false)

template <class T>
void KernelTable<T>::synchronize() const {
  DTS_ON_MEMORY((void)0, device::synchronize());
}

template <class T>
void KernelTable<T>::gemm(const GemmShape& shape, T alpha, const T* a, const T* b, T beta, T* c) const {
  DTS_ON_MEMORY(cpu::gemm<T>(shape, alpha, a, b, beta, c), device::gemm(shape, alpha, a, b, beta, c));
}

template <class T>
void KernelTable<T>::bias_gelu_forward(const T* x, const T* bias, T* pre, T* y, int64_t rows, int64_t cols) const {
  DTS_ON_MEMORY(cpu::bias_gelu_forward<T>(x, bias, pre, y, rows, cols),
                device::bias_gelu_forward(x, bias, pre, y, rows, cols));
}

template <class T>
void KernelTable<T>::bias_gelu_backward(const T* pre, const T* dy, T* dx, T* dbias, int64_t rows, int64_t cols) const {
  DTS_ON_MEMORY(cpu::bias_gelu_backward<T>(pre, dy, dx, dbias, rows, cols),
                device::bias_gelu_backward(pre, dy, dx, dbias, rows, cols));
}

template <class T>
double KernelTable<T>::softmax_cross_entropy(const T* logits, const int32_t* labels, T* dlogits, int64_t rows,
                                             int64_t classes) const {
  if (memory_ == Memory::host) return cpu::softmax_cross_entropy<T>(logits, labels, dlogits, rows, classes);
  if constexpr (std::is_same_v<T, float>) return device::softmax_cross_entropy(logits, labels, dlogits, rows, classes);
  return 0;  // unreachable: no device table of double is made
}

template <class T>
void KernelTable<T>::sgd_momentum_step(T* param, const T* grad, T* velocity, int64_t n, const SgdMomentum& opt) const {
  DTS_ON_MEMORY(cpu::sgd_momentum_step<T>(param, grad, velocity, n, opt),
                device::sgd_momentum_step(param, grad, velocity, n, opt));
}

template <class T>
void KernelTable<T>::adamw_step(T* param, const T* grad, T* m, T* v, int64_t n, const AdamW& opt, int64_t step) const {
  DTS_ON_MEMORY(cpu::adamw_step<T>(param, grad, m, v, n, opt, step), device::adamw_step(param, grad, m, v, n, opt, step));
}

template <class T>
void KernelTable<T>::bias_add(const T* x, const T* bias, T* out, int64_t rows, int64_t cols) const {
  if (memory_ == Memory::host) {
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = x + r * cols;
      T* out_row = out + r * cols;
      for (int64_t c = 0; c < cols; ++c) out_row[c] = row[c] + bias[c];
    }
    return;
  }
  if constexpr (std::is_same_v<T, float>) device::bias_add(x, bias, out, rows, cols);
}

template <class T>
void KernelTable<T>::column_sum(const T* x, T* out, int64_t rows, int64_t cols) const {
  if (memory_ == Memory::host) {
    std::fill(out, out + cols, T(0));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) out[c] += x[r * cols + c];
    }
    return;
  }
  if constexpr (std::is_same_v<T, float>) device::column_sum(x, out, rows, cols);
}

template <class T>
void KernelTable<T>::add(T* y, const T* x, int64_t n) const {
  if (memory_ == Memory::host) {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
    return;
  }
  if constexpr (std::is_same_v<T, float>) device::add(y, x, n);
}

template <class T>
void KernelTable<T>::scale(T* x, T alpha, int64_t n) const {
  if (memory_ == Memory::host) {
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<T>(x[i] * alpha);
    return;
  }
  if constexpr (std::is_same_v<T, float>) device::scale(x, alpha, n);
}

template <class T>
void KernelTable<T>::divide(T* x, T divisor, int64_t n) const {
  if (memory_ == Memory::host) {
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<T>(x[i] / divisor);
    return;
  }
  if constexpr (std::is_same_v<T, float>) device::divide(x, divisor, n);
}

template <class T>
void KernelTable<T>::round_to_bf16(T* x, int64_t n) const {
  if constexpr (std::is_same_v<T, float>) {
    DTS_ON_MEMORY(cpu::round_to_bf16(x, n), device::round_to_bf16(x, n));
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<T>(float_from_bf16_bits(bf16_bits_from_double(x[i])));
  }
}

template <class T>
void KernelTable<T>::zero(T* x, int64_t n) const {
  DTS_ON_MEMORY(std::fill(x, x + std::max<int64_t>(n, 0), T(0)), device::zero(x, n));
}

template <class T>
void KernelTable<T>::copy(T* dst, const T* src, int64_t n) const {
  DTS_ON_MEMORY(std::copy(src, src + std::max<int64_t>(n, 0), dst), device::copy(dst, src, n));
}

template <class T>
void KernelTable<T>::scale_in_double(T* x, double alpha, int64_t n) const {
  if (memory_ == Memory::host) {
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<T>(static_cast<double>(x[i]) * alpha);
    return;
  }
  if constexpr (std::is_same_v<T, float>) device::scale_in_double(x, alpha, n);
}

template <class T>
void KernelTable<T>::cast_to_bf16(const T* x, uint16_t* out, int64_t n) const {
  if constexpr (std::is_same_v<T, float>) {
    DTS_ON_MEMORY(cpu::cast_f32_to_bf16(x, out, n), device::cast_f32_to_bf16(x, out, n));
  } else {
    (void)x, (void)out, (void)n;
    throw Error(Error::Kind::unsupported, "cast_to_bf16: bf16 values are carried in f32");
  }
}

template <class T>
void KernelTable<T>::cast_from_bf16(const uint16_t* x, T* out, int64_t n) const {
  if constexpr (std::is_same_v<T, float>) {
    DTS_ON_MEMORY(cpu::cast_bf16_to_f32(x, out, n), device::cast_bf16_to_f32(x, out, n));
  } else {
    (void)x, (void)out, (void)n;
    throw Error(Error::Kind::unsupported, "cast_from_bf16: bf16 values are carried in f32");
  }
}

#undef DTS_ON_MEMORY

template <class T>
void Array<T>::resize(int64_t size) {
  if (size < 0) throw Error(Error::Kind::invalid_argument, "Array: negative size");
  if (memory_ == Memory::host) {
    host_.resize(static_cast<size_t>(size));
  } else {
    const auto bytes = static_cast<size_t>(size) * sizeof(T);
    if (bytes > device_.bytes() || !device_.data()) device_ = Buffer(Memory::device, bytes);
  }
  size_ = size;
}

template <class T>
void Array<T>::release() {
  decltype(host_)().swap(host_);
  device_ = Buffer();
  size_ = 0;
}

template <class T>
void Array<T>::upload(const T* host, int64_t count, int64_t offset) {
  if (offset < 0 || count < 0 || offset + count > size_) throw Error(Error::Kind::invalid_argument, "Array::upload out of range");
  if (memory_ == Memory::host) {
    std::copy(host, host + count, host_.begin() + offset);
    return;
  }
  device_.copy_from_host(host, static_cast<size_t>(count) * sizeof(T), static_cast<size_t>(offset) * sizeof(T));
}

template <class T>
std::vector<T> Array<T>::download() const {
  if (memory_ == Memory::host) return std::vector<T>(host_.begin(), host_.end());
  std::vector<T> host(static_cast<size_t>(size_));
  device::synchronize();  // a kernel fault surfaces here as an Error, not as wrong bytes
  device_.copy_to_host(host.data(), static_cast<size_t>(bytes()));
  return host;
}

template class KernelTable<float>;
template class KernelTable<double>;
template class Array<float>;
template class Array<double>;
template class Array<int32_t>;
template class Array<uint64_t>;
template class Array<int64_t>;
template class Array<uint16_t>;

}  // namespace dts::kernels
