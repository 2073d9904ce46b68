// The identity of the stack a run measures (backend and version, MPI library, device, host,
// ranks and nodes): stamped on every Record so results from different stacks never mix.
#pragma once
#include <string>

#include "comm/communicator.h"

namespace dts {

struct StackInfo {
  std::string backend, backend_version, mpi_version, device, host;
  int world_size = 1, nodes = 1, ranks_per_node = 1;
};

// Collective over `control` (every rank calls it); the result is valid on every rank.
StackInfo discover_stack(Communicator& tested, Communicator& control, const std::string& device_kind);

std::string host_name();
std::string cpu_model();

}  // namespace dts
