// The inventory read from a /proc and sysfs of the test's own and a stand-in NVML
// (suites/topology/fake_nvml.cpp), its text form, and the findings: each rule shown naming the
// rank, GPU or node it exists for, and naming nothing when every rank matches.
#include "harness/inventory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <cmath>
#include <fstream>
#include <map>

#include "core/error.h"

namespace dts {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

class FakeMachine : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("dts-inventory-" + std::to_string(getpid()));
    fs::remove_all(root_);
    sources_.proc = (root_ / "proc").string();
    sources_.sysfs = (root_ / "sys").string();
    sources_.nvml_library = DTS_FAKE_NVML;
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
  InventorySources sources_;
};

// Two sockets of two cores with two threads each: 8 logical CPUs, 4 cores, 2 sockets.
std::string cpuinfo() {
  std::string text;
  for (int p = 0; p < 8; ++p) {
    text += "processor\t: " + std::to_string(p) + "\nmodel name\t: Example CPU 9000\n";
    text += "physical id\t: " + std::to_string(p / 4) + "\ncore id\t\t: " + std::to_string(p % 4 / 2) + "\n\n";
  }
  return text;
}

TEST_F(FakeMachine, CpusNumaAndNicsFromProcAndSysfs) {
  write(root_ / "proc/cpuinfo", cpuinfo());
  write(root_ / "proc/self/status", "Name:\tdtsuite\nCpus_allowed_list:\t0-3,6\n");
  fs::create_directories(root_ / "sys/devices/system/node/node0");
  fs::create_directories(root_ / "sys/devices/system/node/node1");
  write(root_ / "sys/devices/system/node/possible", "0-1\n");  // a file, not a node
  const fs::path net = root_ / "sys/class/net";
  for (const char* name : {"lo", "eth0", "veth0"}) write(net / name / "statistics/tx_bytes", "0\n");
  write(net / "eth0/type", "1\n");
  write(net / "eth0/speed", "25000\n");  // Mbit/s
  fs::create_directories(net / "eth0/device");
  write(net / "veth0/type", "1\n");
  write(net / "veth0/speed", "10000\n");  // virtual (no device): says nothing
  const fs::path port = root_ / "sys/class/infiniband/mlx5_0/ports/1";
  write(port / "counters/port_xmit_data", "0\n");
  write(port / "rate", "200 Gb/sec (4X HDR)\n");
  write(port / "link_layer", "InfiniBand\n");

  const RankInventory inv = read_inventory(sources_);
  EXPECT_EQ(inv.cpu_model, "Example CPU 9000");
  EXPECT_EQ(inv.logical_cpus, 8);
  EXPECT_EQ(inv.cores, 4);
  EXPECT_EQ(inv.sockets, 2);
  EXPECT_EQ(inv.numa_nodes, 2);
  EXPECT_EQ(inv.cpus_allowed, "0-3,6");
  EXPECT_TRUE(inv.gpus.empty());
  ASSERT_EQ(inv.nics.size(), 3u);  // eth0, the IB port, veth0; never lo
  std::map<std::string, NicInventory> nics;
  for (const auto& n : inv.nics) nics[n.name] = n;
  EXPECT_EQ(nics["eth0"].link_layer, "ethernet");
  EXPECT_DOUBLE_EQ(nics["eth0"].bits_per_second, 25e9);
  EXPECT_EQ(nics["ib:mlx5_0/1"].link_layer, "infiniband");
  EXPECT_DOUBLE_EQ(nics["ib:mlx5_0/1"].bits_per_second, 200e9);
  EXPECT_DOUBLE_EQ(nics["veth0"].bits_per_second, 0);
}

TEST_F(FakeMachine, NothingToReadIsUnknownNotAnError) {
  const RankInventory inv = read_inventory(sources_);  // neither folder exists
  EXPECT_EQ(inv.cpu_model, "");
  EXPECT_EQ(inv.logical_cpus, 0);
  EXPECT_EQ(inv.numa_nodes, 0);
  EXPECT_TRUE(inv.nics.empty());
}

TEST_F(FakeMachine, TheRanksGpuFromNvmlAndItsPcieLinkFromSysfs) {
  const fs::path pci = root_ / "sys/bus/pci/devices/0000:1b:00.0";
  write(pci / "current_link_width", "8\n");
  write(pci / "max_link_width", "16\n");
  write(pci / "current_link_speed", "16.0 GT/s PCIe\n");
  write(pci / "max_link_speed", "32.0 GT/s PCIe\n");
  write(pci / "numa_node", "1\n");
  // CUDA spells the address with a 4-digit domain in capitals.
  const RankInventory inv = read_inventory(sources_, "0000:1B:00.0", 132);
  EXPECT_EQ(inv.driver_version, "550.54.15");
  EXPECT_EQ(inv.cuda_driver_version, "12.4");
  ASSERT_EQ(inv.gpus.size(), 1u);
  const GpuInventory& g = inv.gpus[0];
  EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g.uuid, "GPU-00000000-1111-2222-3333-444444444444");
  EXPECT_EQ(g.pci_bus_id, "0000:1b:00.0");
  EXPECT_EQ(g.memory_bytes, 80ULL << 30);
  EXPECT_EQ(g.sm_count, 132);
  EXPECT_EQ(g.sm_clock_max_mhz, 1980u);
  EXPECT_EQ(g.memory_clock_max_mhz, 2619u);
  EXPECT_EQ(g.numa_node, 1);
  EXPECT_EQ(g.pcie_width, 8);
  EXPECT_EQ(g.pcie_width_max, 16);
  EXPECT_DOUBLE_EQ(g.pcie_gts, 16.0);
  EXPECT_DOUBLE_EQ(g.pcie_gts_max, 32.0);
}

TEST_F(FakeMachine, AGpuNvmlDoesNotKnowKeepsWhatSysfsSays) {
  sources_.nvml_library = (root_ / "no-such-libnvidia-ml.so").string();  // no driver
  write(root_ / "sys/bus/pci/devices/0000:3d:00.0/max_link_width", "16\n");
  const RankInventory inv = read_inventory(sources_, "00000000:3D:00.0");
  EXPECT_EQ(inv.driver_version, "");
  ASSERT_EQ(inv.gpus.size(), 1u);
  EXPECT_EQ(inv.gpus[0].name, "");
  EXPECT_EQ(inv.gpus[0].pci_bus_id, "0000:3d:00.0");
  EXPECT_EQ(inv.gpus[0].pcie_width_max, 16);
  EXPECT_EQ(inv.gpus[0].numa_node, -1);
}

TEST(PciAddress, BothSpellingsAndNothingElse) {
  EXPECT_EQ(sysfs_pci_address("00000000:1B:00.0"), "0000:1b:00.0");
  EXPECT_EQ(sysfs_pci_address("0001:c1:1f.7"), "0001:c1:1f.7");
  EXPECT_EQ(sysfs_pci_address(""), "");
  EXPECT_EQ(sysfs_pci_address("1B:00.0"), "");            // no domain
  EXPECT_EQ(sysfs_pci_address("0000:1b:00.0x"), "");      // trailing text
  EXPECT_EQ(sysfs_pci_address("0000:1b:20.0"), "");       // device is 5 bits
  EXPECT_EQ(sysfs_pci_address("0000: 1b:00.0"), "");      // a space
  EXPECT_EQ(sysfs_pci_address("+000:1b:00.0"), "");       // a sign
  EXPECT_EQ(sysfs_pci_address("00010000:1b:00.0"), "");   // a domain above 16 bits
  EXPECT_EQ(sysfs_pci_address("0000:1b:00.8"), "");       // function is 3 bits
}

RankInventory example(int rank, const std::string& node) {
  RankInventory r;
  r.rank = rank;
  r.local_rank = rank % 2;
  r.node = node;
  r.cpu_model = "Example CPU 9000, rev 2";  // a comma and spaces survive the text form
  r.logical_cpus = 8;
  r.cores = 4;
  r.sockets = 2;
  r.numa_nodes = 2;
  r.cpus_allowed = "0-3";
  r.driver_version = "550.54.15";
  r.cuda_driver_version = "12.4";
  r.backend_version = "NCCL 2.21.5";
  GpuInventory g;
  g.name = "NVIDIA H100 80GB HBM3";
  g.uuid = "GPU-" + std::to_string(rank);
  g.pci_bus_id = "0000:1b:00.0";
  g.numa_node = 0;
  g.memory_bytes = 80ULL << 30;
  g.sm_count = 132;
  g.sm_clock_max_mhz = 1980;
  g.memory_clock_max_mhz = 2619;
  g.pcie_width = g.pcie_width_max = 16;
  g.pcie_gts = 2.5;  // idle: the generation a GPU saves power at
  g.pcie_gts_max = 32;
  r.gpus.push_back(g);
  r.nics.push_back({"ib:mlx5_0/1", "infiniband", 400e9});
  r.nics.push_back({"eth0", "ethernet", 25e9});
  return r;
}

std::vector<RankInventory> four_ranks_on_two_nodes() {
  return {example(0, "n0"), example(1, "n0"), example(2, "n1"), example(3, "n1")};
}

TEST(InventoryText, RoundTripsEveryField) {
  RankInventory a = example(3, "n1");
  a.nics[1].bits_per_second = 0.1 + 0.2;  // a double that needs all its digits
  const RankInventory b = decode_inventory(encode_inventory(a));
  EXPECT_EQ(encode_inventory(b), encode_inventory(a));
  EXPECT_EQ(b.rank, 3);
  EXPECT_EQ(b.cpu_model, a.cpu_model);
  ASSERT_EQ(b.gpus.size(), 1u);
  EXPECT_EQ(b.gpus[0].memory_bytes, 80ULL << 30);
  ASSERT_EQ(b.nics.size(), 2u);
  EXPECT_EQ(b.nics[1].bits_per_second, 0.1 + 0.2);  // exactly
  RankInventory empty;
  EXPECT_EQ(encode_inventory(decode_inventory(encode_inventory(empty))), encode_inventory(empty));
}

TEST(InventoryText, ALineBreakInAValueStaysOneLine) {
  RankInventory a;
  a.cpu_model = "two\nlines\r";
  EXPECT_EQ(decode_inventory(encode_inventory(a)).cpu_model, "two lines ");
}

TEST(InventoryText, MalformedTextIsRefusedWithoutAllocatingForIt) {
  for (const char* bad : {"rank=abc\n", "rank=1x\n", "no equals sign\n", "gpu.99999999999.name=x\n", "gpu.4096.name=x\n",
                          "gpu.name=x\n", "nic.-1.name=x\n", "gpu.0.memory_bytes=-5\n"}) {
    try {
      decode_inventory(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << bad;
    }
  }
  EXPECT_EQ(decode_inventory("future_key=1\nrank=2\n").rank, 2);  // a newer writer's key is ignored
}

TEST(InventoryText, ForPeopleALinePerNodeAndGpuThenTheFindings) {
  auto ranks = four_ranks_on_two_nodes();
  ranks[3].driver_version = "525.60.13";
  const auto lines = describe_inventory(ranks, inventory_findings(ranks));
  ASSERT_EQ(lines.size(), 2u + 4u + 1u);
  EXPECT_EQ(lines[0], "node n0, ranks 0-1: Example CPU 9000, rev 2 (8 CPUs, 4 cores, 2 sockets, 2 NUMA nodes); NICs: "
                      "ib:mlx5_0/1 infiniband 400 Gbit/s, eth0 ethernet 25 Gbit/s");
  EXPECT_EQ(lines[2], "rank 0 (node n0): GPU NVIDIA H100 80GB HBM3 0000:1b:00.0, NUMA node 0, 80 GiB, 132 SMs, max "
                      "clocks 1980/2619 MHz, PCIe x16 of x16 at 2.5 of 32 GT/s; driver 550.54.15, CUDA 12.4");
  EXPECT_EQ(lines[6].rfind("inventory: driver_version: rank 3 ", 0), 0u);
}

TEST(InventoryFindings, MatchingRanksNameNothing) {
  for (int n = 0; n <= 4; ++n) {
    auto ranks = four_ranks_on_two_nodes();
    ranks.resize(static_cast<size_t>(n));
    EXPECT_TRUE(inventory_findings(ranks).empty()) << n << " ranks";
  }
  // The host path: no GPU, no driver, on any rank.
  auto ranks = four_ranks_on_two_nodes();
  for (auto& r : ranks) r.gpus.clear(), r.driver_version.clear(), r.cuda_driver_version.clear();
  EXPECT_TRUE(inventory_findings(ranks).empty());
}

TEST(InventoryFindings, AMixedDriverNamesTheOddRank) {
  auto ranks = four_ranks_on_two_nodes();
  ranks[3].driver_version = "525.60.13";
  const auto found = inventory_findings(ranks);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].item, "driver_version");
  EXPECT_EQ(found[0].ranks, std::vector<int>{3});
  EXPECT_EQ(found[0].text,
            "driver_version: rank 3 (node n1, GPU 0000:1b:00.0) has 525.60.13 where ranks 0-2 have 550.54.15");
}

TEST(InventoryFindings, AnEvenSplitTakesTheLowestRanksGroupAsTheReference) {
  auto ranks = four_ranks_on_two_nodes();
  ranks[1].backend_version = ranks[3].backend_version = "NCCL 2.18.3";
  const auto found = inventory_findings(ranks);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(found[0].text, "backend_version: ranks 1,3 have NCCL 2.18.3 where ranks 0,2 have NCCL 2.21.5");
}

TEST(InventoryFindings, AGpuMissingOrDifferentIsNamed) {
  auto ranks = four_ranks_on_two_nodes();
  ranks[2].gpus.clear();
  ranks[1].gpus[0].memory_bytes = 40ULL << 30;
  std::vector<std::pair<std::string, std::vector<int>>> named;
  for (const auto& f : inventory_findings(ranks)) named.push_back({f.item, f.ranks});
  // Rank 2 has no GPU: every GPU fact of it is named (it has none), and rank 1's memory apart.
  const std::vector<std::pair<std::string, std::vector<int>>> expected = {
      {"gpu_model", {2}},      {"gpu_memory_bytes", {2}},         {"gpu_memory_bytes", {1}},
      {"gpu_sm_count", {2}},   {"gpu_sm_clock_max_mhz", {2}},     {"gpu_memory_clock_max_mhz", {2}},
      {"gpu_pcie_width_max", {2}}};
  EXPECT_EQ(named, expected);
}

TEST(InventoryFindings, APcieLinkTrainedBelowThePartIsNamedButAnIdleGenerationIsNot) {
  auto ranks = four_ranks_on_two_nodes();
  ranks[2].gpus[0].pcie_width = 8;
  const auto found = inventory_findings(ranks);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].item, "gpu_pcie_width");
  EXPECT_EQ(found[0].text,
            "gpu_pcie_width: rank 2 (node n1, GPU 0000:1b:00.0) trained its PCIe link at x8, the part supports x16");
}

TEST(InventoryFindings, ASlowerNicNamesItsNodeAndRanks) {
  auto ranks = four_ranks_on_two_nodes();
  for (int r : {2, 3}) ranks[static_cast<size_t>(r)].nics[0].bits_per_second = 200e9;
  const auto found = inventory_findings(ranks);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].item, "nic_speed");
  EXPECT_EQ(found[0].ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(found[0].text,
            "nic_speed: node n1 (ranks 2-3) rates ib:mlx5_0/1 (infiniband) at 200 Gbit/s, the fastest of its 1 peers "
            "at 400 Gbit/s");
  // A NIC that does not say its speed is not judged.
  for (int r : {2, 3}) ranks[static_cast<size_t>(r)].nics[0].bits_per_second = 0;
  EXPECT_TRUE(inventory_findings(ranks).empty());
}

TEST(InventoryFindings, NodesDifferingInCoresAreNamedOncePerNode) {
  auto ranks = four_ranks_on_two_nodes();
  ranks.push_back(example(4, "n2"));
  for (int r : {2, 3}) ranks[static_cast<size_t>(r)].cores = 2;  // n1
  const auto found = inventory_findings(ranks);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].item, "cores");
  EXPECT_EQ(found[0].ranks, (std::vector<int>{2, 3}));  // every rank of n1
  EXPECT_EQ(found[0].text, "cores: node n1 (ranks 2-3) has 2 where nodes n0, n2 (ranks 0-1,4) have 4");
}

std::string key_of(const Record& r, const char* key) { return config_value(r.labels.config, key).value_or(""); }

TEST(InventoryRecords, ARowPerRankAPerNodeRowPerNicAndOnePassingCheck) {
  auto ranks = four_ranks_on_two_nodes();
  ranks[0].cpu_model = "CPU; with=signs";  // config values hold no ';' or '=' (results/SCHEMA.md)
  ranks[1].cpu_model = ranks[2].cpu_model = ranks[3].cpu_model = ranks[0].cpu_model;
  ranks[2].nics[1].bits_per_second = ranks[0].nics[1].bits_per_second;
  const std::vector<Record> rows = inventory_records(ranks, inventory_findings(ranks));
  ASSERT_EQ(rows.size(), 4u + 2u * 2u + 1u);  // 4 ranks, 2 NICs on each of 2 nodes, the check
  for (const Record& r : rows) EXPECT_EQ(r.suite, "inventory");
  EXPECT_EQ(rows[3].case_id, "rank/3");
  EXPECT_EQ(rows[3].metric, "rank_info");
  EXPECT_EQ(rows[3].verdict, Verdict::info);
  EXPECT_EQ(key_of(rows[3], "node"), "n1");
  EXPECT_EQ(key_of(rows[3], "local_rank"), "1");
  EXPECT_EQ(key_of(rows[0], "cpu"), "CPU  with signs");
  EXPECT_EQ(key_of(rows[3], "gpu"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(key_of(rows[3], "gpu_uuid"), "GPU-3");
  EXPECT_EQ(key_of(rows[3], "gpu_pci_bus_id"), "0000:1b:00.0");
  EXPECT_EQ(key_of(rows[3], "gpu_memory_bytes"), std::to_string(80ULL << 30));
  EXPECT_EQ(key_of(rows[3], "pcie_width_max"), "16");
  EXPECT_EQ(key_of(rows[3], "driver"), "550.54.15");
  EXPECT_EQ(rows[4].case_id, "node/n0/nic/ib:mlx5_0/1");
  EXPECT_EQ(rows[4].metric, "nic_speed");
  EXPECT_EQ(rows[4].unit, "bytes_per_second");
  EXPECT_EQ(rows[4].value, 400e9 / 8);  // bits to bytes: the CSV's base unit
  EXPECT_EQ(key_of(rows[4], "ranks"), "0-1");
  EXPECT_EQ(key_of(rows[6], "node"), "n1");
  EXPECT_EQ(rows[8].metric, "check");
  EXPECT_EQ(rows[8].verdict, Verdict::pass);
  EXPECT_EQ(rows[8].value, 1);
  // A rank without a GPU says none of the GPU's keys; a NIC without a rated speed is NaN.
  RankInventory host = example(0, "n0");
  host.gpus.clear();
  host.nics = {{"eth0", "ethernet", 0}};
  const std::vector<Record> one = inventory_records({host}, {});
  ASSERT_EQ(one.size(), 3u);
  EXPECT_EQ(key_of(one[0], "gpu"), "");
  EXPECT_EQ(one[0].labels.config.find("pcie"), std::string::npos);
  EXPECT_TRUE(std::isnan(one[1].value));
  EXPECT_EQ(inventory_records({}, {}).size(), 1u);  // no rank: nothing differs, one passing check
}

TEST(InventoryRecords, EveryFindingIsAFailedCheckNamingItsRanks) {
  auto ranks = four_ranks_on_two_nodes();
  ranks[3].driver_version = "525.60.13";
  ranks[1].gpus[0].pcie_width = 8;
  ranks[2].nics[0].bits_per_second = 200e9;
  const auto findings = inventory_findings(ranks);
  ASSERT_EQ(findings.size(), 3u);
  const std::vector<Record> rows = inventory_records(ranks, findings);
  std::vector<const Record*> checks;
  for (const Record& r : rows) {
    if (r.metric == "check") checks.push_back(&r);
  }
  ASSERT_EQ(checks.size(), 3u);  // and no passing one
  std::map<std::string, std::string> ranks_by_item;
  for (const Record* r : checks) {
    EXPECT_EQ(r->verdict, Verdict::fail);
    EXPECT_EQ(r->value, 0);
    ranks_by_item[key_of(*r, "item")] = key_of(*r, "ranks");
  }
  EXPECT_EQ(ranks_by_item, (std::map<std::string, std::string>{
                               {"driver_version", "3"}, {"gpu_pcie_width", "1"}, {"nic_speed", "2-3"}}));
  EXPECT_EQ(checks[0]->case_id, "mismatch/1");
  EXPECT_EQ(checks[0]->detail, findings[0].text);
}

}  // namespace
// --profile auto judges every rank by one profile: a job on one part gets it, a mixed job one
// line naming the ranks of each part.
TEST(CommonPart, OnePartOrTheRanksOfEach) {
  EXPECT_EQ(common_part({"NVIDIA H200", "NVIDIA H200", "NVIDIA H200"}), "NVIDIA H200");
  try {
    common_part({"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3"});
    ADD_FAILURE() << "a mixed job was given one part";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    EXPECT_EQ(std::string(e.what()),
              "--profile auto: the ranks run on different parts (ranks 0-1,3 on 'NVIDIA H100 80GB HBM3', rank 2 on "
              "'NVIDIA H100 PCIe'), and one profile judges them all; name one with --profile FILE");
  }
}

}  // namespace dts
