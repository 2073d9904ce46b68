// Buffer: an owned, aligned byte buffer in host or device memory, and the device kinds behind
// device memory. Device memory is the CUDA runtime's (builds with CUDA), or the emulated device's:
// host memory that host code can reach only through copies (below) and the kernel table, so a
// reader that touches device memory directly fails on any machine, not first on a GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/dtype.h"

namespace dts {

// What Memory::device is in this process. cuda: the CUDA runtime's memory on this rank's current
// device (a build without CUDA throws Error{unsupported} at the first device buffer). emulated:
// each buffer is host memory that lives at one address, while the pointer handed out is a second,
// inaccessible mapping of the same size: a direct read or write through it is SIGSEGV, and the
// process says on stderr, before it dies, that host code touched emulated device memory. Its
// address space counts twice against `ulimit -v`; its resident memory once.
enum class DeviceKind : uint8_t { cuda, emulated };
std::string_view name(DeviceKind kind);  // "cuda", "emulated"
// Chooses the kind for the whole process; Error{invalid_argument} once a device buffer of the
// other kind exists. Default: cuda.
void use_device_kind(DeviceKind kind);
DeviceKind device_kind();

// Copies between host memory and device memory of this process's kind, as Buffer's copies do
// (synchronous). A device range outside every device buffer is Error{invalid_argument} for the
// emulated kind; CUDA's own error for cuda.
void copy_host_to_device(void* device, const void* host, size_t bytes);
void copy_device_to_host(void* host, const void* device, size_t bytes);

// The emulated device's kernels only (kernels/device): the host memory behind device range
// [device, device + bytes), which one device buffer must hold whole (Error{invalid_argument}
// otherwise, and under the cuda kind). Nothing else reads device memory this way: a check, a
// strategy or a suite that did would skip the copies a GPU needs.
void* emulated_memory_of(const void* device, size_t bytes);

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
// Device `index`'s PCI address as CUDA gives it ("0000:1B:00.0"), or "" when there is none.
std::string cuda_device_pci_bus_id(int index);
// Device `index`'s streaming multiprocessors, or 0 when there is none.
int cuda_device_sm_count(int index);

}  // namespace dts
