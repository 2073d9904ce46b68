// Tests of the hier(INNER) backend under mpirun (NP 1 2 3 4). Node layouts are made per rank with
// DTS_NODE (or CommOptions::node_name) before the backend is built: one node, a node per rank,
// pairs, 1+rest and rest+1 (uneven at NP 3 and 4), nodes whose ranks interleave. In each: every
// dtype, op, placement and an edge or prime count against a reference every rank computes, bit for
// bit; large buffers against mpi; and the bytes that cross nodes, hier(ring) against ring.
// Run: ctest -R hier_mpi_test --output-on-failure
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/algorithms/hier.h"
#include "comm/algorithms/ring.h"
#include "comm/forwarding_communicator.h"
#include "comm/testing/collective_testing.h"
#include "comm/testing/fake_communicator.h"
#include "comm/topology.h"

namespace dts {
namespace {

using namespace ::dts::testing;  // the shared test pieces: inputs, references, checks
constexpr Inputs kInputs{0x41E2};  // inputs only need to be reproducible

// Counts swept: 0 and 1 are the edges; 2 and 3 are below the shard count S at NP 4 on one node
// (no shard at all: everything goes the flat way); 7 is odd and divisible by no S in 2..4 (a
// leftover besides full shards); 1021 is prime (a leftover for every S > 1) and spans many of
// the inner ring's 256-byte chunks.
const std::vector<size_t> kCounts{0, 1, 2, 3, 7, 1021};
// Small chunks, so hier(ring(...)) runs the ring's pipeline over several chunks per shard.
constexpr size_t kTestChunkBytes = 256;

// A node layout: the node name of rank r of n.
struct Layout {
  const char* name;
  std::function<std::string(int rank, int n)> node;
};

const std::vector<Layout> kLayouts{
    {"one_node", [](int, int) { return std::string("a"); }},
    {"node_per_rank", [](int r, int) { return "n" + std::to_string(r); }},
    // NP 3: 2+1, NP 4: 2+2.
    {"pairs", [](int r, int) { return "n" + std::to_string(r / 2); }},
    // NP 3: 1+2, NP 4: 1+3.
    {"first_alone", [](int r, int) { return std::string(r == 0 ? "a" : "b"); }},
    // NP 3: 2+1, NP 4: 3+1.
    {"last_alone", [](int r, int n) { return std::string(r == n - 1 ? "b" : "a"); }},
    // Ranks of a node are not contiguous; the node named later alphabetically holds rank 0.
    // NP 3: {0,2}+{1}, NP 4: {0,2}+{1,3}.
    {"interleaved", [](int r, int) { return std::string(r % 2 == 0 ? "z" : "y"); }},
};

// What the layout implies, computed from the names alone.
struct Expected {
  int nodes = 0;
  int shards = 0;  // S: the fewest ranks on any node
};
Expected expected_for(const Layout& layout, int n) {
  std::map<std::string, int> ranks_on;
  for (int r = 0; r < n; ++r) ++ranks_on[layout.node(r, n)];
  Expected e;
  e.nodes = static_cast<int>(ranks_on.size());
  e.shards = n;
  for (const auto& [name, ranks] : ranks_on) e.shards = std::min(e.shards, ranks);
  return e;
}

// Builds `spec` with this rank's DTS_NODE set as the layout says, and unsets it afterwards so no
// other test sees it: the backend reads the name once, when it is made.
std::unique_ptr<Communicator> make_in_layout(const std::string& spec, const Layout& layout,
                                             const CommOptions& options = test_options(kTestChunkBytes)) {
  setenv("DTS_NODE", layout.node(world_rank(), world_size()).c_str(), 1);
  auto comm = make_communicator(spec, options);
  unsetenv("DTS_NODE");
  return comm;
}

class HierLayoutTest : public ::testing::TestWithParam<Layout> {
 protected:
  void SetUp() override {
    n_ = world_size();
    rank_ = world_rank();
    mpi_ = make_communicator("mpi", test_options(kTestChunkBytes));
  }
  std::unique_ptr<Communicator> mpi_;
  int n_ = 1;
  int rank_ = 0;
};

TEST_P(HierLayoutTest, FindsTheLayout) {
  auto comm = make_in_layout("hier(mpi)", GetParam());
  auto* hier = dynamic_cast<HierCommunicator*>(comm.get());
  ASSERT_NE(hier, nullptr);
  const Expected want = expected_for(GetParam(), n_);
  EXPECT_EQ(hier->backend(), "hier(mpi)");
  EXPECT_EQ(hier->nodes().nodes, want.nodes);
  EXPECT_EQ(hier->shards(), want.shards);
  EXPECT_EQ(hier->nodes().names[static_cast<size_t>(rank_)], GetParam().node(rank_, n_));
}

// Every dtype, op and count, both placements, over hier(mpi) and hier(ring(mpi)) (the phases on
// the ring's point-to-point code, not only MPI's collectives).
TEST_P(HierLayoutTest, AllReduceMatchesTheReference) {
  for (const char* spec : {"hier(mpi)", "hier(ring(mpi))"}) {
    SCOPED_TRACE(spec);
    auto hier = make_in_layout(spec, GetParam());
    for (const Case& c : reduction_cases(kCounts, 0)) {
      SCOPED_TRACE(case_name("all_reduce", c));
      expect_all_reduce_matches(*hier, kInputs, c);
    }
  }
}

// kLargeCount elements (4 MiB of f32): shards of about 4 MiB / S, far above MPI's eager limit, and
// a leftover for every S > 1 (2^20 + 3 is 1 mod 2 and mod 3, 3 mod 4).
TEST_P(HierLayoutTest, LargeBuffersMatchMpi) {
  auto hier = make_in_layout("hier(mpi)", GetParam());
  for (const Case& c : large_cases({DType::f32, DType::i64, DType::bf16})) {
    SCOPED_TRACE(std::string(name(c.dtype)) + "/" + std::string(name(c.op)));
    const std::vector<char> input = kInputs.make_input(c.dtype, c.op, n_, c.stream, rank_, c.count);
    const std::vector<char> by_mpi = expect_all_reduce_like(*hier, *mpi_, input, c);
    std::vector<char> in_place = input;
    hier->all_reduce(in_place.data(), in_place.data(), c.count, c.dtype, c.op);
    EXPECT_EQ(differences(c.dtype, in_place.data(), by_mpi.data(), c.count), "") << "in place vs mpi";
  }
}

// Random floats: the order of summation shows, but each shard is finished by one owner and
// handed out as is, so every rank must hold the same bits.
TEST_P(HierLayoutTest, EveryRankGetsTheSameBits) {
  auto hier = make_in_layout("hier(ring(mpi))", GetParam());
  const size_t count = 1021;  // prime: a leftover for every S > 1
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod}) {
      SCOPED_TRACE(std::string(name(dtype)) + "/" + std::string(name(op)));
      std::vector<char> data = inexact_input(kInputs, dtype, rank_, count);
      hier->all_reduce(data.data(), data.data(), count, dtype, op);
      expect_same_bits_on_every_rank(*mpi_, dtype, data, count);
    }
  }
}

// all_reduce_async runs the hierarchical all_reduce too (the Work is complete on return).
TEST_P(HierLayoutTest, AllReduceAsyncGivesTheReference) {
  auto hier = make_in_layout("hier(mpi)", GetParam());
  const size_t count = 1021;  // prime: shards and a leftover
  const uint64_t stream = 7000;
  std::vector<char> data = kInputs.make_input(DType::i32, ReduceOp::avg, n_, stream, rank_, count);
  auto work = hier->all_reduce_async(data.data(), data.data(), count, DType::i32, ReduceOp::avg);
  EXPECT_TRUE(work->test());
  work->wait(std::chrono::seconds(1));
  const std::vector<char> want = kInputs.reference_reduced(DType::i32, ReduceOp::avg, n_, stream, 0, count);
  EXPECT_EQ(differences(DType::i32, data.data(), want.data(), count), "");
}

// A group split from hier is hier over the inner group, with the nodes of its own members: the
// odd and the even world ranks, whose layouts differ from the world's.
TEST_P(HierLayoutTest, SplitIsHierOverTheInnerSplit) {
  auto comm = make_in_layout("hier(mpi)", GetParam());
  const int color = rank_ % 2;
  auto half = comm->split(color, rank_);
  ASSERT_NE(half, nullptr);
  expect_interleaved_half(*half, "hier(mpi)", rank_, n_);
  const std::vector<int> members = interleaved_members(color, n_);
  std::map<std::string, int> ranks_on;
  for (int r : members) ++ranks_on[GetParam().node(r, n_)];
  auto* hier = dynamic_cast<HierCommunicator*>(half.get());
  ASSERT_NE(hier, nullptr);
  EXPECT_EQ(hier->nodes().nodes, static_cast<int>(ranks_on.size())) << "nodes of the group's own members";

  const size_t count = 37;  // odd: shards and a leftover for S = 2
  expect_all_reduce_in_place(*half, kInputs, DType::i32, ReduceOp::sum, count, 5000, members);
}

// A ForwardingCommunicator that counts what is sent to ranks on other nodes: point-to-point bytes
// (the leaf under ring, where every byte an algorithm moves is a send) and library collectives
// over a group that spans nodes (whose wire bytes it cannot see; none are expected below).
struct CrossNodeTraffic {
  int64_t bytes = 0;
  int64_t opaque_collectives = 0;
};

class CrossNodeCounter final : public ForwardingCommunicator {
 public:
  // `world_rank_of[r]`: the world rank of rank r of `inner`; `node_of_world[w]`: its node's name.
  CrossNodeCounter(std::unique_ptr<Communicator> inner, std::vector<int> world_rank_of,
                   std::shared_ptr<const std::vector<std::string>> node_of_world,
                   std::shared_ptr<CrossNodeTraffic> traffic)
      : ForwardingCommunicator(std::move(inner), "count"),
        world_rank_of_(std::move(world_rank_of)),
        node_of_world_(std::move(node_of_world)),
        traffic_(std::move(traffic)) {
    for (int w : world_rank_of_) spans_nodes_ = spans_nodes_ || node(w) != node(world_rank_of_[0]);
  }

  void send(const void* in, size_t count, DType dtype, int peer) override {
    count_send(count, dtype, peer);
    inner_->send(in, count, dtype, peer);
  }
  std::unique_ptr<Work> isend(const void* in, size_t count, DType dtype, int peer) override {
    count_send(count, dtype, peer);
    return inner_->isend(in, count, dtype, peer);
  }
  void send_recv(const void* in, int send_peer, void* out, int recv_peer, size_t count, DType dtype) override {
    count_send(count, dtype, send_peer);
    inner_->send_recv(in, send_peer, out, recv_peer, count, dtype);
  }
  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override {
    count_collective();
    inner_->all_reduce(in, out, count, dtype, op);
  }
  void reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) override {
    count_collective();
    inner_->reduce_scatter(in, out, out_count, dtype, op);
  }
  void all_gather(const void* in, void* out, size_t in_count, DType dtype) override {
    count_collective();
    inner_->all_gather(in, out, in_count, dtype);
  }
  void broadcast(const void* in, void* out, size_t count, DType dtype, int root) override {
    count_collective();
    inner_->broadcast(in, out, count, dtype, root);
  }
  void reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) override {
    count_collective();
    inner_->reduce(in, out, count, dtype, op, root);
  }

 private:
  const std::string& node(int world) const { return (*node_of_world_)[static_cast<size_t>(world)]; }
  void count_send(size_t count, DType dtype, int peer) {
    if (node(world_rank_of_[static_cast<size_t>(peer)]) != node(world_rank_of_[static_cast<size_t>(rank())])) {
      traffic_->bytes += static_cast<int64_t>(count * size_of(dtype));
    }
  }
  void count_collective() {
    if (spans_nodes_) ++traffic_->opaque_collectives;
  }
  // The group's members' world ranks, gathered over the group (collective, as split is).
  std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator> group) override {
    const int mine = world_rank_of_[static_cast<size_t>(rank())];
    std::vector<int> members(static_cast<size_t>(group->size()));
    group->all_gather(&mine, members.data(), 1, DType::i32);
    return std::make_unique<CrossNodeCounter>(std::move(group), std::move(members), node_of_world_, traffic_);
  }

  std::vector<int> world_rank_of_;
  std::shared_ptr<const std::vector<std::string>> node_of_world_;
  std::shared_ptr<CrossNodeTraffic> traffic_;
  bool spans_nodes_ = false;
};

int64_t sum_over_ranks(Communicator& comm, int64_t mine) {
  int64_t total = 0;
  comm.all_reduce(&mine, &total, 1, DType::i64, ReduceOp::sum);
  return total;
}

// hier(ring) moves 2(k-1)/k of each shard across nodes once per shard owner: with k nodes, S
// shards of C/S and S*k owners, 2(k-1)*C elements in all, against the flat ring's 2(N-1)*C/N per
// rank whose next rank is on another node. Fewer whenever 1 < k < N or the ring crosses nodes
// more than k times; equal when every rank is its own node (k = N: the same ring).
TEST_P(HierLayoutTest, SendsLessAcrossNodesThanARing) {
  // 60 * 2^12 i32 (960 KiB): divisible by N and by S*k, so every segment below is whole and the
  // formulas exact (S*k <= N, and lcm(1..6) = 60 covers runs by hand up to 6 ranks); each
  // segment far above the eager limit.
  const size_t count = 60 * (size_t{1} << 12);
  constexpr int64_t kWidth = 4;  // i32
  const Layout& layout = GetParam();
  auto names = std::make_shared<std::vector<std::string>>();
  for (int r = 0; r < n_; ++r) names->push_back(layout.node(r, n_));
  std::vector<int> world(static_cast<size_t>(n_));
  for (int r = 0; r < n_; ++r) world[static_cast<size_t>(r)] = r;

  CommOptions options = test_options();  // the default pipeline, as a run would use
  options.node_name = layout.node(rank_, n_);  // the other way to name a node
  auto counted = [&](const std::shared_ptr<CrossNodeTraffic>& traffic) {
    return std::make_unique<CrossNodeCounter>(make_communicator("mpi", options), world, names, traffic);
  };
  auto hier_traffic = std::make_shared<CrossNodeTraffic>();
  auto ring_traffic = std::make_shared<CrossNodeTraffic>();
  HierCommunicator hier(std::make_unique<RingCommunicator>(counted(hier_traffic), options), options);
  RingCommunicator ring(counted(ring_traffic), options);
  EXPECT_EQ(hier.backend(), "hier(ring(count(mpi)))");
  *hier_traffic = {};  // node discovery and the splits are not the all_reduce's traffic

  std::vector<int32_t> data(count, 1), flat(count, 1);
  hier.all_reduce(data.data(), data.data(), count, DType::i32, ReduceOp::sum);
  ring.all_reduce(flat.data(), flat.data(), count, DType::i32, ReduceOp::sum);
  EXPECT_EQ(data, std::vector<int32_t>(count, n_)) << "all ones: N everywhere";
  EXPECT_EQ(flat, data);

  const Expected e = expected_for(layout, n_);
  const int64_t c = static_cast<int64_t>(count);
  const int64_t want_hier = 2 * (e.nodes - 1) * c * kWidth;
  int crossing_edges = 0;
  for (int r = 0; r < n_; ++r) {
    crossing_edges += layout.node(r, n_) != layout.node((r + 1) % n_, n_) ? 1 : 0;
  }
  const int64_t want_ring = crossing_edges * 2 * (n_ - 1) * (c / n_) * kWidth;
  const int64_t got_hier = sum_over_ranks(*mpi_, hier_traffic->bytes);
  const int64_t got_ring = sum_over_ranks(*mpi_, ring_traffic->bytes);
  EXPECT_EQ(got_hier, want_hier);
  EXPECT_EQ(got_ring, want_ring);
  EXPECT_EQ(sum_over_ranks(*mpi_, hier_traffic->opaque_collectives), 0) << "cross-node bytes hidden in a collective";
  if (e.nodes > 1 && e.nodes < n_) {
    EXPECT_LT(got_hier, got_ring);
  } else {
    EXPECT_EQ(got_hier, got_ring) << "one node (no crossing) or a node per rank (the same ring)";
  }
  if (rank_ == 0) {
    std::printf("[hier] N=%d %-13s nodes=%d S=%d: cross-node bytes for all_reduce of %zu i32: hier(ring) %lld, "
                "ring %lld\n",
                n_, layout.name, e.nodes, e.shards, count, static_cast<long long>(got_hier),
                static_cast<long long>(got_ring));
  }
}

std::string layout_name(const ::testing::TestParamInfo<Layout>& info) { return info.param.name; }
INSTANTIATE_TEST_SUITE_P(Layouts, HierLayoutTest, ::testing::ValuesIn(kLayouts), layout_name);

// ---------------------------------------------------------------------------------------------

// CommOptions::node_name is this process's node, whatever DTS_NODE says.
TEST(Hier, OptionsNodeNameBeatsTheEnvironment) {
  setenv("DTS_NODE", "from_environment", 1);
  CommOptions options = test_options(kTestChunkBytes);
  options.node_name = "opt" + std::to_string(world_rank() / 2);
  auto comm = make_communicator("hier(mpi)", options);
  unsetenv("DTS_NODE");
  const auto& nodes = dynamic_cast<HierCommunicator&>(*comm).nodes();
  EXPECT_EQ(nodes.names[static_cast<size_t>(world_rank())], options.node_name);
  EXPECT_EQ(nodes.nodes, (world_size() + 1) / 2);  // pairs: ceil(N/2) nodes
}

TEST(Hier, DescribesItselfAndDelegatesTheRest) {
  auto hier = make_communicator("hier(mpi)", test_options(kTestChunkBytes));
  auto mpi = make_communicator("mpi", test_options(kTestChunkBytes));
  const int n = hier->size(), rank = hier->rank();
  expect_describes_wrapper(*hier, *mpi, "hier");

  const size_t count = 9;  // any small odd count
  std::vector<int32_t> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = rank == 0 ? static_cast<int32_t>(i) : -1;
  hier->broadcast(data.data(), data.data(), count, DType::i32, 0);
  for (size_t i = 0; i < count; ++i) EXPECT_EQ(data[i], static_cast<int32_t>(i));
  int32_t total = 0;
  hier->reduce(&rank, &total, 1, DType::i32, ReduceOp::sum, 0);
  if (rank == 0) {
    EXPECT_EQ(total, n * (n - 1) / 2);  // 0 + 1 + ... + N-1
  }
  std::vector<int32_t> gathered(static_cast<size_t>(n), -1);
  hier->all_gather(&rank, gathered.data(), 1, DType::i32);
  for (int r = 0; r < n; ++r) EXPECT_EQ(gathered[static_cast<size_t>(r)], r);
  hier->barrier();
}

TEST(HierErrors, DeviceMemoryIsUnsupported) {
  HierCommunicator hier(std::make_unique<FakeCommunicator>("fake", Memory::device), CommOptions{});
  EXPECT_EQ(hier.backend(), "hier(fake)");
  float x = 1;
  expect_error(Error::Kind::unsupported, "all_reduce", [&] { hier.all_reduce(&x, &x, 1, DType::f32, ReduceOp::sum); });
}

TEST(HierErrors, NeedsExactlyOneInner) { expect_needs_exactly_one_inner<HierCommunicator>("hier"); }

}  // namespace
}  // namespace dts
