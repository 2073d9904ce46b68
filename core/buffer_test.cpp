// The emulated device (core/buffer.h): device buffers in host memory that host code reaches only
// through copies, so a reader that touches device memory directly fails on any machine.
#include "core/buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace dts {
namespace {

class EmulatedDevice : public ::testing::Test {
 protected:
  void SetUp() override { use_device_kind(DeviceKind::emulated); }
};

TEST_F(EmulatedDevice, CopiesCarryEveryByteBothWaysAtAnyOffset) {
  // 5000 bytes: more than a page, not a whole number of pages.
  std::vector<uint8_t> host(5000);
  std::iota(host.begin(), host.end(), uint8_t{7});
  Buffer device(Memory::device, host.size());
  EXPECT_EQ(device.memory(), Memory::device);
  device.copy_from_host(host.data(), host.size());
  std::vector<uint8_t> back(host.size(), 0);
  device.copy_to_host(back.data(), back.size());
  EXPECT_EQ(back, host);
  // A slice in the middle, through the raw-pointer copies a backend uses.
  const uint8_t patch[3] = {0xAA, 0xBB, 0xCC};
  copy_host_to_device(static_cast<char*>(device.data()) + 4095, patch, sizeof patch);  // across a page boundary
  uint8_t read[5] = {};
  copy_device_to_host(read, static_cast<const char*>(device.data()) + 4094, sizeof read);
  EXPECT_EQ(read[0], host[4094]);
  EXPECT_EQ(read[1], 0xAA);
  EXPECT_EQ(read[3], 0xCC);
  EXPECT_EQ(read[4], host[4098]);
}

TEST_F(EmulatedDevice, ARangeOutsideEveryBufferIsRefused) {
  Buffer device(Memory::device, 100);
  char host[200] = {};
  const char* base = static_cast<const char*>(device.data());
  EXPECT_NO_THROW(copy_device_to_host(host, base + 99, 1));  // the last byte
  EXPECT_THROW(copy_device_to_host(host, base + 99, 2), Error);   // runs one byte past the end
  EXPECT_THROW(copy_device_to_host(host, base + 100, 1), Error);  // the byte after it
  EXPECT_THROW(copy_host_to_device(host + 100, host, 1), Error);  // host memory is no device address
  EXPECT_THROW(device.copy_from_host(host, 1, 100), Error);
  EXPECT_THROW(device.copy_to_host(host, 101), Error);
  EXPECT_THROW(device.copy_to_host(host, 1, SIZE_MAX), Error);  // an offset that wraps
}

TEST_F(EmulatedDevice, EmptyBuffersHaveAddressesOfTheirOwn) {
  Buffer a(Memory::device, 0), b(Memory::device, 0);
  EXPECT_NE(a.data(), nullptr);
  EXPECT_NE(a.data(), b.data());
  a.copy_to_host(nullptr, 0);  // nothing to copy is no error
}

TEST_F(EmulatedDevice, TheKindCannotChangeUnderLiveBuffers) {
  {
    Buffer device(Memory::device, 8);
    EXPECT_THROW(use_device_kind(DeviceKind::cuda), Error);
    EXPECT_EQ(device_kind(), DeviceKind::emulated);
  }
  use_device_kind(DeviceKind::cuda);  // none left
  EXPECT_EQ(device_kind(), DeviceKind::cuda);
  use_device_kind(DeviceKind::emulated);
}

// The fault the emulated device exists for: host code reading device memory as if it were host
// memory (a check that forgot to download, a strategy that reads its parameters in place). On a
// GPU that is a crash or garbage; here it is SIGSEGV with a line that says what happened.
TEST_F(EmulatedDevice, ADirectReadDiesSayingSo) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Buffer device(Memory::device, 64);
  const uint8_t ones[64] = {1};
  device.copy_from_host(ones, sizeof ones);
  EXPECT_DEATH(
      {
        const volatile uint8_t* planted = static_cast<const uint8_t*>(device.data());
        std::fprintf(stderr, "read %d\n", planted[0]);
      },
      "host code read or wrote emulated device memory directly");
  EXPECT_DEATH(
      {
        auto* planted = static_cast<volatile uint8_t*>(device.data());
        planted[10] = 3;
      },
      "emulated device memory directly");
  // Host buffers are host memory still.
  Buffer host(Memory::host, 64);
  static_cast<uint8_t*>(host.data())[0] = 1;
  EXPECT_EQ(static_cast<uint8_t*>(host.data())[0], 1);
}

}  // namespace
}  // namespace dts
