// The identity of the stack a run measures (backend and version, MPI library, device, host,
// ranks and nodes): stamped on every Record so results from different stacks never mix.
#pragma once
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "suites/suite.h"

namespace dts {

struct StackInfo {
  std::string backend, backend_version, mpi_version, device, host;
  int world_size = 1, nodes = 1, ranks_per_node = 1;
  // The node of each rank of `control`, named by the lowest rank on it: known on every rank, so
  // who took part in a sub-world case takes one gather of member flags, not a new node split.
  std::vector<int> node_of_rank;
};

// Collective over `control` (every rank calls it); the result is valid on every rank.
StackInfo discover_stack(Communicator& tested, Communicator& control, const std::string& device_kind);

// The ranks with a nonzero `member[r]`: their count, the distinct nodes among them and the most
// of them on one node. `member` is indexed like `node_of_rank`.
RunContext::Participants participants_of(const std::vector<int>& node_of_rank, const std::vector<int>& member);

std::string host_name();
std::string cpu_model();

}  // namespace dts
