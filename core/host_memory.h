// Host memory for the large arrays a training step streams through every step (parameters,
// gradients, optimizer state): allocations of 2 MiB and more are 2 MiB-aligned and advised as
// transparent huge pages, so the optimizer's passes and the gemms' reads of a weight matrix walk
// one TLB entry per 2 MiB instead of one per 4 KiB. Smaller ones are plain aligned allocations.
#pragma once
#include <cstddef>
#include <new>

namespace dts {

// At least `bytes` of host memory, 64-byte aligned (2 MiB-aligned and MADV_HUGEPAGE from 2 MiB,
// where the kernel offers it; a kernel that does not leaves ordinary pages). Throws
// std::bad_alloc. Give it back with free_host_memory(pointer, the same bytes).
void* allocate_host_memory(size_t bytes);
void free_host_memory(void* pointer, size_t bytes) noexcept;

// The same as a std::allocator, for std::vector.
template <class T>
struct HostAllocator {
  using value_type = T;
  HostAllocator() = default;
  template <class U>
  HostAllocator(const HostAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(allocate_host_memory(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { free_host_memory(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const HostAllocator<U>&) const noexcept { return true; }
};

}  // namespace dts
