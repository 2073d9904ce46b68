// End-to-end tests of `dtsuite run hardware`: every rank's figures, all at once and one at a time,
// with their spread; a rank made slow (--straggler) named, and more often than the others; and
// the ranks below the rule's peer count left unjudged. Run alone (RUN_SERIAL): a test beside it
// would share the cores and memory it measures.
//   ctest -R hardware_e2e_test
#include <gtest/gtest.h>
#include <sched.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "harness/testing/e2e.h"
#include "results/csv_reader.h"
#include "results/record.h"

namespace {

namespace fs = std::filesystem;
using namespace dts::e2e;

std::string config(const dts::Record& r, const std::string& key) {
  return dts::config_value(r.labels.config, key).value_or("");
}

const std::string kQuick = "run hardware --quick -n 5 -w 1";

// Whether 4 ranks outnumber this machine's CPUs (the concurrent rows are then not judged).
bool crowded() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < 4;
}

std::vector<dts::Record> hardware_rows(const fs::path& csv) {
  std::vector<dts::Record> rows;
  for (dts::Record& r : dts::read_results_csv(csv.string())) {
    if (r.suite == "hardware") rows.push_back(std::move(r));
  }
  return rows;
}

TEST(Hardware, EveryRankEveryFigureBothModesWithItsSpread) {
  const fs::path csv = scratch_dir() / "four.csv";
  const RunResult r = run_dtsuite(4, kQuick + " --csv " + csv.string());
  // A healthy run names no rank unless something slowed one for real: on a shared machine a
  // neighbour's work can (once, in a CI run here, a triad 40% below its peers with the rule's
  // bound 1% above it). So a named row is allowed, and held to what naming means; that the rule
  // names none of unchanged runs is counted over 10 runs (README, The hardware suite), and that it
  // names a slow rank is AStragglerIsNamedMoreOftenThanTheOthers below.
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err << r.out;
  int named = 0;
  std::map<std::string, std::set<int>> ranks_by_case;
  for (const dts::Record& row : hardware_rows(csv)) {
    ranks_by_case[row.case_id].insert(std::stoi(config(row, "rank")));
    EXPECT_EQ(row.stats.n, 5);
    EXPECT_TRUE(row.stats.min <= row.value && row.value <= row.stats.max);
    EXPECT_GT(row.value, 0);
    if (config(row, "mode") == "concurrent" && crowded()) {
      // More ranks than CPUs: at once, the scheduler's doing is not the part's.
      EXPECT_EQ(row.verdict, dts::Verdict::info) << row.detail;
      EXPECT_NE(row.detail.find("ranks share"), std::string::npos) << row.detail;
      continue;
    }
    if (row.verdict == dts::Verdict::fail) {
      ++named;
      EXPECT_LT(row.value, row.threshold) << row.detail;  // named: below the bound
      EXPECT_NE(row.detail.find("below the median of its 3 peers"), std::string::npos) << row.detail;
    } else {
      EXPECT_EQ(row.verdict, dts::Verdict::pass) << row.case_id << " " << row.detail;
      EXPECT_LT(row.threshold, row.value);  // the bound it would be named below
    }
    EXPECT_EQ(row.unit, row.metric == "matmul_throughput" ? "flop_per_second" : "bytes_per_second");
  }
  if (named > 0) std::printf("note: %d figure(s) of a healthy run named; the machine is shared\n", named);
  EXPECT_EQ(r.exit_code, named > 0 ? 1 : 0);  // a named figure, and nothing else, fails the run
  const std::set<int> all{0, 1, 2, 3};
  ASSERT_EQ(ranks_by_case.size(), 6u);
  // An acceptance run starts with the inventory: a row per rank, and its one passing check.
  int ranks = 0, checks = 0;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.suite != "inventory") continue;
    if (row.metric == "rank_info") ++ranks;
    if (row.metric != "check") continue;
    ++checks;
    EXPECT_EQ(row.verdict, dts::Verdict::pass) << row.detail;
  }
  EXPECT_EQ(ranks, 4);
  EXPECT_EQ(checks, 1);  // {sgemm, dgemm, triad} x {concurrent, alone}
  for (const char* id : {"gemm/f32/concurrent", "gemm/f64/concurrent", "triad/f64/concurrent", "gemm/f32/alone",
                         "gemm/f64/alone", "triad/f64/alone"}) {
    EXPECT_EQ(ranks_by_case[id], all) << id;
  }
}

TEST(Hardware, AStragglerIsNamedMoreOftenThanTheOthers) {
  const fs::path csv = scratch_dir() / "straggler.csv";
  // Rank 2 takes 8 times as long per call: 88% short of its peers. Every judged figure shows it
  // short; the rule names it where that is past the run's noise, which on a busy shared machine
  // can reach most of a figure (measured here: the band's noise up to 0.87 of the peers' median,
  // median 0.15), so the test asks for one figure named, not every one.
  const RunResult r = run_dtsuite(4, "run hardware --quick -n 10 -w 1 --straggler 2:8 --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  int judged = 0, named = 0, others_named = 0;
  for (const dts::Record& row : hardware_rows(csv)) {
    const int rank = std::stoi(config(row, "rank"));
    if (config(row, "mode") == "concurrent" && crowded()) {
      EXPECT_EQ(row.verdict, dts::Verdict::info);
      continue;
    }
    if (rank == 2) {
      ++judged;
      EXPECT_NE(row.detail.find("rank 2 (node "), std::string::npos) << row.detail;
      EXPECT_NE(row.detail.find("below the median of its 3 peers"), std::string::npos) << row.detail;
      EXPECT_EQ(config(row, "straggler"), "2:8");
      if (row.verdict == dts::Verdict::fail) {
        ++named;
        EXPECT_LT(row.value, row.threshold);
      } else {
        EXPECT_EQ(row.verdict, dts::Verdict::pass) << row.detail;
      }
    } else if (row.verdict == dts::Verdict::fail) {
      ++others_named;  // a healthy rank a neighbour's work slowed (see the test above)
      EXPECT_LT(row.value, row.threshold) << row.detail;
    } else {
      EXPECT_EQ(row.verdict, dts::Verdict::pass) << rank << " " << row.case_id << " " << row.detail;
    }
  }
  EXPECT_EQ(judged, crowded() ? 3 : 6);
  EXPECT_GE(named, 1);
  EXPECT_GT(named, others_named);  // the straggler stands out: named more often than the rest together
  EXPECT_NE(r.out.find("[fail] rank 2 (node "), std::string::npos);  // the console says it too
}

TEST(Hardware, FewerThanThreeRanksAreMeasuredNotJudged) {
  for (int np : {1, 2}) {
    const fs::path csv = scratch_dir() / ("np" + std::to_string(np) + ".csv");
    const RunResult r = run_dtsuite(np, kQuick + " --csv " + csv.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    size_t rows = 0;
    for (const dts::Record& row : hardware_rows(csv)) {
      ++rows;
      EXPECT_EQ(row.verdict, dts::Verdict::info);
      EXPECT_NE(row.detail.find("not judged against peers"), std::string::npos) << row.detail;
      EXPECT_TRUE(std::isnan(row.threshold));
    }
    EXPECT_EQ(rows, 6u * static_cast<size_t>(np));
  }
}

TEST(Hardware, BadSizesAreOneLineAndExitTwo) {
  // The flags are checked before MPI starts (one rank shows it); the straggler's rank at plan, on 3.
  for (const char* bad : {"--gemm-size 0", "--gemm-size 70000", "--triad-bytes 8", "--straggler 9:2"}) {
    const RunResult r = run_dtsuite(std::string(bad).rfind("--straggler", 0) == 0 ? 3 : 1,
                                    "run hardware --quick " + std::string(bad));
    EXPECT_EQ(r.exit_code, 2) << bad << r.err;
    const auto lines = our_lines(r.err);
    EXPECT_EQ(lines.size(), 1u) << bad << r.err;
  }
}

}  // namespace
