// The link counters read from a sysfs tree of the test's own (interfaces, InfiniBand ports,
// speeds that say nothing), the traffic between two readings, and link speeds as users write them.
#include "suites/topology/link_counters.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace dts {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("dts-sysfs-" + std::to_string(getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  // `hardware`: the interface has a device (a NIC); a virtual one (veth) has none.
  void interface(const std::string& name, int64_t tx, int64_t rx, const std::string& speed, bool hardware = true,
                 int type = 1) {
    write(root_ / "class/net" / name / "statistics/tx_bytes", std::to_string(tx) + "\n");
    write(root_ / "class/net" / name / "statistics/rx_bytes", std::to_string(rx) + "\n");
    write(root_ / "class/net" / name / "type", std::to_string(type) + "\n");
    if (!speed.empty()) write(root_ / "class/net" / name / "speed", speed + "\n");
    if (hardware) fs::create_directories(root_ / "class/net" / name / "device");
  }
  fs::path root_;
};

TEST_F(FakeSysfs, InterfacesAndPortsWithTheirRatedSpeeds) {
  interface("lo", 5, 5, "");              // left out: loopback never leaves the node
  interface("eth0", 1000, 2000, "1000");  // Mbit/s
  interface("eth1", 7, 9, "-1");          // a NIC that does not say its speed
  interface("veth0", 3, 3, "10000", false);  // virtual: its nominal 10000 Mbit/s is backed by no wire
  interface("ib0", 11, 11, "40000", true, 32);  // IPoIB: its bytes are counted at its port
  write(root_ / "class/infiniband/mlx5_0/ports/1/counters/port_xmit_data", "250\n");  // 4-byte words
  write(root_ / "class/infiniband/mlx5_0/ports/1/counters/port_rcv_data", "100\n");
  write(root_ / "class/infiniband/mlx5_0/ports/1/rate", "100 Gb/sec (4X EDR)\n");
  const auto links = read_link_counters(root_.string());
  ASSERT_EQ(links.size(), 4u);  // eth0, eth1, veth0, the IB port
  EXPECT_EQ(links.count("lo"), 0u);
  EXPECT_EQ(links.at("eth0").tx_bytes, 1000);
  EXPECT_EQ(links.at("eth0").rx_bytes, 2000);
  EXPECT_EQ(links.at("eth0").rated_bits_per_second, 1e9);
  EXPECT_EQ(links.at("eth1").rated_bits_per_second, 0);
  EXPECT_EQ(links.at("veth0").rated_bits_per_second, 0);
  EXPECT_EQ(links.count("ib0"), 0u);
  EXPECT_EQ(links.at("ib:mlx5_0/1").tx_bytes, 1000);  // 250 words of 4 bytes
  EXPECT_EQ(links.at("ib:mlx5_0/1").rx_bytes, 400);
  EXPECT_EQ(links.at("ib:mlx5_0/1").rated_bits_per_second, 100e9);
}

TEST_F(FakeSysfs, TrafficIsTheDifferenceOfTwoReadings) {
  interface("eth0", 1000, 2000, "1000");
  const auto before = read_link_counters(root_.string());
  interface("eth0", 1500, 2100, "1000");
  interface("eth1", 10, 10, "1000");  // came up in between: no baseline, no traffic
  const auto traffic = link_traffic(before, read_link_counters(root_.string()));
  ASSERT_EQ(traffic.size(), 1u);
  EXPECT_EQ(traffic.at("eth0").tx_bytes, 500);
  EXPECT_EQ(traffic.at("eth0").rx_bytes, 100);
}

TEST_F(FakeSysfs, AMissingTreeIsNoLinks) { EXPECT_TRUE(read_link_counters((root_ / "absent").string()).empty()); }

TEST(Nvlink, EachGpuWithNvlinkIsALinkWithItsCountersAndRatedSpeed) {
  // The stand-in: GPU 0 has 4 links of 25,000 MB/s and sends 1000 KiB between readings; GPU 1
  // has no NVLink (its fields are not supported) and is left out.
  const auto before = read_nvlink_counters(DTS_FAKE_NVML);
  const auto after = read_nvlink_counters(DTS_FAKE_NVML);
  ASSERT_EQ(after.size(), 1u);
  ASSERT_EQ(after.count("nvlink:gpu0"), 1u);
  EXPECT_EQ(after.at("nvlink:gpu0").rated_bits_per_second, 4 * 25000e6 * 8);
  EXPECT_EQ(after.at("nvlink:gpu0").rx_bytes, 7 * 1024);
  const auto traffic = link_traffic(before, after);
  EXPECT_EQ(traffic.at("nvlink:gpu0").tx_bytes, 1000 * 1024);
}

TEST(Nvlink, NoLibraryIsNoLinks) { EXPECT_TRUE(read_nvlink_counters("libdts-no-such-nvml.so").empty()); }

TEST(LinkSpeed, AsUsersWriteIt) {
  EXPECT_EQ(parse_link_speed("1gbit"), 1e9);
  EXPECT_EQ(parse_link_speed("10G"), 10e9);
  EXPECT_EQ(parse_link_speed("100Gbit"), 100e9);
  EXPECT_EQ(parse_link_speed("25000M"), 25e9);
  EXPECT_EQ(parse_link_speed("1e9"), 1e9);
  EXPECT_EQ(parse_link_speed("400Gb/s"), 400e9);
  EXPECT_EQ(parse_link_speed("50GB/s"), 400e9);  // bytes, capital B: 8 bits each
  EXPECT_EQ(parse_link_speed("1Gbit/s"), 1e9);
  for (const char* bad : {"", "fast", "0", "-1G", "1X", "G"}) {
    EXPECT_THROW(parse_link_speed(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace dts
