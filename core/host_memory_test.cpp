// core/host_memory.h: the alignments it promises (what makes a range eligible for a huge page),
// and a vector over its allocator behaving as a std::vector does.
#include "core/host_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace dts {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(HostMemory, LargeAllocationsStartOnAHugePage) {
  // 2 MiB and more: a 2 MiB boundary, so that every whole 2 MiB of the range can be one page.
  for (const size_t bytes : {kHugePage, kHugePage + 1, 17 * (size_t{1} << 20) + 4096}) {
    void* p = allocate_host_memory(bytes);
    EXPECT_EQ(address(p) % kHugePage, 0u) << bytes;
    static_cast<char*>(p)[bytes - 1] = 1;  // the last byte asked for is ours
    free_host_memory(p, bytes);
  }
}

TEST(HostMemory, SmallAllocationsAreCacheLineAligned) {
  for (const size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{65}, kHugePage - 1}) {
    void* p = allocate_host_memory(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(address(p) % 64, 0u) << bytes;
    free_host_memory(p, bytes);
  }
}

TEST(HostMemory, AVectorOverItValueInitializesAndKeepsItsValues) {
  std::vector<float, HostAllocator<float>> v(3 * kHugePage / sizeof(float));
  for (const float x : v) ASSERT_EQ(x, 0.0f);
  v[7] = 2.5f;
  v.resize(v.size() + 1);  // grows: moves into a new allocation
  EXPECT_EQ(v[7], 2.5f);
  EXPECT_EQ(v.back(), 0.0f);
  EXPECT_EQ(address(v.data()) % kHugePage, 0u);
  EXPECT_THROW(HostAllocator<double>().allocate(static_cast<size_t>(-1) / 4), std::bad_array_new_length);
}

}  // namespace
}  // namespace dts
