// End-to-end tests of `dtsuite run scaling`: inside one job of 3 ranks, every strategy that has a
// layout and all_reduce are timed on sub-worlds of 1, 2 and 3 ranks, in weak and strong mode; the
// rows say who took part, the mode, the node's cores and whether it was oversubscribed; a profile
// threshold on scaling_efficiency judges the rows it selects and nothing else.
//   ctest -R scaling_e2e_test
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <fstream>
#include <utility>

#include "harness/testing/e2e.h"
#include "results/csv_reader.h"
#include "results/record.h"

namespace {

namespace fs = std::filesystem;
using namespace dts::e2e;

// Few iterations: the rows' shape is tested here, not the machine's speed.
const std::string kQuick = "-n 3 -w 1 --layers 3 --width 16 --rank-batch 8";

std::string config(const dts::Record& r, const std::string& key) { return dts::config_value(r.labels.config, key).value_or(""); }

// One job of 3 ranks, every strategy and all_reduce, both modes; `device`: extra flags placing the
// run on a device (the same layouts, SKIPs and rows are expected there).
void every_sub_world_of_one_job(const std::string& device, const std::string& name) {
  const fs::path csv = scratch_dir() / (name + ".csv");
  const RunResult r = run_dtsuite(3, "run scaling " + device + " " + kQuick + " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // (target, mode) -> world sizes with an efficiency row
  std::map<std::pair<std::string, std::string>, std::set<int>> efficiency;
  int hybrid_skips = 0, server_skips = 0;
  std::map<std::pair<std::string, std::string>, std::set<int>> throughput;  // (strategy, mode) -> sizes
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.metric == "throughput") throughput[{row.labels.strategy, config(row, "mode")}].insert(row.labels.world_size);
    if (row.verdict == dts::Verdict::skip && row.labels.strategy.rfind("ps-", 0) == 0) {
      // A parameter server has no one-rank form: no T(1), said once per mode; ps-backup's b = 1
      // needs two workers, which 2 ranks do not have.
      if (row.labels.world_size == 2) {
        EXPECT_EQ(row.labels.strategy, "ps-backup");
        EXPECT_NE(row.detail.find("backup=1 needs more workers than that; 1 servers leave 1 on 2 ranks"),
                  std::string::npos)
            << row.detail;
      } else {
        EXPECT_EQ(row.labels.world_size, 1) << row.detail;
        EXPECT_NE(row.detail.find("a parameter server needs at least 2 ranks (a server and a worker); no reference T(1)"),
                  std::string::npos)
            << row.detail;
      }
      ++server_skips;
      continue;
    }
    if (row.verdict == dts::Verdict::skip) {
      // A size with no layout is said, not left out silently.
      EXPECT_EQ(row.labels.strategy, "hybrid") << row.detail;
      EXPECT_NE(row.detail.find("no layout of"), std::string::npos) << row.detail;
      // ... naming the cause: 2 and 3 ranks are primes, which hybrid cannot split two ways; the
      // batch (8 rows per rank) is not what stops it.
      EXPECT_NE(row.detail.find("hybrid needs at least 2 of dp, tp, pp above 1, and " +
                                std::to_string(row.labels.world_size) + " ranks (a prime) split one way only"),
                std::string::npos)
          << row.detail;
      EXPECT_EQ(row.detail.find("batch"), std::string::npos) << row.detail;
      ++hybrid_skips;
      continue;
    }
    EXPECT_NE(row.verdict, dts::Verdict::fail) << row.case_id << " " << row.detail;
    EXPECT_EQ(config(row, "job"), "3") << row.case_id;
    // Timed free-running (no barrier between steps) exactly where a rank may run ahead of a slow
    // one: the asynchronous servers with 2 workers, gossip from 3 ranks.
    const std::string& s = row.labels.strategy;
    const bool ahead = row.labels.world_size == 3 && (s == "ps-async" || s == "ps-ssp" || s == "ps-backup" || s == "gossip");
    EXPECT_EQ(config(row, "timing"), ahead ? "free-running" : "") << row.case_id << " " << row.labels.config;
    // 3 ranks: oversubscribed exactly when the node has fewer cores (it says which it has).
    const int cores = std::stoi(config(row, "cores"));
    EXPECT_GE(cores, 1);
    EXPECT_EQ(config(row, "oversubscribed"), cores < 3 ? "1" : "0") << row.labels.config;
    EXPECT_EQ(config(row, "node_ranks"), "3") << row.labels.config;  // the job's ranks on this node
    if (row.metric != "scaling_efficiency") continue;
    EXPECT_EQ(row.verdict, dts::Verdict::info);  // no profile: efficiency is reported, not judged
    EXPECT_TRUE(std::isfinite(row.value) && row.value > 0) << row.case_id << " " << row.value;
    if (cores < 3) {
      EXPECT_NE(row.detail.find("measures the machine, not the stack"), std::string::npos) << row.detail;
    }
    const std::string target = row.labels.op.empty() ? row.labels.strategy : row.labels.op;
    efficiency[{target, config(row, "mode")}].insert(row.labels.world_size);
    if (row.labels.world_size == (row.labels.op.empty() ? 1 : 2)) {
      EXPECT_EQ(row.value, 1) << row.case_id;  // the reference point is 1 by definition
    }
  }
  // Sub-worlds 1, 2 and 3 (3 is the job, not a power of two). ddp, zero1-3, gossip and tp have a layout
  // at each; gpipe and 1f1b too (3 layers allow 3 stages); hybrid needs two dimensions above 1,
  // which 2 and 3 ranks cannot give: its one-rank point only. all_reduce starts at 2 (its
  // reference) and runs in weak mode only.
  for (const char* strategy : {"ddp", "zero1", "zero2", "zero3", "tp", "gpipe", "1f1b", "gossip"}) {
    for (const char* mode : {"weak", "strong"}) {
      EXPECT_EQ(efficiency[std::make_pair(std::string(strategy), std::string(mode))], (std::set<int>{1, 2, 3})) << strategy << " " << mode;
    }
  }
  EXPECT_EQ(efficiency[std::make_pair(std::string("hybrid"), std::string("weak"))], (std::set<int>{1}));
  EXPECT_EQ(hybrid_skips, 4);  // n = 2 and 3, in both modes
  // Parameter servers: timed from 2 ranks (step time and throughput against W), no efficiency.
  EXPECT_EQ(server_skips, (4 + 1) * 2);  // n = 1 of ps-sync, ps-async, ps-ssp, ps-backup, n = 2 of ps-backup; both modes
  for (const char* strategy : {"ps-sync", "ps-async", "ps-ssp", "ps-backup"}) {
    for (const char* mode : {"weak", "strong"}) {
      const auto key = std::make_pair(std::string(strategy), std::string(mode));
      EXPECT_EQ(efficiency.count(key), 0u) << strategy;
      // ps-backup needs 2 workers: 3 ranks only.
      EXPECT_EQ(throughput[key], (std::string(strategy) == "ps-backup" ? std::set<int>{3} : std::set<int>{2, 3})) << strategy;
    }
  }
  EXPECT_EQ(efficiency[std::make_pair(std::string("all_reduce"), std::string("weak"))], (std::set<int>{2, 3}));
  EXPECT_EQ(efficiency.count(std::make_pair(std::string("all_reduce"), std::string("strong"))), 0u);
}

TEST(Scaling, EverySubWorldOfOneJobInBothModes) { every_sub_world_of_one_job("", "scaling"); }

// Every strategy on the device path (the emulated device through staged(mpi): device memory that
// host code reaches only through the kernel table and copies), with the host's layouts and rows.
TEST(Scaling, EverySubWorldOfOneJobOnTheDevice) {
  every_sub_world_of_one_job("--device emulated --backend 'staged(mpi)'", "scaling_device");
}

TEST(Scaling, StrongScalingKeepsTheGlobalBatchAndWeakScalingGrowsIt) {
  const fs::path csv = scratch_dir() / "batch.csv";
  const RunResult r = run_dtsuite(2, "run scaling --strategy ddp " + kQuick + " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int rows = 0;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.metric != "throughput" || row.labels.strategy != "ddp") continue;
    ++rows;
    const int n = row.labels.world_size;
    // --rank-batch 8 on a job of 2: weak n x 8 rows, strong 2 x 8 at every n.
    EXPECT_EQ(config(row, "batch"), std::to_string(config(row, "mode") == "weak" ? 8 * n : 16)) << row.labels.config;
    EXPECT_EQ(row.unit, "samples_per_second");
    // The model timed, as the flags gave it (3 layers of 16; the default 32 inputs, 10 classes).
    EXPECT_EQ(config(row, "layers") + "x" + config(row, "width") + "x" + config(row, "input") + "x" +
                  config(row, "classes"),
              "3x16x32x10")
        << row.labels.config;
  }
  EXPECT_EQ(rows, 4);  // 2 modes x n = 1, 2
}

TEST(Scaling, AProfileThresholdJudgesTheEfficiencyItSelects) {
  // An efficiency above 1e6 cannot happen (weak E(n) = T(1)/T(n) would need a step a million
  // times faster on more ranks): the selected rows must fail, the others stay info.
  const fs::path profile = scratch_dir() / "eff.toml";
  std::ofstream(profile) << R"([profile]
name = "eff"
[[threshold]]
metric = "scaling_efficiency"
strategy = "ddp"
config = "mode=weak"
min_world_size = 2
min = 1e6
source = "impossible on purpose: this test's threshold"
)";
  const fs::path csv = scratch_dir() / "judged.csv";
  const RunResult r = run_dtsuite(2, "run scaling --strategy ddp,tp " + kQuick + " --profile " + profile.string() +
                                         " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  int failed = 0;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.metric != "scaling_efficiency") continue;
    const bool selected = row.labels.strategy == "ddp" && config(row, "mode") == "weak" && row.labels.world_size >= 2;
    EXPECT_EQ(row.verdict, selected ? dts::Verdict::fail : dts::Verdict::info) << row.case_id << " " << row.labels.config;
    failed += selected;
  }
  EXPECT_EQ(failed, 1);  // ddp weak at n = 2
}

TEST(Scaling, ABadModeIsAUsageError) {
  const RunResult r = run_dtsuite(1, "run scaling --scaling-mode sideways");
  EXPECT_EQ(r.exit_code, 2);
  ASSERT_EQ(our_lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("unknown scaling mode 'sideways'"), std::string::npos) << r.err;
}

}  // namespace
