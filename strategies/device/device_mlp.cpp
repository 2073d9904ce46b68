// DeviceMlp: mlp.cpp's forward and backward, layer for layer, on device pointers.
#include "strategies/device/device_mlp.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/device/device_kernels.h"

namespace dts {

namespace device = kernels::device;

void DeviceFloats::resize(int64_t size) {
  if (size < 0) throw Error(Error::Kind::invalid_argument, "DeviceFloats: negative size");
  const auto bytes = static_cast<size_t>(size) * sizeof(float);
  if (bytes > buffer_.bytes() || !buffer_.data()) buffer_ = Buffer(Memory::device, bytes);
  size_ = size;
}

void DeviceFloats::release() {
  buffer_ = Buffer();
  size_ = 0;
}

void DeviceFloats::upload(const float* host, int64_t count, int64_t offset) {
  if (offset < 0 || count < 0 || offset + count > size_) {
    throw Error(Error::Kind::invalid_argument, "DeviceFloats::upload out of range");
  }
  buffer_.copy_from_host(host, static_cast<size_t>(count) * sizeof(float), static_cast<size_t>(offset) * sizeof(float));
}

std::vector<float> DeviceFloats::download() const {
  std::vector<float> host(static_cast<size_t>(size_));
  device::synchronize();  // a kernel fault surfaces here as an Error, not as wrong bytes
  buffer_.copy_to_host(host.data(), static_cast<size_t>(bytes()));
  return host;
}

void DeviceFloats::fill_zero() { device::zero(data(), size_); }

void copy_device(float* dst, const float* src, int64_t count) { device::copy(dst, src, count); }

DeviceMlp::DeviceMlp(const ModelSpec& spec) : spec_(spec), layout_(parameter_layout(spec)), dims_(layer_dims(spec)) {
  count_ = layout_.back().offset + layout_.back().size();
}

double DeviceMlp::forward(const float* params, const Batch& batch) {
  const int64_t rows = batch.size;
  const int layers = spec_.layers;
  if (static_cast<int64_t>(batch.x.size()) != rows * dims_[0]) {
    throw Error(Error::Kind::invalid_argument, "batch does not match the model's input size");
  }
  rows_ = rows;
  // scratch_ at its largest use up front: growing it during backward would free the old buffer,
  // and cudaFree waits for the whole device, a DDP bucket's all_reduce in flight included.
  int64_t widest = 0;
  for (const int64_t d : dims_) widest = std::max(widest, d);
  scratch_.resize(rows * widest);
  activations_.resize(static_cast<size_t>(layers));
  pre_.resize(static_cast<size_t>(layers));
  // The inputs as Mlp<float> takes them: each double rounded to float once.
  host_x_.assign(batch.x.begin(), batch.x.end());
  activations_[0].resize(static_cast<int64_t>(host_x_.size()));
  activations_[0].upload(host_x_.data(), static_cast<int64_t>(host_x_.size()));
  activation_bytes_ = activations_[0].bytes();
  for (int l = 0; l < layers; ++l) {
    const auto ul = static_cast<size_t>(l);
    const int64_t in = dims_[ul], out = dims_[ul + 1];
    const float* w = params + layout_[2 * ul].offset;
    const float* b = params + layout_[2 * ul + 1].offset;
    scratch_.resize(rows * out);
    // z = a W^T (W is out x in, row-major)
    device::gemm({false, true, rows, out, in, in, in, out}, 1.0f, activations_[ul].data(), w, 0.0f, scratch_.data());
    pre_[ul].resize(rows * out);
    if (l + 1 < layers) {
      activations_[ul + 1].resize(rows * out);
      device::bias_gelu_forward(scratch_.data(), b, pre_[ul].data(), activations_[ul + 1].data(), rows, out);
      activation_bytes_ += activations_[ul + 1].bytes();
    } else {
      device::bias_add(scratch_.data(), b, pre_[ul].data(), rows, out);
    }
    activation_bytes_ += pre_[ul].bytes();
  }
  const int64_t classes = dims_.back();
  dlogits_.resize(rows * classes);
  if (labels_.bytes() < static_cast<size_t>(rows) * sizeof(int32_t) || !labels_.data()) {
    labels_ = Buffer(Memory::device, static_cast<size_t>(rows) * sizeof(int32_t));
  }
  labels_.copy_from_host(batch.labels.data(), static_cast<size_t>(rows) * sizeof(int32_t));
  // Reads the per-row losses back: the forward pass is done when this returns.
  return device::softmax_cross_entropy(pre_.back().data(), static_cast<const int32_t*>(labels_.data()), dlogits_.data(),
                                     rows, classes);
}

double DeviceMlp::loss(const float* params, const Batch& batch) { return forward(params, batch); }

double DeviceMlp::forward_backward(const float* params, float* grads, const Batch& batch, double loss_scale,
                                   const std::function<void(size_t)>& on_ready) {
  const double mean_loss = forward(params, batch);
  const int64_t rows = rows_;
  const int layers = spec_.layers;
  backprop_.resize(static_cast<size_t>(layers));
  DeviceFloats& g_last = backprop_.back();
  g_last.resize(dlogits_.size());
  copy_device(g_last.data(), dlogits_.data(), dlogits_.size());
  // Mlp<float>: v * static_cast<float>(loss_scale), one float product per element.
  if (loss_scale != 1.0) device::scale(g_last.data(), static_cast<float>(loss_scale), g_last.size());
  const auto ready = [&](size_t index) {
    if (on_ready) on_ready(index);
  };
  for (int l = layers - 1; l >= 0; --l) {
    const auto ul = static_cast<size_t>(l);
    const int64_t in = dims_[ul], out = dims_[ul + 1];
    const float* g = backprop_[ul].data();
    float* dw = grads + layout_[2 * ul].offset;
    float* db = grads + layout_[2 * ul + 1].offset;
    const float* w = params + layout_[2 * ul].offset;
    if (l == layers - 1) {
      device::column_sum(g, db, rows, out);  // the last layer's bias gradient: no activation
      ready(2 * ul + 1);
    }
    // dW = g^T a  (out x in)
    device::gemm({true, false, out, in, rows, out, in, in}, 1.0f, g, activations_[ul].data(), 0.0f, dw);
    ready(2 * ul);
    if (l == 0) break;
    // da = g W (rows x in), then back through the previous layer's GeLU, which also yields that
    // layer's bias gradient.
    scratch_.resize(rows * in);
    device::gemm({false, false, rows, in, out, out, in, in}, 1.0f, g, w, 0.0f, scratch_.data());
    DeviceFloats& dz = backprop_[ul - 1];
    dz.resize(rows * in);
    float* db_prev = grads + layout_[2 * (ul - 1) + 1].offset;
    device::bias_gelu_backward(pre_[ul - 1].data(), scratch_.data(), dz.data(), db_prev, rows, in);
    ready(2 * (ul - 1) + 1);
  }
  return mean_loss;
}

}  // namespace dts
