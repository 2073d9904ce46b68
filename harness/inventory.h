// What each rank runs on, for hardware acceptance: read from the sources that already say it,
// never by parsing a tool's output. The CPU from /proc/cpuinfo, the CPUs this rank may run on
// from /proc/self/status, NUMA nodes from sysfs (devices/system/node), network interfaces and
// InfiniBand ports from sysfs (class/net, class/infiniband; their rated speeds as the topology
// suite's link counters read them), the rank's GPU from NVIDIA's management library (NVML,
// opened at run time: without a driver there is no GPU entry) and its PCIe link from sysfs
// (bus/pci/devices/ADDRESS). One all_gather puts every rank's inventory on every rank;
// inventory_findings() names the ranks whose parts differ where they should match.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "results/record.h"

namespace dts {

struct GpuInventory {
  std::string name, uuid;  // "NVIDIA H100 80GB HBM3", "GPU-6f0c..."
  std::string pci_bus_id;  // as sysfs spells it: "0000:1b:00.0"
  int numa_node = -1;      // the PCI device's NUMA node; -1: the platform does not say
  uint64_t memory_bytes = 0;
  int sm_count = 0;                                           // 0: unknown
  unsigned sm_clock_max_mhz = 0, memory_clock_max_mhz = 0;    // 0: unknown
  int pcie_width = 0, pcie_width_max = 0;                     // lanes, trained and the part's; 0: unknown
  double pcie_gts = 0, pcie_gts_max = 0;                      // GT/s per lane, likewise
};

struct NicInventory {
  std::string name;            // "eth0", "ib:mlx5_0/1" (the link counters' names)
  std::string link_layer;      // "ethernet", "infiniband", else sysfs's interface type number
  double bits_per_second = 0;  // rated; 0: the link does not say (virtual, down)
};

struct RankInventory {
  int rank = 0, local_rank = 0;
  std::string node;  // the run's node name (host name, --node or DTS_NODE)
  std::string cpu_model;
  int logical_cpus = 0, cores = 0, sockets = 0, numa_nodes = 0;  // 0: unknown
  std::string cpus_allowed;  // "0-3,8": the CPUs this rank may run on
  std::string driver_version, cuda_driver_version;  // NVML's ("550.54.15", "12.4"); empty without a driver
  std::string backend_version;  // the tested library's own (NCCL's for nccl)
  std::vector<GpuInventory> gpus;  // the rank's GPU; empty on the host path or without one
  std::vector<NicInventory> nics;
};

struct InventorySources {
  std::string proc = "/proc", sysfs = "/sys";  // tests pass folders of their own
  std::string nvml_library;                    // "": $DTS_NVML_LIBRARY, else libnvidia-ml.so.1
};

// This process's CPU, NUMA and NIC facts, and the GPU at `gpu_pci_bus_id` (any case, CUDA's or
// NVML's domain width; "" for none), with `sm_count` from CUDA (NVML does not say). rank,
// local_rank, node and backend_version are the caller's to fill. Never throws for a source that
// is missing: what it would have said stays unknown.
RankInventory read_inventory(const InventorySources& sources, const std::string& gpu_pci_bus_id = "",
                             int sm_count = 0);

// "0000:1b:00.0" from "00000000:1B:00.0" or "0000:1b:00.0"; "" for text that is not a PCI address.
std::string sysfs_pci_address(const std::string& bus_id);

// Text form for the all_gather, and back. decode_inventory(encode_inventory(x)) equals x; an
// unknown key is ignored, a malformed line is Error{invalid_argument}.
std::string encode_inventory(const RankInventory& inventory);
RankInventory decode_inventory(const std::string& text);

// Collective over `control`: every rank's inventory, indexed by rank, on every rank.
std::vector<RankInventory> gather_inventories(Communicator& control, const RankInventory& mine);

struct InventoryFinding {
  std::string item;        // what differs: "driver_version", "gpu_pcie_width", "nic_speed", ...
  std::vector<int> ranks;  // the ranks it names, ascending
  std::string text;        // one line, naming them: "driver_version: rank 3 (node n1) has 525.60.13 ..."
};

// What should match and does not, in a stated rule:
// - across every rank: CPU model, driver, CUDA driver version, the tested library's version, GPU
//   model, memory, SM count and clocks, the PCIe width the part supports; the ranks in the
//   largest group (ties: the group of the lowest rank) are the reference, every other group is
//   named;
// - per GPU: a PCIe link trained at fewer lanes than the part supports. The generation is not
//   judged: GPUs lower it when idle to save power, so a reading between cases says nothing;
// - across nodes (each node by its lowest rank): logical CPUs, cores, sockets, NUMA nodes, and
//   each NIC of a name and link layer that several nodes have, rated below the fastest of them.
std::vector<InventoryFinding> inventory_findings(const std::vector<RankInventory>& ranks);

// The inventory for people: a line per node (CPU, NUMA, rated NICs) and one per GPU, then one per
// finding ("inventory: " and its text).
std::vector<std::string> describe_inventory(const std::vector<RankInventory>& ranks,
                                            const std::vector<InventoryFinding>& findings);

// The inventory as rows of suite `inventory` (results/SCHEMA.md, *inventory*), every one of them
// about the whole job: per rank `rank_info` (value 1; config: what the rank runs on), per node and
// NIC `nic_speed` (bytes/s, rated; NaN where the link does not say), then per finding a `check`
// row (value 0, fail, detail its text), or one passing `check` when nothing differs. The stack's
// labels are the harness's to stamp.
std::vector<Record> inventory_records(const std::vector<RankInventory>& ranks,
                                      const std::vector<InventoryFinding>& findings);

// The suite name of those rows, and its catalog entry's metrics (results/catalog.h).
inline constexpr const char* kInventorySuite = "inventory";

// The part every rank runs on (`part_of_rank`: each rank's GPU name, else CPU model), for
// `--profile auto`; Error{invalid_argument} naming the ranks of each part when they differ
// ("ranks 0-3 on 'NVIDIA H100 80GB HBM3', ranks 4-7 on 'NVIDIA H100 PCIe'"): one profile judges
// every rank, so a mixed job names its profile itself.
std::string common_part(const std::vector<std::string>& part_of_rank);

}  // namespace dts
