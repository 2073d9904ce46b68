// Stack discovery: host, CPU model or GPU name, node layout (MPI shared-memory split).
#include "harness/stack_info.h"

#include <mpi.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "comm/mpi/mpi_communicator.h"
#include "comm/topology.h"
#include "core/buffer.h"

namespace dts {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "";
}

StackInfo discover_stack(Communicator& tested, Communicator& control, const std::string& device_kind,
                         const std::string& node) {
  StackInfo info;
  info.backend = std::string(tested.backend());
  info.backend_version = tested.version();
  info.mpi_version = mpi_library_version();
  info.mpi_config = mpi_settings();
  info.world_size = control.size();
  info.host = host_name();
  if (device_kind == "cuda") {
    const std::string gpu = cuda_device_name(0);
    info.device = gpu.empty() ? "cuda (no device)" : "cuda:" + gpu;
  } else if (device_kind == "emulated") {
    info.device = "emulated";  // host memory behind device pointers (core/buffer.h)
  } else {
    const std::string model = cpu_model();
    info.device = model.empty() ? "cpu" : "cpu:" + model;
  }
  // Nodes by name (host name, or --node / DTS_NODE for fixtures whose "nodes" share a kernel).
  RunContext::Topology& t = info.topology;
  t.nodes = discover_nodes(control, node);
  t.local_rank = t.nodes.local_rank(control.rank());
  t.local_size = t.nodes.local_size(control.rank());
  t.device = info.device;
  t.cuda_devices = std::max(0, cuda_device_count());
  info.nodes = t.nodes.nodes;
  info.ranks_per_node = t.nodes.ranks_per_node();
  // This rank's GPU is the one the device backends take: the ranks of a node in turn.
  std::string gpu_bus_id;
  int sm_count = 0;
  if (device_kind == "cuda" && t.cuda_devices > 0) {
    const int index = t.local_rank % t.cuda_devices;
    gpu_bus_id = cuda_device_pci_bus_id(index);
    sm_count = cuda_device_sm_count(index);
  }
  RankInventory mine = read_inventory(InventorySources{}, gpu_bus_id, sm_count);
  mine.rank = control.rank();
  mine.local_rank = t.local_rank;
  mine.node = t.nodes.names[static_cast<size_t>(control.rank())];
  mine.backend_version = info.backend_version;
  if (!mine.gpus.empty() && mine.gpus[0].name.empty()) mine.gpus[0].name = cuda_device_name(t.local_rank % t.cuda_devices);
  info.inventory = gather_inventories(control, mine);
  info.inventory_findings = inventory_findings(info.inventory);
  return info;
}

RunContext::Participants participants_of(const std::vector<int>& node_of_rank, const std::vector<int>& member) {
  std::map<int, int> members_on_node;
  for (size_t r = 0; r < node_of_rank.size() && r < member.size(); ++r) {
    if (member[r] != 0) ++members_on_node[node_of_rank[r]];
  }
  RunContext::Participants p;
  p.nodes = static_cast<int>(members_on_node.size());
  for (const auto& [node, count] : members_on_node) {
    p.world_size += count;
    p.ranks_per_node = std::max(p.ranks_per_node, count);
  }
  return p;
}

}  // namespace dts
