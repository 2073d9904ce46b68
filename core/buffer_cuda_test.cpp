// Device Buffer round trips (host -> device -> host) and device discovery. Needs a GPU:
// exits 77 (ctest SKIP) on machines without one.
#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>
#include <vector>

#include "core/buffer.h"

namespace dts {
namespace {

TEST(BufferCuda, RoundTripPreservesBytes) {
  // 1 MiB + 3 bytes: not a multiple of any transfer granule, so partial tails are exercised.
  const size_t bytes = (size_t{1} << 20) + 3;
  std::vector<unsigned char> src(bytes), back(bytes, 0);
  std::iota(src.begin(), src.end(), static_cast<unsigned char>(7));
  Buffer device(Memory::device, bytes);
  device.copy_from_host(src.data(), bytes);
  device.copy_to_host(back.data(), bytes);
  EXPECT_EQ(src, back);
}

TEST(BufferCuda, DeviceHasAName) { EXPECT_FALSE(cuda_device_name(0).empty()); }

}  // namespace
}  // namespace dts

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (dts::cuda_device_count() == 0) {
    std::printf("no CUDA device: skipping\n");
    return 77;
  }
  return RUN_ALL_TESTS();
}
