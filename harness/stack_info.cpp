// Stack discovery: host, CPU model or GPU name, node layout (MPI shared-memory split).
#include "harness/stack_info.h"

#include <mpi.h>
#include <unistd.h>

#include <fstream>

#include "comm/mpi/mpi_communicator.h"
#include "core/buffer.h"

namespace dts {

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

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

StackInfo discover_stack(Communicator& tested, Communicator& control, const std::string& device_kind) {
  StackInfo info;
  info.backend = std::string(tested.backend());
  info.backend_version = tested.version();
  info.mpi_version = mpi_library_version();
  info.world_size = control.size();
  info.host = host_name();
  if (device_kind == "cuda") {
    const std::string gpu = cuda_device_name(0);
    info.device = gpu.empty() ? "cuda (no device)" : "cuda:" + gpu;
  } else {
    const std::string model = cpu_model();
    info.device = model.empty() ? "cpu" : "cpu:" + model;
  }
  // Nodes: ranks that share memory form one node (MPI_COMM_TYPE_SHARED).
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, control.rank(), MPI_INFO_NULL, &node);
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  const int leader = local_rank == 0 ? 1 : 0;
  control.all_reduce(&leader, &info.nodes, 1, DType::i32, ReduceOp::sum);
  control.all_reduce(&local_size, &info.ranks_per_node, 1, DType::i32, ReduceOp::max);
  return info;
}

}  // namespace dts
