// The MLP of strategies/mlp.h on the device, in f32: parameters, gradients and activations in
// device memory, every layer through the device's kernel table (kernels/device: on a GPU cuBLAS
// gemm and the GeLU, softmax and column-sum kernels, on the default stream; on the emulated
// device kernels/cpu). The same math in the same layout as Mlp<float> with native
// compute, step for step (mlp.cpp), so a strategy built on it trains the model the CPU reference
// trains; the sums run in cuBLAS's order, not OpenBLAS's, so results agree within the bound the
// equivalence suite derives for it (suites/equivalence/tolerance.h, device_kernel_terms), not bit
// for bit.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/buffer.h"
#include "strategies/workload.h"

namespace dts {

// A float array in device memory that keeps its allocation when it shrinks (cudaMalloc and
// cudaFree cost, and cudaFree waits for the whole device).
class DeviceFloats {
 public:
  DeviceFloats() = default;
  explicit DeviceFloats(int64_t size) { resize(size); }
  void resize(int64_t size);
  float* data() { return static_cast<float*>(buffer_.data()); }
  const float* data() const { return static_cast<const float*>(buffer_.data()); }
  int64_t size() const { return size_; }
  int64_t bytes() const { return size_ * static_cast<int64_t>(sizeof(float)); }
  // Gives the memory back (size 0).
  void release();
  // Host <-> device, synchronous. download waits for the default stream's work on this array;
  // work of another stream (a device communicator's) must be synchronized first.
  void upload(const float* host, int64_t count, int64_t offset = 0);
  std::vector<float> download() const;
  void fill_zero();  // queued on the default stream

 private:
  Buffer buffer_;
  int64_t size_ = 0;
};

// Copies `count` floats device to device, queued on the default stream.
void copy_device(float* dst, const float* src, int64_t count);

class DeviceMlp {
 public:
  explicit DeviceMlp(const ModelSpec& spec);

  // As Mlp<float>: `params` and `grads` are device pointers in the reference layout; the batch
  // is host data, uploaded here. forward_backward overwrites grads with loss_scale * d(mean loss)
  // /d(params) and calls on_ready(i) once parameter i's gradient is queued (not yet computed: the
  // caller synchronizes the default stream before another stream reads it). Returns the batch's
  // mean loss (the loss is read back, so the forward pass has run when this returns).
  double loss(const float* params, const Batch& batch);
  double forward_backward(const float* params, float* grads, const Batch& batch, double loss_scale,
                          const std::function<void(size_t)>& on_ready = {});

  const std::vector<ParameterInfo>& layout() const { return layout_; }
  int64_t parameter_count() const { return count_; }
  int64_t activation_bytes() const { return activation_bytes_; }

 private:
  double forward(const float* params, const Batch& batch);

  ModelSpec spec_;
  std::vector<ParameterInfo> layout_;
  std::vector<int64_t> dims_;
  int64_t count_ = 0;
  int64_t activation_bytes_ = 0;
  int64_t rows_ = 0;
  std::vector<DeviceFloats> activations_, pre_, backprop_;
  DeviceFloats scratch_, dlogits_;
  Buffer labels_;
  std::vector<float> host_x_;
};

}  // namespace dts
