// Buffer: an owned, aligned byte buffer in host or device memory. Device buffers exist only in
// builds with CUDA; asking for one elsewhere throws Error{unsupported}.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "core/dtype.h"

namespace dts {

class Buffer {
 public:
  Buffer() = default;
  Buffer(Memory memory, size_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Memory memory() const { return memory_; }

  // Copies between this buffer (host or device) and host memory.
  void copy_from_host(const void* src, size_t bytes, size_t offset = 0);
  // Both are synchronous: the bytes are in place when they return. They do not wait for work of
  // other streams (a device backend's): synchronize() the communicator before reading its output.
  void copy_to_host(void* dst, size_t bytes, size_t offset = 0) const;

 private:
  void release();
  Memory memory_ = Memory::host;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Number of CUDA devices this process can use; 0 without CUDA in the build, without a driver,
// or without a device (never throws: "no GPU" is a normal answer).
int cuda_device_count();
// "NVIDIA H100 80GB HBM3" for device `index`, or "" when there is none.
std::string cuda_device_name(int index);

}  // namespace dts
