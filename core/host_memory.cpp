// Host memory for large arrays (host_memory.h): huge pages where the kernel gives them.
//
// Why: model A's step (strategies/training_step_bench.cpp) streams 4 MiB weight matrices through
// OpenBLAS and 17 MB parameter, gradient and velocity arrays through the optimizer every step. On
// 4 KiB pages the transposed reads of a weight walk a new page every row. Measured on one core
// of a shared 2-core machine, 8 alternating runs of model A's gemms and SGD pass on one 17 MB
// parameter and gradient array each: gemms median 30.2 ms on 4 KiB pages, 26.8 ms on 2 MiB
// pages; SGD 4.5 and 3.9 ms. training_step_bench's step over its own gemms (which stay on 4 KiB
// pages), 4 alternating runs: 1.13-1.24 before, 1.11-1.14 after. Under THP "madvise" (Debian's
// default) only advised ranges get huge pages; under "always" the advice changes nothing, under
// "never" it is ignored.
#include "core/host_memory.h"

#include <sys/mman.h>

#include <cstdlib>

namespace dts {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kAlignment = 64;  // a cache line: what SIMD loops and BLAS packing like
}  // namespace

void* allocate_host_memory(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes < kHugePage) {
    void* p = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    if (!p) throw std::bad_alloc();
    return p;
  }
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (!p) throw std::bad_alloc();
  // Advice only: a kernel without THP answers EINVAL and the range keeps ordinary pages.
  (void)madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

void free_host_memory(void* pointer, size_t /*bytes*/) noexcept { std::free(pointer); }

}  // namespace dts
