// Buffer: host memory via aligned new; device memory via the CUDA runtime (builds with CUDA) or the
// emulated device (two mappings per buffer: see buffer.h).
#include "core/buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
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

std::atomic<DeviceKind> g_device_kind{DeviceKind::cuda};
std::atomic<int64_t> g_device_buffers{0};  // live device buffers: the kind may change only at 0

// The emulated device. Each allocation is two mappings of one size: `real`, readable host memory
// that copies and kernels use, and `twin`, PROT_NONE, whose address is what callers hold. A map
// from twin to real, under a mutex, translates a device range; a range that no allocation holds
// whole is refused.
struct EmulatedAllocation {
  char* real;
  size_t bytes;   // asked for (at least 1)
  size_t mapped;  // whole pages
};
std::mutex g_emulated_mutex;
std::map<uintptr_t, EmulatedAllocation>& emulated_allocations() {
  static auto* allocations = new std::map<uintptr_t, EmulatedAllocation>;  // outlives every Buffer
  return *allocations;
}
// The lowest and highest twin addresses ever mapped, for the signal handler, which cannot lock.
std::atomic<uintptr_t> g_twin_low{UINTPTR_MAX}, g_twin_high{0};
struct sigaction g_previous_segv {};

// A fault inside the twins' span is host code reading device memory directly: say so, put the
// previous handler back and return, so the access faults again and the process ends as it would
// have (a core, or the sanitizer's report).
void on_segv(int, siginfo_t* info, void*) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  if (address >= g_twin_low.load() && address < g_twin_high.load()) {
    static const char kSay[] =
        "dtsuite: host code read or wrote emulated device memory directly; device memory is reached only "
        "through copies and the kernel table\n";
    (void)!::write(STDERR_FILENO, kSay, sizeof(kSay) - 1);
  }
  sigaction(SIGSEGV, &g_previous_segv, nullptr);
}

void install_segv_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_segv;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_segv);
  });
}

void* emulated_allocate(size_t bytes) {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t asked = bytes == 0 ? 1 : bytes;
  if (asked > SIZE_MAX - page) throw std::bad_alloc();
  const size_t mapped = (asked + page - 1) / page * page;
  void* real = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (real == MAP_FAILED) throw std::bad_alloc();
  void* twin = ::mmap(nullptr, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (twin == MAP_FAILED) {
    ::munmap(real, mapped);
    throw std::bad_alloc();
  }
  install_segv_handler();
  const auto at = reinterpret_cast<uintptr_t>(twin);
  {
    std::lock_guard<std::mutex> lock(g_emulated_mutex);
    emulated_allocations().emplace(at, EmulatedAllocation{static_cast<char*>(real), asked, mapped});
  }
  for (uintptr_t low = g_twin_low.load(); at < low && !g_twin_low.compare_exchange_weak(low, at);) {
  }
  for (uintptr_t high = g_twin_high.load(); at + mapped > high && !g_twin_high.compare_exchange_weak(high, at + mapped);) {
  }
  return twin;
}

void emulated_free(void* twin) {
  EmulatedAllocation allocation{};
  {
    std::lock_guard<std::mutex> lock(g_emulated_mutex);
    auto it = emulated_allocations().find(reinterpret_cast<uintptr_t>(twin));
    if (it == emulated_allocations().end()) return;
    allocation = it->second;
    emulated_allocations().erase(it);
  }
  ::munmap(allocation.real, allocation.mapped);
  ::munmap(twin, allocation.mapped);
}

// The readable host address of device range [device, device + bytes), which one allocation must
// hold whole.
char* emulated_real(const void* device, size_t bytes) {
  const auto at = reinterpret_cast<uintptr_t>(device);
  std::lock_guard<std::mutex> lock(g_emulated_mutex);
  auto& allocations = emulated_allocations();
  auto it = allocations.upper_bound(at);
  if (it != allocations.begin()) {
    --it;
    const uintptr_t offset = at - it->first;
    if (offset <= it->second.bytes && bytes <= it->second.bytes - offset) return it->second.real + offset;
  }
  throw Error(Error::Kind::invalid_argument, "emulated device: " + std::to_string(bytes) +
                                                 " bytes at a device address outside every device buffer");
}
}  // namespace

std::string_view name(DeviceKind kind) { return kind == DeviceKind::cuda ? "cuda" : "emulated"; }

void use_device_kind(DeviceKind kind) {
  if (kind == g_device_kind.load()) return;
  if (g_device_buffers.load() != 0) {
    throw Error(Error::Kind::invalid_argument, std::string("the device kind cannot change to ") +
                                                   std::string(name(kind)) + " while device buffers exist");
  }
  g_device_kind.store(kind);
}

DeviceKind device_kind() { return g_device_kind.load(); }

void* emulated_memory_of(const void* device, size_t bytes) {
  if (device_kind() != DeviceKind::emulated) {
    throw Error(Error::Kind::invalid_argument, "emulated_memory_of: the device is CUDA, not emulated");
  }
  return emulated_real(device, bytes);
}

void copy_host_to_device(void* device, const void* host, size_t bytes) {
  if (bytes == 0) return;
  if (device_kind() == DeviceKind::emulated) {
    std::memcpy(emulated_real(device, bytes), host, bytes);
    return;
  }
#if DTS_HAVE_CUDA
  check_cuda(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
  // From pageable memory cudaMemcpy may return once the bytes are staged, before the DMA lands
  // (CUDA Runtime API, "API synchronization behavior"), and a library's non-blocking stream does
  // not wait for the legacy default stream: wait here, so the data is there for any stream.
  check_cuda(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize after the copy to device");
#else
  (void)device;
  (void)host;
  throw Error(Error::Kind::unsupported, "device buffers need a build with CUDA");
#endif
}

void copy_device_to_host(void* host, const void* device, size_t bytes) {
  if (bytes == 0) return;
  if (device_kind() == DeviceKind::emulated) {
    std::memcpy(host, emulated_real(device, bytes), bytes);
    return;
  }
#if DTS_HAVE_CUDA
  check_cuda(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
#else
  (void)host;
  (void)device;
  throw Error(Error::Kind::unsupported, "device buffers need a build with CUDA");
#endif
}

Buffer::Buffer(Memory memory, size_t bytes) : memory_(memory), bytes_(bytes) {
  // Even an empty buffer gets its own address (as malloc(0) may): callers tell in-place from
  // out-of-place calls by comparing pointers, and two empty buffers must not compare equal.
  const size_t allocated = bytes == 0 ? 1 : bytes;
  if (memory == Memory::host) {
    data_ = ::operator new(allocated, std::align_val_t(kHostAlignment));
    return;
  }
  if (device_kind() == DeviceKind::emulated) {
    data_ = emulated_allocate(bytes);
  } else {
#if DTS_HAVE_CUDA
    check_cuda(cudaMalloc(&data_, allocated), "cudaMalloc");
#else
    throw Error(Error::Kind::unsupported, "device buffers need a build with CUDA");
#endif
  }
  g_device_buffers.fetch_add(1);
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
    if (device_kind() == DeviceKind::emulated) {
      emulated_free(data_);
    } else {
#if DTS_HAVE_CUDA
      cudaFree(data_);
#endif
    }
    g_device_buffers.fetch_sub(1);
  }
  data_ = nullptr;
}

void Buffer::copy_from_host(const void* src, size_t bytes, size_t offset) {
  if (offset > bytes_ || bytes > bytes_ - offset) {
    throw Error(Error::Kind::invalid_argument, "Buffer::copy_from_host out of range");
  }
  if (bytes == 0) return;
  char* dst = static_cast<char*>(data_) + offset;
  if (memory_ == Memory::host) {
    std::memcpy(dst, src, bytes);
    return;
  }
  copy_host_to_device(dst, src, bytes);
}

void Buffer::copy_to_host(void* dst, size_t bytes, size_t offset) const {
  if (offset > bytes_ || bytes > bytes_ - offset) {
    throw Error(Error::Kind::invalid_argument, "Buffer::copy_to_host out of range");
  }
  if (bytes == 0) return;
  const char* src = static_cast<const char*>(data_) + offset;
  if (memory_ == Memory::host) {
    std::memcpy(dst, src, bytes);
    return;
  }
  copy_device_to_host(dst, src, bytes);
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

std::string cuda_device_pci_bus_id(int index) {
#if DTS_HAVE_CUDA
  if (index < 0 || index >= cuda_device_count()) return "";
  char bus_id[32] = {};  // "dddd:bb:dd.f", 13 bytes with its NUL; CUDA's own examples give 13
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, index) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return bus_id;
#else
  (void)index;
  return "";
#endif
}

int cuda_device_sm_count(int index) {
#if DTS_HAVE_CUDA
  if (index < 0 || index >= cuda_device_count()) return 0;
  int count = 0;
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, index) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
#else
  (void)index;
  return 0;
#endif
}

}  // namespace dts
