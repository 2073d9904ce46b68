// Tests of node discovery (comm/topology.h) under mpirun (NP 1 2 3 4): node layouts made per rank
// with DTS_NODE give every rank the same map, with the names, node numbers (by lowest rank), local
// ranks and sizes the layout implies; an explicit name beats DTS_NODE, which beats the host name.
// Run: ctest -R topology_mpi_test --output-on-failure
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/testing/reference.h"
#include "comm/topology.h"

namespace dts {
namespace {

using testing::world_rank;
using testing::world_size;

// A layout and, written out by hand for rank r of n, what discovery must find.
struct Layout {
  const char* name;
  std::function<std::string(int r, int n)> node_name;
  std::function<int(int r, int n)> node;  // nodes numbered by their lowest rank
  std::function<int(int r, int n)> local_rank;
  std::function<int(int r, int n)> local_size;
  std::function<int(int n)> nodes;
  std::function<int(int n)> ranks_per_node;
};

int ceil_half(int n) { return (n + 1) / 2; }

const std::vector<Layout> kLayouts{
    {"one_node", [](int, int) { return std::string("solo"); }, [](int, int) { return 0; },
     [](int r, int) { return r; }, [](int, int n) { return n; }, [](int) { return 1; }, [](int n) { return n; }},
    {"node_per_rank", [](int r, int) { return "n" + std::to_string(r); }, [](int r, int) { return r; },
     [](int, int) { return 0; }, [](int, int) { return 1; }, [](int n) { return n; }, [](int) { return 1; }},
    // NP 3: 2+1.
    {"pairs", [](int r, int) { return "n" + std::to_string(r / 2); }, [](int r, int) { return r / 2; },
     [](int r, int) { return r % 2; }, [](int r, int n) { return std::min(2, n - 2 * (r / 2)); }, ceil_half,
     [](int n) { return std::min(n, 2); }},
    // 1 + (N-1); rank 0's name sorts last, so numbering by name would differ.
    {"first_alone", [](int r, int) { return std::string(r == 0 ? "zeta" : "alpha"); },
     [](int r, int) { return r == 0 ? 0 : 1; }, [](int r, int) { return r == 0 ? 0 : r - 1; },
     [](int r, int n) { return r == 0 ? 1 : n - 1; }, [](int n) { return std::min(n, 2); },
     [](int n) { return std::max(1, n - 1); }},
    // Evens and odds: nodes whose ranks are not contiguous.
    {"interleaved", [](int r, int) { return std::string(r % 2 == 0 ? "even" : "odd"); },
     [](int r, int) { return r % 2; }, [](int r, int) { return r / 2; },
     [](int r, int n) { return r % 2 == 0 ? ceil_half(n) : n / 2; }, [](int n) { return std::min(n, 2); },
     ceil_half},
};

class TopologyLayoutTest : public ::testing::TestWithParam<Layout> {
 protected:
  void SetUp() override { comm_ = make_communicator("mpi"); }
  void TearDown() override { unsetenv("DTS_NODE"); }
  std::unique_ptr<Communicator> comm_;
};

TEST_P(TopologyLayoutTest, DtsNodeGivesTheLayout) {
  const Layout& layout = GetParam();
  const int n = world_size(), rank = world_rank();
  setenv("DTS_NODE", layout.node_name(rank, n).c_str(), 1);
  const NodeMap map = discover_nodes(*comm_);
  ASSERT_EQ(map.names.size(), static_cast<size_t>(n));
  ASSERT_EQ(map.node_of_rank.size(), static_cast<size_t>(n));
  EXPECT_EQ(map.nodes, layout.nodes(n));
  EXPECT_EQ(map.ranks_per_node(), layout.ranks_per_node(n));
  for (int r = 0; r < n; ++r) {  // every rank holds the whole map
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(map.names[static_cast<size_t>(r)], layout.node_name(r, n));
    EXPECT_EQ(map.node_of_rank[static_cast<size_t>(r)], layout.node(r, n));
    EXPECT_EQ(map.local_rank(r), layout.local_rank(r, n));
    EXPECT_EQ(map.local_size(r), layout.local_size(r, n));
  }
  for (int node = 0; node < map.nodes; ++node) {
    std::vector<int> want;
    for (int r = 0; r < n; ++r) {
      if (layout.node(r, n) == node) want.push_back(r);
    }
    EXPECT_EQ(map.ranks_on(node), want) << "node " << node;
  }
  EXPECT_TRUE(map.ranks_on(map.nodes).empty()) << "no node past the last";
}

// The name passed in beats DTS_NODE (the harness's --node flag, CommOptions::node_name).
TEST_P(TopologyLayoutTest, AGivenNameBeatsDtsNode) {
  const Layout& layout = GetParam();
  const int n = world_size(), rank = world_rank();
  setenv("DTS_NODE", "from_environment", 1);
  const NodeMap map = discover_nodes(*comm_, layout.node_name(rank, n));
  EXPECT_EQ(map.nodes, layout.nodes(n));
  EXPECT_EQ(map.names[static_cast<size_t>(rank)], layout.node_name(rank, n));
}

std::string layout_name(const ::testing::TestParamInfo<Layout>& info) { return info.param.name; }
INSTANTIATE_TEST_SUITE_P(Layouts, TopologyLayoutTest, ::testing::ValuesIn(kLayouts), layout_name);

// The host name asked of the system directly: the reference node_name() is checked against.
std::string system_host_name() {
  char host[kMaxNodeName + 1] = {};
  return gethostname(host, kMaxNodeName) == 0 && host[0] ? host : "unknown";
}

TEST(NodeName, ExplicitThenDtsNodeThenHostName) {
  setenv("DTS_NODE", "from_environment", 1);
  EXPECT_EQ(node_name("given"), "given");
  EXPECT_EQ(node_name(), "from_environment");
  setenv("DTS_NODE", "", 1);  // set but empty: as if unset
  EXPECT_EQ(node_name(), system_host_name());
  unsetenv("DTS_NODE");
  EXPECT_EQ(node_name(), system_host_name());
  EXPECT_EQ(node_name(""), system_host_name());
}

// Names longer than kMaxNodeName are cut there: ranks whose names differ only past it share a node.
TEST(NodeName, LongNamesAreCut) {
  auto comm = make_communicator("mpi");
  const std::string stem(kMaxNodeName, 'x');
  const std::string mine = stem + std::to_string(world_rank());
  EXPECT_EQ(node_name(mine), stem);
  const NodeMap map = discover_nodes(*comm, mine);
  EXPECT_EQ(map.nodes, 1);
  EXPECT_EQ(map.names[static_cast<size_t>(world_rank())], stem);
  EXPECT_EQ(map.local_rank(world_rank()), world_rank());
}

TEST(NodeMapErrors, RankOutsideTheMapIsInvalid) {
  auto comm = make_communicator("mpi");
  const NodeMap map = discover_nodes(*comm, "a");
  for (int rank : {-1, world_size()}) {
    for (auto call : {&NodeMap::local_rank, &NodeMap::local_size}) {
      try {
        static_cast<void>((map.*call)(rank));
        ADD_FAILURE() << "rank " << rank << ": expected Error{invalid_argument}";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace dts
