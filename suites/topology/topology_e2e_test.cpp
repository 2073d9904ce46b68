// End-to-end tests of `dtsuite run topology`: a matrix of every ordered pair of 4 ranks placed on
// two "nodes" (DTS_NODE per rank), each pair classed same-node or other-node; the link rows of
// the counted all_reduce; and a stack that corrupts point-to-point data fails the pairs of its
// victim.
//   ctest -R topology_e2e_test
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "harness/testing/e2e.h"
#include "results/csv_reader.h"
#include "results/record.h"

namespace {

namespace fs = std::filesystem;
using namespace dts::e2e;

std::string config(const dts::Record& r, const std::string& key) {
  return dts::config_value(r.labels.config, key).value_or("");
}

// 4 ranks, ranks 0-1 on node "n0" and 2-3 on "n1" (harness/testing/e2e.h).
RunResult run_on_two_nodes(const std::string& args) { return run_shell(two_node_command() + " " + args); }

const std::string kSmall = "-n 3 -w 1 --p2p-bytes 64K --link-bytes 256K";

TEST(Topology, EveryOrderedPairIsARowClassedByNode) {
  const fs::path csv = scratch_dir() / "matrix.csv";
  const RunResult r = run_on_two_nodes("run topology " + kSmall + " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  std::map<std::string, std::set<std::pair<int, int>>> pairs;  // direction -> (src, dst)
  int latency = 0;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    EXPECT_NE(row.verdict, dts::Verdict::fail) << row.case_id << " " << row.detail;
    if (row.metric != "p2p_bandwidth" && row.metric != "p2p_latency") continue;
    const int src = std::stoi(config(row, "src")), dst = std::stoi(config(row, "dst"));
    // Same node exactly when both ranks are in 0-1 or both in 2-3.
    EXPECT_EQ(config(row, "link"), src / 2 == dst / 2 ? "same-node" : "other-node") << row.labels.config;
    EXPECT_EQ(config(row, "src_node"), "n" + std::to_string(src / 2));
    EXPECT_TRUE(std::isfinite(row.value) && row.value > 0) << row.metric << " " << row.value;
    EXPECT_EQ(row.labels.world_size, 2);  // the pair took part
    if (row.metric == "p2p_latency") ++latency;
    else pairs[config(row, "direction")].insert({src, dst});
  }
  EXPECT_EQ(pairs["one-way"].size(), 12u);  // 4 x 3 ordered pairs
  EXPECT_EQ(pairs["both"].size(), 12u);
  EXPECT_EQ(latency, 12);
}

TEST(Topology, TheCountedCollectiveSaysWhatItsLinksCarried) {
  const fs::path csv = scratch_dir() / "link.csv";
  const RunResult r = run_on_two_nodes("run topology " + kSmall + " --link-speed 1gbit --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> nodes;
  int wire = 0;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.metric == "link_utilization" || row.metric == "busbw_utilization") {
      nodes.insert(config(row, "node"));
      EXPECT_EQ(config(row, "rated_bits_per_second"), "1e+09");  // --link-speed wins over the interface
      EXPECT_TRUE(std::isfinite(row.value) && row.value >= 0) << row.metric << " " << row.detail;
    }
    if (row.metric == "wire_bytes") ++wire;
  }
  EXPECT_EQ(nodes, (std::set<std::string>{"n0", "n1"}));  // one reader per node
  EXPECT_EQ(wire, 1);
}

TEST(Topology, CorruptedPointToPointDataFailsTheVictimsPairs) {
  const fs::path csv = scratch_dir() / "bitflip.csv";
  const RunResult r =
      run_on_two_nodes("run topology " + kSmall + " --backend 'faulty(bitflip,mpi)' --fault-rank 1 --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  std::set<std::string> failed;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.verdict == dts::Verdict::fail) failed.insert(row.case_id);
  }
  // Every pair with rank 1 (which receives flipped bits), no other pair, and the counted
  // all_reduce, whose result rank 1 then holds apart from the others.
  EXPECT_EQ(failed, (std::set<std::string>{"p2p/0-1", "p2p/1-2", "p2p/1-3", "link/all_reduce/262144"}));
}

// The matrix on device memory: staged(mpi) on the emulated device (ranks that share a GPU), the
// messages written and read back through copies only. The same pairs and rows, and the same
// fault caught: the victim's pairs and the counted all_reduce fail.
TEST(Topology, OnTheDeviceThroughStagedMpi) {
  const fs::path csv = scratch_dir() / "device.csv";
  const RunResult r = run_on_two_nodes("run topology " + kSmall + " --p2p-sweep 1K:4K --device emulated --backend "
                                       "'staged(mpi)' --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  int one_way = 0;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    EXPECT_NE(row.verdict, dts::Verdict::fail) << row.case_id << " " << row.detail;
    EXPECT_EQ(row.labels.device, "emulated");
    EXPECT_EQ(row.labels.backend, "staged(mpi)");
    if (row.metric == "p2p_bandwidth" && config(row, "direction") == "one-way" && config(row, "sweep").empty()) {
      EXPECT_TRUE(std::isfinite(row.value) && row.value > 0) << row.value;
      ++one_way;
    }
  }
  EXPECT_EQ(one_way, 12);  // 4 x 3 ordered pairs

  const fs::path faulty = scratch_dir() / "device_bitflip.csv";
  const RunResult f = run_on_two_nodes("run topology " + kSmall + " --device emulated --backend "
                                       "'staged(faulty(bitflip,mpi))' --fault-rank 1 --csv " + faulty.string());
  EXPECT_EQ(f.exit_code, 1) << f.err;
  std::set<std::string> failed;
  for (const dts::Record& row : dts::read_results_csv(faulty.string())) {
    if (row.verdict == dts::Verdict::fail) failed.insert(row.case_id);
  }
  EXPECT_EQ(failed, (std::set<std::string>{"p2p/0-1", "p2p/1-2", "p2p/1-3", "link/all_reduce/262144"}));
}

// --p2p-sweep: one-way rows at every size from MIN to MAX (x4) beside --p2p-bytes, each size and
// direction once per pair (the planner's line of the link); bad ranges are one line, exit 2.
TEST(Topology, ASweepTimesOneWayMessagesOfEverySize) {
  const fs::path csv = scratch_dir() / "sweep.csv";
  const RunResult r = run_dtsuite(2, "run topology " + kSmall + " --p2p-sweep 8:8K --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  std::map<int64_t, int> one_way;  // bytes -> rows
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.metric != "p2p_bandwidth" || config(row, "direction") != "one-way") continue;
    EXPECT_TRUE(std::isfinite(row.value) && row.value > 0) << row.labels.bytes;
    // The sweep's rows say so (the report's matrix leaves them out); the matrix's do not.
    EXPECT_EQ(config(row, "sweep"), row.labels.bytes == 65536 ? "" : "1") << row.labels.bytes;
    ++one_way[row.labels.bytes];
  }
  // 8, 32, 128, 512, 2K, 8K and the matrix's 64K, each direction of the one pair.
  EXPECT_EQ(one_way, (std::map<int64_t, int>{{8, 2}, {32, 2}, {128, 2}, {512, 2}, {2048, 2}, {8192, 2}, {65536, 2}}));
  // --quick caps the sweep at 256K as it caps --p2p-bytes, and says so in the preamble and on the
  // sweep's rows; MAX is timed even off the x4 steps (3K x4^4 = 768K: 3K, 12K, 48K, 192K, then 256K).
  const fs::path quick = scratch_dir() / "sweep-quick.csv";
  const RunResult q = run_dtsuite(2, "run topology --quick " + kSmall + " --p2p-sweep 3K:1M --csv " + quick.string());
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const std::string note = "--quick cut --p2p-sweep 3K:1M at 256K";
  EXPECT_NE(q.out.find("(" + note + ")"), std::string::npos) << q.out.substr(0, 2000);
  ASSERT_EQ(run_dtsuite(2, "run topology " + kSmall + " --p2p-sweep 1K:3K --csv " + csv.string()).exit_code, 0);
  for (const auto& [file, sizes, said] :
       {std::tuple{quick, std::set<int64_t>{3072, 12288, 49152, 196608, 262144}, note},
        std::tuple{csv, std::set<int64_t>{1024, 3072}, std::string()}}) {
    std::set<int64_t> swept;
    for (const dts::Record& row : dts::read_results_csv(file.string())) {
      if (config(row, "sweep") != "1") continue;
      swept.insert(row.labels.bytes);
      EXPECT_EQ(row.detail, said) << file << " " << row.labels.bytes;
    }
    EXPECT_EQ(swept, sizes) << file;
  }
  // A sweep wholly above the cap would sweep nothing: refused (errors_e2e_test.cpp has its line).
  EXPECT_EQ(run_dtsuite(2, "run topology --quick " + kSmall + " --p2p-sweep 1M:4M").exit_code, 2);
  for (const std::string bad : {"4K", "8K:1K", "0:4K", "x:4K", "''"}) {
    const RunResult b = run_dtsuite(2, "run topology " + kSmall + " --p2p-sweep " + bad);
    EXPECT_EQ(b.exit_code, 2) << bad << "\n" << b.err;
    EXPECT_EQ(our_lines(b.err).size(), 1u) << bad << "\n" << b.err;
  }
}

// The peers case (results/outliers.h): a rank whose every call is delayed (faulty(delay(2)) at
// rank 2 of 4 on one node) is named, with its node and the shortfall; no other rank is named,
// and a named pair has rank 2 at one end. 4 ranks on this machine's 2 CPUs: the floor is then a
// factor of 4 (10 in latency), which a delay of 2 ms a call passes by a factor of about 1000.
TEST(TopologyPeers, ADelayedRankIsNamedAndNoHealthyRankIs) {
  const fs::path csv = scratch_dir() / "delay.csv";
  const RunResult r =
      run_dtsuite(4, "run topology " + kSmall + " --backend 'faulty(delay(2),mpi)' --fault-rank 2 --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  std::set<std::string> named;  // "rank_bandwidth send 2" ...
  int judged = 0;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.case_id != "peers") continue;
    if (row.verdict == dts::Verdict::pass || row.verdict == dts::Verdict::fail) ++judged;
    if (row.verdict != dts::Verdict::fail) continue;
    if (row.metric == "pair_bandwidth" || row.metric == "pair_latency") {
      EXPECT_TRUE(config(row, "src") == "2" || config(row, "dst") == "2") << row.detail;
      continue;
    }
    named.insert(row.metric + " " + config(row, "figure") + " " + config(row, "rank"));
    EXPECT_NE(row.detail.find("the median of its 3 peers"), std::string::npos) << row.detail;
    EXPECT_NE(row.detail.find("rank 2 (node "), std::string::npos) << row.detail;
  }
  // Rank 2, in one of its figures at least (measured: in 2 or 3 of its 3 in each of 10 runs; a busy
  // machine widens the band, and the rule then says less), and nobody else.
  EXPECT_FALSE(named.empty()) << r.out;
  for (const std::string& n : named) EXPECT_EQ(n.back(), '2') << n;
  // 12 one-way, 6 both-ways and 6 latency pairs, and 4 ranks x 3 figures, all judged.
  EXPECT_EQ(judged, 12 + 6 + 6 + 12);
}

// Two nodes of two ranks (DTS_NODE): a rank has one peer on its node, so ranks are not judged;
// each node's sending is, against the other's cells; received needs three nodes. Four ranks on
// this machine's fewer CPUs: the detail says the floor is then a factor of 4.
TEST(TopologyPeers, TwoNodesAreJudgedAndTheirRanksSayWhyNot) {
  const fs::path csv = scratch_dir() / "peers-two-nodes.csv";
  const RunResult r = run_on_two_nodes("run topology " + kSmall + " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  std::set<std::string> node_figures;
  int unjudged_ranks = 0;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.metric == "node_bandwidth") {
      EXPECT_EQ(row.verdict, dts::Verdict::pass) << row.detail;
      EXPECT_TRUE(std::isfinite(row.threshold)) << row.detail;
      node_figures.insert(config(row, "node") + " " + config(row, "figure"));
    }
    if (row.metric == "rank_bandwidth" || row.metric == "rank_latency") {
      EXPECT_EQ(row.verdict, dts::Verdict::info) << row.detail;
      EXPECT_NE(row.detail.find("not judged against peers: 1 peer (the other ranks of node n"), std::string::npos)
          << row.detail;
      ++unjudged_ranks;
    }
  }
  EXPECT_EQ(node_figures, (std::set<std::string>{"n0 send", "n1 send"}));
  EXPECT_EQ(unjudged_ranks, 4 * 3 * 2);  // 4 ranks x (send, receive, latency) x (same-node, other-node)
}

}  // namespace
