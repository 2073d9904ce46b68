// The identity of the stack a run measures (backend and version, MPI library, device, host,
// ranks and nodes): stamped on every Record so results from different stacks never mix.
#pragma once
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "harness/inventory.h"
#include "suites/suite.h"

namespace dts {

struct StackInfo {
  std::string backend, backend_version, mpi_version, device, host;
  std::string mpi_config;  // the MPI library's settings that choose what runs (mpi_settings())
  int world_size = 1, nodes = 1, ranks_per_node = 1;
  // Where every rank of `control` is (comm/topology.h), and this rank's place and device: known on
  // every rank, so who took part in a sub-world case takes one gather of member flags, not a new
  // node split.
  RunContext::Topology topology;
  // Every rank's parts (harness/inventory.h), indexed by rank, and what differs among them where
  // it should match.
  std::vector<RankInventory> inventory;
  std::vector<InventoryFinding> inventory_findings;
};

// Collective over `control` (every rank calls it); the result is valid on every rank. `node`:
// this rank's node name (--node), empty for DTS_NODE or the host name.
StackInfo discover_stack(Communicator& tested, Communicator& control, const std::string& device_kind,
                         const std::string& node);

// The ranks with a nonzero `member[r]`: their count, the distinct nodes among them and the most
// of them on one node. `member` is indexed like `node_of_rank` (NodeMap).
RunContext::Participants participants_of(const std::vector<int>& node_of_rank, const std::vector<int>& member);

std::string cpu_model();

}  // namespace dts
