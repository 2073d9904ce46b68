// Which node each rank is on. A node is named by its host name unless told otherwise (the run's
// --node flag, else the DTS_NODE environment variable): test fixtures make "nodes" that share one
// kernel, and a cluster may want names of its own. Known on every rank after one all_gather, so
// suites, the harness and backends (hier) group ranks by node without asking again.
#pragma once
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace dts {

// Longest node name kept (bytes); longer ones are cut, and a cut name is still a name.
inline constexpr size_t kMaxNodeName = 255;

// This machine's host name ("unknown" when the system gives none).
std::string host_name();

// This process's node: `name` when not empty, else $DTS_NODE when set and not empty, else the
// host name ("unknown" when the system gives none).
std::string node_name(const std::string& name = "");

struct NodeMap {
  std::vector<std::string> names;  // node of each rank of the communicator it was made on
  std::vector<int> node_of_rank;   // node index of each rank: nodes numbered by their lowest rank
  int nodes = 0;

  // Ranks on `node`, ascending.
  std::vector<int> ranks_on(int node) const;
  // Position of `rank` among the ranks of its node (0 for the lowest), and how many share it.
  // A rank outside the map: Error{invalid_argument}.
  int local_rank(int rank) const;
  int local_size(int rank) const;
  // The most ranks on one node.
  int ranks_per_node() const;
};

// Collective over `comm`: every rank gives its node name (node_name(override)); all get the map.
NodeMap discover_nodes(Communicator& comm, const std::string& name_override = "");

}  // namespace dts
