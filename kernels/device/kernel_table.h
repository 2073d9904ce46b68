// The kernel table beneath every strategy: kernels/kernels.h's kernels, and the loops it leaves to
// callers, on memory of either kind, chosen once per table: host memory runs kernels/cpu (float or
// double), device memory kernels/device (a GPU's CUDA kernels, or kernels/cpu behind the emulated
// device; float only). Array<T> is a typed array that knows which memory it lives in.
#pragma once
#include <cstdint>
#include <vector>

#include "core/buffer.h"
#include "core/host_memory.h"
#include "kernels/kernels.h"

namespace dts::kernels {

// Error{unsupported} for double on the device: the device's kernels are f32 (and bf16 by
// rounding f32 values); f64 runs on host memory.
template <class T>
class KernelTable {
 public:
  explicit KernelTable(Memory memory);
  Memory memory() const { return memory_; }

  // The device's queued work done, and a kernel fault raised as an Error (nothing on the host).
  void synchronize() const;
  void gemm(const GemmShape& shape, T alpha, const T* a, const T* b, T beta, T* c) const;
  void bias_gelu_forward(const T* x, const T* bias, T* pre, T* y, int64_t rows, int64_t cols) const;
  void bias_gelu_backward(const T* pre, const T* dy, T* dx, T* dbias, int64_t rows, int64_t cols) const;
  // Reads the loss back: the work queued before it is done when it returns.
  double softmax_cross_entropy(const T* logits, const int32_t* labels, T* dlogits, int64_t rows, int64_t classes) const;
  void sgd_momentum_step(T* param, const T* grad, T* velocity, int64_t n, const SgdMomentum& opt) const;
  void adamw_step(T* param, const T* grad, T* m, T* v, int64_t n, const AdamW& opt, int64_t step) const;
  // out[r][c] = x[r][c] + bias[c], one addition in T each.
  void bias_add(const T* x, const T* bias, T* out, int64_t rows, int64_t cols) const;
  // out[c] = the sum over rows of x[r][c]. Host: in T, rows in order from 0 (the order
  // tensor/parallel_mlp.cpp repeats bit for bit); device: in double, rounded once
  // (kernels/cuda), an order the equivalence suite's device bound covers.
  void column_sum(const T* x, T* out, int64_t rows, int64_t cols) const;
  void add(T* y, const T* x, int64_t n) const;    // y[i] += x[i]
  void scale(T* x, T alpha, int64_t n) const;     // x[i] *= alpha
  void divide(T* x, T divisor, int64_t n) const;  // x[i] /= divisor (not x * (1/divisor): rounded once)
  void round_to_bf16(T* x, int64_t n) const;      // each to the nearest bf16, ties to even, in place
  void zero(T* x, int64_t n) const;
  void copy(T* dst, const T* src, int64_t n) const;
  // x[i] = T(double(x[i]) * alpha): one multiplication in double, rounded once to T (a scale
  // that T cannot hold exactly, as the parameter servers' ps-backup rescaling).
  void scale_in_double(T* x, double alpha, int64_t n) const;
  // Activations on a bf16 wire (pipeline sends in bf16 compute): each value to its bf16 bits
  // (nearest, ties to even), and bf16 bits back to T exactly. Error{unsupported} for double.
  void cast_to_bf16(const T* x, uint16_t* out, int64_t n) const;
  void cast_from_bf16(const uint16_t* x, T* out, int64_t n) const;

 private:
  Memory memory_;
};

extern template class KernelTable<float>;
extern template class KernelTable<double>;

// A T array in host or device memory that keeps its allocation when it shrinks (cudaMalloc and
// cudaFree cost, and cudaFree waits for the whole device). On the host a std::vector over
// core/host_memory.h (huge pages from 2 MiB: the step's parameters, gradients and optimizer
// state): resize() value-initializes what it adds, as the vectors it replaces did.
template <class T>
class Array {
 public:
  explicit Array(Memory memory = Memory::host) : memory_(memory) {}
  Array(Memory memory, int64_t size) : memory_(memory) { resize(size); }
  Memory memory() const { return memory_; }
  void resize(int64_t size);
  T* data() { return memory_ == Memory::host ? host_.data() : static_cast<T*>(device_.data()); }
  const T* data() const { return memory_ == Memory::host ? host_.data() : static_cast<const T*>(device_.data()); }
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t bytes() const { return size_ * static_cast<int64_t>(sizeof(T)); }
  // Gives the memory back (size 0).
  void release();
  // Host <-> this array, synchronous. download waits for the table's queued work on this array
  // first; work of another stream (a device communicator's) must be synchronized before.
  void upload(const T* host, int64_t count, int64_t offset = 0);
  std::vector<T> download() const;

 private:
  Memory memory_;
  std::vector<T, HostAllocator<T>> host_;
  Buffer device_;
  int64_t size_ = 0;
};

extern template class Array<float>;
extern template class Array<double>;
extern template class Array<int32_t>;
extern template class Array<uint64_t>;
extern template class Array<int64_t>;
extern template class Array<uint16_t>;

}  // namespace dts::kernels
