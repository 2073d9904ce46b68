// Buffer: host memory via aligned new, device memory via the CUDA runtime when built with CUDA.
#include "core/buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "core/error.h"
#include "dts/config.h"

#if DTS_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace dts {

namespace {
// Page alignment: what MPI transports and memcpy like best, and what pinned memory needs.
constexpr size_t kHostAlignment = 4096;

#if DTS_HAVE_CUDA
void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    throw Error(Error::Kind::backend, std::string(what) + ": " + cudaGetErrorString(rc));
  }
}
#endif
}  // namespace

Buffer::Buffer(Memory memory, size_t bytes) : memory_(memory), bytes_(bytes) {
  // Even an empty buffer gets its own address (as malloc(0) may): callers tell in-place from
  // out-of-place calls by comparing pointers, and two empty buffers must not compare equal.
  const size_t allocated = bytes == 0 ? 1 : bytes;
  if (memory == Memory::host) {
    data_ = ::operator new(allocated, std::align_val_t(kHostAlignment));
    return;
  }
#if DTS_HAVE_CUDA
  check_cuda(cudaMalloc(&data_, allocated), "cudaMalloc");
#else
  throw Error(Error::Kind::unsupported, "device buffers need a build with CUDA");
#endif
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& other) noexcept
    : memory_(other.memory_), data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    memory_ = other.memory_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void Buffer::release() {
  if (!data_) return;
  if (memory_ == Memory::host) {
    ::operator delete(data_, std::align_val_t(kHostAlignment));
  } else {
#if DTS_HAVE_CUDA
    cudaFree(data_);
#endif
  }
  data_ = nullptr;
}

void Buffer::copy_from_host(const void* src, size_t bytes, size_t offset) {
  if (offset + bytes > bytes_) throw Error(Error::Kind::invalid_argument, "Buffer::copy_from_host out of range");
  if (bytes == 0) return;
  char* dst = static_cast<char*>(data_) + offset;
  if (memory_ == Memory::host) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if DTS_HAVE_CUDA
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
  // From pageable memory cudaMemcpy may return once the bytes are staged, before the DMA lands
  // (CUDA Runtime API, "API synchronization behavior"), and a library's non-blocking stream does
  // not wait for the legacy default stream: wait here, so the data is there for any stream.
  check_cuda(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize after the copy to device");
#endif
}

void Buffer::copy_to_host(void* dst, size_t bytes, size_t offset) const {
  if (offset + bytes > bytes_) throw Error(Error::Kind::invalid_argument, "Buffer::copy_to_host out of range");
  if (bytes == 0) return;
  const char* src = static_cast<const char*>(data_) + offset;
  if (memory_ == Memory::host) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if DTS_HAVE_CUDA
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
#endif
}

int cuda_device_count() {
#if DTS_HAVE_CUDA
  int count = 0;
  // Without a driver this returns cudaErrorInsufficientDriver (35): that means "no device".
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

std::string cuda_device_name(int index) {
#if DTS_HAVE_CUDA
  if (index < 0 || index >= cuda_device_count()) return "";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return "";
  return prop.name;
#else
  (void)index;
  return "";
#endif
}

}  // namespace dts
