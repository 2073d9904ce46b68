// Node discovery (comm/topology.h): one all_gather of fixed-size names.
#include "comm/topology.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "comm/text.h"

namespace dts {

std::string host_name() {
  char host[kMaxNodeName + 1] = {};
  return gethostname(host, kMaxNodeName) == 0 && host[0] ? host : "unknown";
}

std::string node_name(const std::string& name) {
  std::string chosen = name;
  if (chosen.empty()) {
    if (const char* env = std::getenv("DTS_NODE")) chosen = env;
  }
  if (chosen.empty()) chosen = host_name();
  return chosen.substr(0, kMaxNodeName);
}

std::vector<int> NodeMap::ranks_on(int node) const {
  std::vector<int> ranks;
  for (size_t r = 0; r < node_of_rank.size(); ++r) {
    if (node_of_rank[r] == node) ranks.push_back(static_cast<int>(r));
  }
  return ranks;
}

namespace {
// The node of `rank`; a rank the map does not hold is the caller's error, reported as dts::Error
// (not vector::at's std::out_of_range, which the harness would not know how to report).
int node_of(const NodeMap& map, int rank) {
  if (rank < 0 || static_cast<size_t>(rank) >= map.node_of_rank.size()) {
    throw Error(Error::Kind::invalid_argument, "node map: rank " + std::to_string(rank) + " outside [0, " +
                                                   std::to_string(map.node_of_rank.size()) + ")");
  }
  return map.node_of_rank[static_cast<size_t>(rank)];
}
}  // namespace

int NodeMap::local_rank(int rank) const {
  const std::vector<int> peers = ranks_on(node_of(*this, rank));
  return static_cast<int>(std::find(peers.begin(), peers.end(), rank) - peers.begin());
}

int NodeMap::local_size(int rank) const { return static_cast<int>(ranks_on(node_of(*this, rank)).size()); }

int NodeMap::ranks_per_node() const {
  int most = 0;
  for (int n = 0; n < nodes; ++n) most = std::max(most, static_cast<int>(ranks_on(n).size()));
  return most;
}

NodeMap discover_nodes(Communicator& comm, const std::string& name_override) {
  const std::vector<std::string> names = all_gather_texts(comm, node_name(name_override), kMaxNodeName);
  NodeMap map;
  std::map<std::string, int> index;
  for (const std::string& text : names) {
    auto [it, fresh] = index.emplace(text, map.nodes);
    if (fresh) ++map.nodes;
    map.names.push_back(text);
    map.node_of_rank.push_back(it->second);
  }
  return map;
}

}  // namespace dts
