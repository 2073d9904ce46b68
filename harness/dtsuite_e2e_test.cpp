// End-to-end tests of the dtsuite binary: launch it under mpirun as a user would, then read the
// CSV it wrote (with fast-cpp-csv-parser, as `compare` will) and the exit code. Covers the
// collectives suite at 1-4 ranks on mpi and ring(mpi), every fault kind of faulty(...) (FAIL, or
// timeout for hang), and the bad-input paths (one line on stderr, exit 2).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

// fast-cpp-csv-parser copies file names with strncpy, which GCC flags under -Wall.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-truncation"
#include <libfccp/csv.h>
#pragma GCC diagnostic pop

#include "harness/testing/e2e.h"

namespace {

namespace fs = std::filesystem;
using namespace dts::e2e;

// One CSV row, by column name. Parsed with fast-cpp-csv-parser from the header of SCHEMA.md.
using Row = std::map<std::string, std::string>;

const std::vector<std::string> kColumns{
    "schema_version", "run_id", "timestamp", "suite",  "case",      "backend",  "backend_version", "mpi_version",
    "device",         "host",   "world_size", "nodes", "ranks_per_node", "op", "dtype",           "bytes",
    "placement",      "strategy", "config",   "metric", "value",    "unit",     "n",               "min",
    "p05",            "median", "p95",        "max",    "verdict",  "threshold", "detail"};

std::vector<Row> read_csv(const fs::path& path) {
  io::CSVReader<31, io::trim_chars<>, io::double_quote_escape<',', '"'>> in(path.string());
  // The columns of schema 1 by name; later columns (schema 2's samples) are not read here.
  in.read_header(io::ignore_extra_column, kColumns[0], kColumns[1], kColumns[2], kColumns[3], kColumns[4], kColumns[5],
                 kColumns[6], kColumns[7], kColumns[8], kColumns[9], kColumns[10], kColumns[11], kColumns[12],
                 kColumns[13], kColumns[14], kColumns[15], kColumns[16], kColumns[17], kColumns[18], kColumns[19],
                 kColumns[20], kColumns[21], kColumns[22], kColumns[23], kColumns[24], kColumns[25], kColumns[26],
                 kColumns[27], kColumns[28], kColumns[29], kColumns[30]);
  std::vector<Row> rows;
  std::vector<std::string> v(31);
  while (in.read_row(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14],
                     v[15], v[16], v[17], v[18], v[19], v[20], v[21], v[22], v[23], v[24], v[25], v[26], v[27], v[28],
                     v[29], v[30])) {
    Row row;
    for (size_t i = 0; i < 31; ++i) row[kColumns[i]] = v[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// A sweep small enough for CI yet covering every collective, a float, a narrow float and an
// integer, two ops, the 0/1/1021-element extras and 8 B..4 KiB.
const std::string kSmallSweep = "-b 8 -e 4K -f 8 -d f32,bf16,i32 -o sum,avg -n 3 -w 1";

class CollectivesPass : public testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(CollectivesPass, EveryCaseChecksAndTimesAndTheCsvSaysSo) {
  const auto [np, backend] = GetParam();
  const fs::path csv = scratch_dir() / ("pass_" + std::to_string(np) + "_" + std::to_string(backend.size()) + ".csv");
  const RunResult r = run_dtsuite(np, "run collectives --backend '" + backend + "' " + kSmallSweep + " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 2000);
  EXPECT_NE(r.out.find("# Failed cases : 0"), std::string::npos);
  EXPECT_NE(r.out.find("# Avg bus bandwidth"), std::string::npos);

  // Header exactly as SCHEMA.md.
  std::string header;
  for (const auto& c : kColumns) header += (header.empty() ? "" : ",") + c;
  // Schema 2 appended samples, 3 the seed, 4 repetition, 5 mpi_config.
  EXPECT_EQ(first_line(csv), header + ",samples,seed,repetition,mpi_config");
  // Every row says the seed its inputs came from (--seed, default 1), its repetition (1: no
  // --repeat) and the MPI library's settings (none set here: the launcher's flags choose no
  // component, so the field is empty and the row ends with its comma).
  {
    std::ifstream in(csv);
    std::string line;
    std::getline(in, line);
    for (int i = 0; i < 3 && std::getline(in, line); ++i) {
      const size_t last = line.rfind(',');
      EXPECT_EQ(line.substr(line.rfind(',', line.rfind(',', last - 1) - 1)), ",1,1,") << line;
    }
  }

  const std::vector<Row> rows = read_csv(csv);
  std::set<std::string> cases, ops;
  std::map<std::string, int> metrics;
  for (const Row& row : rows) {
    cases.insert(row.at("case"));
    ops.insert(row.at("op"));
    ++metrics[row.at("metric")];
    // Stack identity on every row.
    EXPECT_EQ(row.at("backend"), backend);
    EXPECT_FALSE(row.at("mpi_version").empty());
    EXPECT_FALSE(row.at("host").empty());
    EXPECT_FALSE(row.at("device").empty());
    EXPECT_EQ(row.at("world_size"), std::to_string(np));
    EXPECT_EQ(row.at("schema_version"), "5");
    EXPECT_NE(row.at("verdict"), "fail") << row.at("case") << " " << row.at("detail");
    if (row.at("metric") == "wrong") {
      EXPECT_EQ(row.at("value"), "0") << row.at("detail");
    }
  }
  EXPECT_EQ(ops.size(), 7u);  // all seven collectives ran
  // Every case has both placements' five metrics: time, algbw, busbw, wrong, max_ulp.
  for (const char* m : {"time", "algbw", "busbw", "wrong", "max_ulp"}) {
    EXPECT_EQ(metrics[m], static_cast<int>(cases.size()) * 2) << m;
  }
  // busbw = algbw * factor: spot-check all_reduce rows, factor 2(n-1)/n.
  std::map<std::string, double> algbw;
  for (const Row& row : rows) {
    if (row.at("op") == "all_reduce" && row.at("metric") == "algbw") algbw[row.at("case") + row.at("placement")] = std::stod(row.at("value"));
  }
  for (const Row& row : rows) {
    if (row.at("op") != "all_reduce" || row.at("metric") != "busbw") continue;
    const double expected = algbw.at(row.at("case") + row.at("placement")) * 2.0 * (np - 1) / np;
    EXPECT_NEAR(std::stod(row.at("value")), expected, 1e-9 * (1 + expected));
  }
}

INSTANTIATE_TEST_SUITE_P(RanksAndBackends, CollectivesPass,
                         testing::Combine(testing::Values(1, 2, 3, 4), testing::Values("mpi", "ring(mpi)")));

// Each fault kind must make the suite FAIL: the checks exist to catch exactly these.
class FaultsAreCaught : public testing::TestWithParam<std::tuple<std::string, int, std::string>> {};

TEST_P(FaultsAreCaught, SuiteFailsAndNamesTheWrongElements) {
  const auto [kind, np, inner] = GetParam();
  const fs::path csv = scratch_dir() / ("fault_" + kind + std::to_string(np) + std::to_string(inner.size()) + ".csv");
  const RunResult r = run_dtsuite(
      np, "run collectives --backend 'faulty(" + kind + "," + inner + ")' " + kSmallSweep + " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::vector<Row> rows = read_csv(csv);
  std::set<std::string> failing_ops;
  for (const Row& row : rows) {
    if (row.at("metric") == "wrong" && row.at("verdict") == "fail") {
      failing_ops.insert(row.at("op"));
      EXPECT_NE(row.at("detail").find("first: rank"), std::string::npos) << row.at("detail");
    }
  }
  // Every collective is affected by every kind (cases with 0 elements have nothing to corrupt,
  // but each collective also runs non-empty sizes).
  EXPECT_EQ(failing_ops.size(), 7u) << kind;
  EXPECT_EQ(r.out.find("# Failed cases : 0"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Kinds, FaultsAreCaught,
                         testing::Values(std::make_tuple("bitflip", 3, "mpi"), std::make_tuple("drop", 3, "mpi"),
                                         std::make_tuple("stale", 3, "mpi"), std::make_tuple("bitflip", 1, "mpi"),
                                         std::make_tuple("drop", 1, "mpi"), std::make_tuple("stale", 1, "mpi"),
                                         std::make_tuple("drop", 4, "ring(mpi)")));

// ring(faulty(KIND,mpi)) builds the ring on faulty's isend/irecv, so the fault must reach the
// ring's own traffic: the victim's received chunks are corrupted and all_reduce fails.
TEST(FaultsUnderRing, BitflipInPointToPointFailsAllReduce) {
  const fs::path csv = scratch_dir() / "fault_under_ring.csv";
  const RunResult r = run_dtsuite(3, "run collectives --quick --backend 'ring(faulty(bitflip,mpi))' -o sum -d f32 "
                                     "--collective all_reduce --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  int failing = 0;
  for (const Row& row : read_csv(csv)) {
    EXPECT_EQ(row.at("op"), "all_reduce");
    if (row.at("metric") == "wrong" && row.at("verdict") == "fail") ++failing;
  }
  EXPECT_GT(failing, 0) << r.out.substr(0, 2000);
}

// The device path without a GPU: staged(mpi) on the emulated device, whose buffers host code can
// read only through copies. Every collective's check downloads its output first; one that read
// device memory in place would die here with SIGSEGV and say so (core/buffer_test.cpp).
class DeviceCollectives : public testing::TestWithParam<int> {};

TEST_P(DeviceCollectives, PassOnTheEmulatedDeviceThroughStagedMpi) {
  const int np = GetParam();
  const fs::path csv = scratch_dir() / ("staged_" + std::to_string(np) + ".csv");
  const RunResult r = run_dtsuite(np, "run collectives --device emulated --backend 'staged(mpi)' " + kSmallSweep +
                                          " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 2000);
  EXPECT_NE(r.out.find("# Failed cases : 0"), std::string::npos);
  std::set<std::string> ops;
  int checked = 0;
  for (const Row& row : read_csv(csv)) {
    ops.insert(row.at("op"));
    EXPECT_EQ(row.at("backend"), "staged(mpi)");
    EXPECT_EQ(row.at("device"), "emulated");
    EXPECT_NE(row.at("backend_version").find("staged through host memory"), std::string::npos);
    EXPECT_NE(row.at("verdict"), "fail") << row.at("case") << " " << row.at("detail");
    if (row.at("metric") == "wrong") {
      EXPECT_EQ(row.at("value"), "0") << row.at("detail");
      ++checked;
    }
  }
  EXPECT_EQ(ops.size(), 7u);
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceCollectives, testing::Values(1, 2, 3, 4));

// The data faults reach the device path through staged(faulty(KIND,mpi)), and the checks catch
// each on every collective.
class DeviceFaults : public testing::TestWithParam<std::string> {};

TEST_P(DeviceFaults, AreCaughtOnTheEmulatedDevice) {
  const std::string kind = GetParam();
  const fs::path csv = scratch_dir() / ("staged_fault_" + kind + ".csv");
  const RunResult r = run_dtsuite(3, "run collectives --device emulated --backend 'staged(faulty(" + kind +
                                         ",mpi))' " + kSmallSweep + " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  std::set<std::string> failing_ops;
  for (const Row& row : read_csv(csv)) {
    if (row.at("metric") == "wrong" && row.at("verdict") == "fail") failing_ops.insert(row.at("op"));
  }
  EXPECT_EQ(failing_ops.size(), 7u) << kind;
}

INSTANTIATE_TEST_SUITE_P(Kinds, DeviceFaults, testing::Values("bitflip", "drop", "stale"));

// staged(...) without --device takes CUDA memory: where no GPU answers, one line points at
// --device emulated (on a GPU runner it runs instead, and this test has nothing to see).
TEST(DeviceChoice, StagedWithoutAGpuNamesTheEmulatedDevice) {
  const RunResult r = run_dtsuite(2, "run -b 8 -e 8 -n 1 -w 0 --collective all_reduce --backend 'staged(mpi)'");
  if (r.exit_code == 0 && r.out.find("device cuda:") != std::string::npos) GTEST_SKIP() << "a CUDA device answers here";
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const auto ours = our_lines(r.err);
  ASSERT_EQ(ours.size(), 1u) << r.err;
  EXPECT_NE(ours[0].find("sees no CUDA device"), std::string::npos) << ours[0];
  EXPECT_NE(ours[0].find("--device emulated"), std::string::npos) << ours[0];
}

TEST(Hang, IsReportedWithinTheTimeoutNamingTheMissingRank) {
  const fs::path csv = scratch_dir() / "hang.csv";
  const auto start = std::chrono::steady_clock::now();
  // Rank 1 never enters; 4 KiB all_reduce so the others block inside the collective.
  const RunResult r = run_dtsuite(4, "run collectives --backend 'faulty(hang,mpi)' --fault-rank 1 -T 2 -b 4K -e 4K "
                                     "-d f32 -o sum --collective all_reduce,broadcast --csv " + csv.string());
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("dtsuite: timeout: case all_reduce/f32/sum/0 timed out after 2 s: ranks that did not arrive: 1"),
            std::string::npos)
      << r.err;
  // Reported after the 2 s timeout plus the watchdog's bounded wait for answers (3 s), not hung:
  // a generous ceiling that still fails if the watchdog never fires (the ctest timeout is 600 s).
  EXPECT_LT(took.count(), 60);
  const std::vector<Row> rows = read_csv(csv);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.back().at("verdict"), "timeout");
  EXPECT_EQ(rows.back().at("case"), "all_reduce/f32/sum/0");
}

TEST(Hang, RowsWrittenBeforeTheHangStay) {
  const fs::path csv = scratch_dir() / "hang_later.csv";
  // 2 ranks, all_reduce only, sizes 8 B..512 B plus extras: 7 cases of 2 placements x
  // (1 warm-up + 3 timed + 3 checks: exact, random, overflow) = 14 calls per case. Arming the hang
  // after 46 calls lets the first 3 cases finish (42 calls) and hangs inside the 4th.
  const RunResult r = run_dtsuite(2, "run collectives --backend 'faulty(hang,mpi)' --fault-after 46 -T 2 -b 8 -e 512 "
                                     "-f 4 -d f32 -o sum -n 3 -w 1 --collective all_reduce --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  const std::vector<Row> rows = read_csv(csv);
  // Each finished case wrote 2 placements x 5 metrics; then the timeout row.
  ASSERT_EQ(rows.size(), 3u * 10 + 1) << r.out;
  EXPECT_EQ(rows.back().at("verdict"), "timeout");
  for (size_t i = 0; i + 1 < rows.size(); ++i) EXPECT_NE(rows[i].at("verdict"), "fail");
}

TEST(Durability, SigkillLeavesEveryFinishedRowReadable) {
  const fs::path csv = scratch_dir() / "killed.csv";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string out = (scratch_dir() / "killed.out").string();
    freopen(out.c_str(), "w", stdout);
    execl(DTS_BINARY, DTS_BINARY, "run", "collectives", "-b", "8", "-e", "64M", "-f", "2", "--csv", csv.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait for rows to appear, then kill without warning.
  const size_t lines = wait_for_lines(csv, 200, std::chrono::seconds(30));
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_GE(lines, 200u) << "the run wrote too little before it was killed";
  // Every row that reached the file is whole: the parser reads all of them, none truncated.
  const std::string text = read_file(csv);
  ASSERT_EQ(text.back(), '\n');
  const std::vector<Row> rows = read_csv(csv);
  EXPECT_EQ(rows.size() + 1, static_cast<size_t>(std::count(text.begin(), text.end(), '\n')));
}

// A small model and few steps so the whole matrix (world sizes 1..3, f32/f64/bf16, sgd and adamw)
// runs in seconds.
const std::string kSmallTraining = "--steps 3 --batch 23 --layers 3 --width 12 --input 7 --classes 5";

TEST(Equivalence, DdpMatchesTheReferenceAtEveryWorldSize) {
  const fs::path csv = scratch_dir() / "equivalence.csv";
  const RunResult r = run_dtsuite(3, "run equivalence --strategy ddp " + kSmallTraining + " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  std::map<std::string, int> passed;
  for (const Row& row : read_csv(csv)) {
    EXPECT_NE(row.at("verdict"), "fail") << row.at("case") << " " << row.at("metric") << " " << row.at("detail");
    if (row.at("verdict") == "pass") ++passed[row.at("metric")];
    EXPECT_EQ(row.at("strategy"), "ddp");
  }
  // 3 world sizes x 3 precisions x 2 optimizers, each judged on error, reproducibility and replicas.
  EXPECT_EQ(passed["max_abs_error"], 18);
  EXPECT_EQ(passed["error_bound_ratio"], 18);
  EXPECT_EQ(passed["reproducible"], 18);
  EXPECT_EQ(passed["check"], 18);
}

// -d is the equivalence suite's precision list too: it ran f32, f64 and bf16 whatever -d said.
TEST(Equivalence, DatatypeFlagSelectsThePrecisions) {
  for (const auto& [flag, expected] : {std::pair<std::string, std::set<std::string>>{"-d f32", {"f32"}},
                                       {"-d bf16,f64", {"bf16", "f64"}},
                                       {"-d all", {"f32", "f64", "bf16"}},
                                       {"", {"f32", "f64", "bf16"}}}) {
    const fs::path csv = scratch_dir() / "precisions.csv";
    const RunResult r = run_dtsuite(0, "run equivalence --strategy ddp --optimizer sgd " + kSmallTraining + " " + flag +
                                           " --csv " + csv.string());
    ASSERT_EQ(r.exit_code, 0) << flag << ": " << r.err;
    std::set<std::string> dtypes;
    for (const Row& row : read_csv(csv)) dtypes.insert(row.at("dtype"));
    EXPECT_EQ(dtypes, expected) << flag;
  }
  // With collectives in the run, each suite takes what it can of one -d: i32 is the collectives'.
  const fs::path csv = scratch_dir() / "both.csv";
  const RunResult r = run_dtsuite(0, "run collectives equivalence --strategy ddp --optimizer sgd " + kSmallTraining +
                                         " -d f32,i32 --collective all_reduce -o sum -b 8 -e 8 --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::pair<std::string, std::string>> taken;
  for (const Row& row : read_csv(csv)) taken.emplace(row.at("suite"), row.at("dtype"));
  EXPECT_EQ(taken, (std::set<std::pair<std::string, std::string>>{
                       {"collectives", "f32"}, {"collectives", "i32"}, {"equivalence", "f32"}}));
}

TEST(Equivalence, BytesSentMeasuredOverRingMatchesTheory) {
  // Over ring(mpi) every byte passes the leaf backend's point-to-point counter, so bytes_sent is
  // measured and judged against 2 Psi (N-1)/N (ddp, zero1, zero2) or 3 Psi (N-1)/N (zero3), and
  // each parameter-server role's own count.
  const fs::path csv = scratch_dir() / "equivalence_bytes.csv";
  const RunResult r = run_dtsuite(3, "run equivalence --backend 'ring(mpi)' " + kSmallTraining + " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  int judged = 0, received = 0;
  for (const Row& row : read_csv(csv)) {
    if (row.at("metric") != "bytes_sent" && row.at("metric") != "bytes_received") continue;
    EXPECT_EQ(row.at("verdict"), "pass") << row.at("case") << " " << row.at("metric") << " " << row.at("detail");
    ++(row.at("metric") == "bytes_sent" ? judged : received);
  }
  EXPECT_EQ(received, judged);  // what arrives, judged wherever what is sent is
  // Layouts on 1..3 ranks: ddp, zero1-3 at dp 1..3 (12), tp at 1..3, gpipe and 1f1b at pp 1..3 (9;
  // hybrid has none below 4 ranks); ps-sync, ps-async and ps-ssp at every split into S servers and
  // 3 - S or 2 - S workers (3 each), ps-backup with its 2 workers on 3 ranks (1), gossip on 1..3
  // ranks (3); each in 3 precisions x 2 optimizers. A parameter server's measured traffic is
  // judged by role: a worker's gradient to its servers, a server's W replies; a gossip rank's by
  // its neighbours (one below 3 ranks, two from 3).
  EXPECT_EQ(judged, (12 + 9 + 3 * 3 + 1 + 3) * 3 * 2);
}

// A dropped rank breaks the gradient (max_abs_error past its bound); a flipped low bit hides
// under the rounding bound but splits the replicas.
class EquivalenceFaults : public testing::TestWithParam<std::pair<std::string, std::string>> {};

// The world-size-3 cases of an equivalence CSV, and those of them that fail on `metric`.
std::pair<std::set<std::string>, std::set<std::string>> world3_cases_caught(const fs::path& csv,
                                                                            const std::string& metric) {
  std::set<std::string> cases, caught;
  for (const Row& row : read_csv(csv)) {
    const std::string& id = row.at("case");
    if (row.at("world_size") != "3") continue;
    cases.insert(id);
    if (row.at("verdict") == "fail" && row.at("metric") == metric) caught.insert(id);
  }
  return {cases, caught};
}

TEST_P(EquivalenceFaults, AreCaught) {
  const auto& [kind, metric] = GetParam();
  const fs::path csv = scratch_dir() / ("equivalence_" + kind + ".csv");
  const RunResult r = run_dtsuite(3, "run equivalence --strategy ddp --backend 'faulty(" + kind + ",mpi)' " +
                                         kSmallTraining + " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  // The fault hits the last rank, so every world-size-3 case (f32, f64 and bf16 compute, sgd and
  // adamw) must fail on the metric that exists to catch it.
  const auto [dp3_cases, caught] = world3_cases_caught(csv, metric);
  EXPECT_EQ(dp3_cases.size(), 6u);  // 3 precisions x 2 optimizers
  EXPECT_EQ(caught, dp3_cases) << kind;
}

INSTANTIATE_TEST_SUITE_P(Kinds, EquivalenceFaults,
                         testing::Values(std::make_pair(std::string("drop"), std::string("max_abs_error")),
                                         std::make_pair(std::string("bitflip"), std::string("check"))));

// The f32 and bf16 cases of an equivalence CSV on the emulated device whose replica check
// passed, and the strategies they ran; expects every row on the emulated device, none failed and
// no SKIP but f64's, which says why.
std::pair<std::set<std::string>, std::set<std::string>> device_cases_passed(const fs::path& csv) {
  std::set<std::string> passed, strategies;
  for (const Row& row : read_csv(csv)) {
    EXPECT_EQ(row.at("device"), "emulated");
    EXPECT_NE(row.at("verdict"), "fail") << row.at("case") << " " << row.at("detail");
    if (row.at("dtype") != "f64") {
      EXPECT_NE(row.at("verdict"), "skip") << row.at("case") << " " << row.at("detail");
      if (row.at("metric") == "check" && row.at("verdict") == "pass") passed.insert(row.at("case"));
      strategies.insert(row.at("strategy"));
    } else if (row.at("verdict") == "skip") {
      EXPECT_NE(row.at("detail").find("on the device computes in f32 and bf16"), std::string::npos) << row.at("detail");
    }
  }
  return {passed, strategies};
}

// ddp, zero1-3 and gossip on the device path without a GPU: the emulated device's kernel table
// (kernels/cpu behind device pointers) and staged(mpi), at every world size, in f32 and bf16
// compute, against the same CPU reference (gossip from 2 ranks: against its replay of every rank,
// run on the device's table). f64 SKIPs on the device (its kernels are f32), saying so.
class DeviceEquivalence : public testing::TestWithParam<int> {};

TEST_P(DeviceEquivalence, DataParallelStrategiesMatchTheReference) {
  const int np = GetParam();
  const fs::path csv = scratch_dir() / ("device_equivalence_" + std::to_string(np) + ".csv");
  const RunResult r = run_dtsuite(np, "run equivalence --device emulated --backend 'staged(mpi)' --strategy "
                                      "ddp,zero1,zero2,zero3,gossip " + kSmallTraining + " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 2000);
  const auto [passed, strategies] = device_cases_passed(csv);
  EXPECT_EQ(strategies, (std::set<std::string>{"ddp", "zero1", "zero2", "zero3", "gossip"}));
  // 5 strategies (one layout each per world size: dp = N) x 2 precisions (f32, bf16) x 2
  // optimizers x each world size 1..np of the sweep.
  EXPECT_EQ(passed.size(), 20u * static_cast<size_t>(np));
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceEquivalence, testing::Values(1, 2, 3, 4));

// tp, gpipe, 1f1b and hybrid on the device path, as DeviceEquivalence: parameters, gradients,
// optimizer state, activations, tp all_reduce buffers and pipeline sends and receives all in the
// emulated device's memory (a host read of any of them would end the run), over staged(mpi).
class DeviceModelParallel : public testing::TestWithParam<int> {};

TEST_P(DeviceModelParallel, ModelParallelStrategiesMatchTheReference) {
  const int np = GetParam();
  // hybrid needs two dimensions above 1: no layout below 4 ranks, where naming it is an error.
  const std::string names = np == 4 ? "tp,gpipe,1f1b,hybrid" : "tp,gpipe,1f1b";
  const fs::path csv = scratch_dir() / ("device_model_parallel_" + std::to_string(np) + ".csv");
  const RunResult r = run_dtsuite(np, "run equivalence --device emulated --backend 'staged(mpi)' --strategy " + names +
                                          " " + kSmallTraining + " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 2000);
  const auto [passed, strategies] = device_cases_passed(csv);
  std::set<std::string> expected{"tp", "gpipe", "1f1b"};
  if (np == 4) expected.insert("hybrid");
  EXPECT_EQ(strategies, expected);
  // Per layout 2 precisions (f32, bf16) x 2 optimizers; layouts over world sizes 1..np: tp one
  // each (tpN), gpipe and 1f1b one each up to the model's 3 layers (ppN), hybrid 5 at 4 ranks
  // (dp1-tp2-pp2, dp2-tp1-pp2, dp2-tp2-pp1, the last two also with ZeRO-1).
  const size_t layouts = static_cast<size_t>(np + 2 * std::min(np, 3) + (np == 4 ? 5 : 0));
  EXPECT_EQ(passed.size(), 4u * layouts);
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceModelParallel, testing::Values(1, 2, 3, 4));

// And each data fault on the last rank, through tp's all_reduces and the pipelines' sends and
// receives on the device: a dropped contribution breaks the gradient (max_abs_error), a flipped
// low bit hides under the rounding bound but splits the tp group's all_reduce results or a
// pipeline link's two ends (check).
TEST_P(EquivalenceFaults, ModelParallelAreCaughtOnTheEmulatedDevice) {
  const auto& [kind, metric] = GetParam();
  const fs::path csv = scratch_dir() / ("device_model_parallel_" + kind + ".csv");
  const RunResult r = run_dtsuite(3, "run equivalence --device emulated --strategy tp,gpipe,1f1b -d f32 --backend "
                                     "'staged(faulty(" + kind + ",mpi))' " + kSmallTraining + " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto [cases, caught] = world3_cases_caught(csv, metric);
  EXPECT_EQ(cases.size(), 6u);  // tp3, gpipe and 1f1b at pp3, sgd and adamw
  EXPECT_EQ(caught, cases) << kind;
}

// --straggler on the device: the straggler's wait is the device's own (a delay through the kernel
// table, the host's wait on the emulated device), the layouts that have it still match the
// reference, and equivalence measures the slowdown it caused (a timing: reported, not judged).
TEST(DeviceStraggler, LayoutsWithTheStragglerMatchAndReportItsSlowdown) {
  const fs::path csv = scratch_dir() / "device_straggler.csv";
  const RunResult r = run_dtsuite(3, "run equivalence --device emulated --backend 'staged(mpi)' --strategy ddp,zero3 "
                                     "-d f32 --optimizer sgd --straggler 2:3 " + kSmallTraining + " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 2000);
  std::set<std::string> slowed;
  for (const Row& row : read_csv(csv)) {
    EXPECT_TRUE(row.at("verdict") == "pass" || row.at("verdict") == "info") << row.at("case") << " " << row.at("detail");
    const bool has = row.at("config").find(";straggler=2:3") != std::string::npos;
    EXPECT_EQ(has, row.at("case").find("dp3") != std::string::npos) << row.at("case") << " " << row.at("config");
    if (row.at("metric") != "straggler_slowdown") continue;
    EXPECT_TRUE(has) << row.at("case");
    EXPECT_TRUE(std::isfinite(std::stod(row.at("value")))) << row.at("detail");
    EXPECT_NE(row.at("detail").find("rank 2's compute per step"), std::string::npos) << row.at("detail");
    EXPECT_NE(row.at("detail").find("over its 2 peers' median"), std::string::npos) << row.at("detail");
    slowed.insert(row.at("strategy"));
  }
  EXPECT_EQ(slowed, (std::set<std::string>{"ddp", "zero3"}));  // one row per dp3 case
}

// The equivalence checks catch each data fault on the device path too: staged(faulty(KIND,mpi))
// corrupts what the device strategies' collectives carry, on the last rank.
TEST_P(EquivalenceFaults, AreCaughtOnTheEmulatedDevice) {
  const auto& [kind, metric] = GetParam();
  const fs::path csv = scratch_dir() / ("device_equivalence_" + kind + ".csv");
  const RunResult r = run_dtsuite(3, "run equivalence --device emulated --strategy ddp,zero3 -d f32 --backend "
                                     "'staged(faulty(" + kind + ",mpi))' " + kSmallTraining + " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto [dp3_cases, caught] = world3_cases_caught(csv, metric);
  EXPECT_EQ(dp3_cases.size(), 4u);  // ddp and zero3, sgd and adamw
  EXPECT_EQ(caught, dp3_cases) << kind;
}

// Gossip on the device: a model corrupted or lost on its way to a neighbour (staged(faulty(KIND,
// mpi)), on the last rank) changes what the ranks hold, and the replay of every rank on the
// device's table no longer matches them bit for bit.
class DeviceGossipFaults : public testing::TestWithParam<std::string> {};

TEST_P(DeviceGossipFaults, FailTheReplayAudit) {
  const std::string kind = GetParam();
  const fs::path csv = scratch_dir() / ("device_gossip_" + kind + ".csv");
  const RunResult r = run_dtsuite(3, "run equivalence --device emulated --strategy gossip -d f32 --backend "
                                     "'staged(faulty(" + kind + ",mpi))' " + kSmallTraining + " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto [dp3_cases, caught] = world3_cases_caught(csv, "replay_audit");
  EXPECT_EQ(dp3_cases.size(), 2u);  // sgd and adamw
  EXPECT_EQ(caught, dp3_cases) << kind;
}

INSTANTIATE_TEST_SUITE_P(Kinds, DeviceGossipFaults, testing::Values("drop", "bitflip"));

// The parameter servers on the device path without a GPU: ps-sync, ps-async, ps-ssp and ps-backup
// on the emulated device over staged(mpi) (workers' and servers' tensors, headers included, in
// device memory), at every world size, in f32 and bf16 compute, against the same CPU reference,
// and each run's replay audit (rank 0 replays the servers' logs on its device memory with the same
// kernels) passing. f64 SKIPs on the device, saying so. A strategy named with no layout on the
// ranks is refused as on the host: every mode on one rank (no server and worker), ps-backup on two
// (its b = 1 needs two workers), so ps-backup joins from 3 ranks.
class DeviceParameterServers : public testing::TestWithParam<int> {};

TEST_P(DeviceParameterServers, MatchTheReferenceAndPassTheReplayAudit) {
  const int np = GetParam();
  const fs::path csv = scratch_dir() / ("device_parameter_servers_" + std::to_string(np) + ".csv");
  const std::string modes = np >= 3 ? "ps-sync,ps-async,ps-ssp,ps-backup" : "ps-sync,ps-async,ps-ssp";
  const RunResult r = run_dtsuite(np, "run equivalence --device emulated --backend 'staged(mpi)' --strategy " + modes +
                                          " " + kSmallTraining + " --csv " + csv.string());
  if (np == 1) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("a parameter server needs at least 2 ranks"), std::string::npos) << r.err;
    return;
  }
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 2000);
  std::set<std::string> passed, audited, strategies;
  for (const Row& row : read_csv(csv)) {
    EXPECT_EQ(row.at("device"), "emulated");
    EXPECT_NE(row.at("verdict"), "fail") << row.at("case") << " " << row.at("metric") << " " << row.at("detail");
    if (row.at("dtype") != "f64") {
      EXPECT_NE(row.at("verdict"), "skip") << row.at("case") << " " << row.at("detail");
      if (row.at("metric") == "check" && row.at("verdict") == "pass") passed.insert(row.at("case"));
      if (row.at("metric") == "replay_audit" && row.at("verdict") == "pass") audited.insert(row.at("case"));
      strategies.insert(row.at("strategy"));
    } else if (row.at("verdict") == "skip") {
      EXPECT_NE(row.at("detail").find("on the device computes in f32 and bf16"), std::string::npos) << row.at("detail");
    }
  }
  std::set<std::string> named{"ps-sync", "ps-async", "ps-ssp"};
  if (np >= 3) named.insert("ps-backup");
  EXPECT_EQ(strategies, named);
  // Layouts on n = 1..np ranks: ps-sync, ps-async and ps-ssp at every split into S >= 1 servers
  // and W = n - S >= 1 workers (n - 1 each), ps-backup (b = 1) at every split with W >= 2 (n - 2
  // each from 3 ranks): 3 np(np-1)/2 + (np-1)(np-2)/2 layouts (3, 10, 21 at 2, 3, 4 ranks), each
  // in 2 precisions (f32, bf16) x 2 optimizers: 12, 40, 84 cases.
  const auto n = static_cast<size_t>(np);
  const size_t layouts = 3 * n * (n - 1) / 2 + (n - 1) * (n - 2) / 2;
  EXPECT_EQ(passed.size(), 4 * layouts);
  EXPECT_EQ(audited, passed);  // every case's replay matched its servers bit for bit
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceParameterServers, testing::Values(1, 2, 3, 4));

struct BadInput {
  int np;
  std::string args;
  std::string message;  // expected in the one stderr line
};

class BadInputs : public testing::TestWithParam<BadInput> {};

TEST_P(BadInputs, OneLineOnStderrAndExitTwo) {
  const BadInput& b = GetParam();
  const RunResult r = run_dtsuite(b.np, b.args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  // Our own line: exactly one, from rank 0 only (mpirun may add its own banner after it).
  const auto ours = our_lines(r.err);
  for (const std::string& line : ours) EXPECT_NE(line.find(b.message), std::string::npos) << line;
  EXPECT_EQ(ours.size(), 1u) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Flags, BadInputs,
    testing::Values(BadInput{0, "run --bogus", "--bogus"}, BadInput{2, "run --bogus", "--bogus"},
                    BadInput{0, "run -d f33", "unknown dtype 'f33'"}, BadInput{0, "run -o mean", "unknown reduction op"},
                    BadInput{0, "run -b 1X", "bad size '1X'"}, BadInput{0, "run -b 1M -e 1K", "larger than"},
                    BadInput{0, "run -f 0.5", "stepfactor"}, BadInput{0, "run -n 0", "iters"},
                    BadInput{0, "run --collective allreduce", "unknown collective"},
                    BadInput{0, "run --device tpu", "device"}, BadInput{0, "frobnicate", "frobnicate"},
                    BadInput{0, "", "no command"}, BadInput{2, "run -r 5", "-r 5 is not a rank"},
                    BadInput{2, "run --backend nope -e 8", "unknown backend 'nope'"},
                    BadInput{2, "run --backend 'ring(' -e 8", "bad backend spec"},
                    BadInput{0, "run --backend 'faulty(melt,mpi)' -e 8", "melt"},
                    BadInput{0, "run nosuite", "unknown suite 'nosuite'"},
                    BadInput{2, "run -e 8 --csv /proc/version/x.csv", "/proc/version/x.csv"}));

// The training suites' lists: a repeated item would run (and write) its cases twice, which compare
// then refuses to join, so it is refused as -d f32,f32 is; an unknown optimizer names each one once.
INSTANTIATE_TEST_SUITE_P(
    TrainingFlags, BadInputs,
    testing::Values(BadInput{0, "run equivalence --strategy ddp,ddp", "bad strategy list 'ddp,ddp': 'ddp' twice"},
                    BadInput{2, "run equivalence --strategy zero1,ddp,zero1", "'zero1' twice"},
                    BadInput{0, "run equivalence --strategy 'hybrid(dp=2,tp=2),hybrid(tp=2,dp=2)'", "twice"},
                    BadInput{0, "run equivalence --strategy \"$(printf 'dd\\np')\"", "unknown strategy 'dd\\np'"},
                    BadInput{0, "run equivalence --optimizer lion", "--optimizer: 'lion' is not one of sgd, adamw ("},
                    BadInput{0, "run equivalence --optimizer sgd,sgd", "'sgd' twice"},
                    BadInput{0, "run equivalence --optimizer sgd,", "empty item"}));

// -d names what a suite of the run takes: nothing asked for is dropped in silence.
INSTANTIATE_TEST_SUITE_P(
    Datatypes, BadInputs,
    testing::Values(BadInput{0, "run equivalence -d i32", "-d i32 names no precision the equivalence suite trains in"},
                    BadInput{0, "run collectives equivalence -d i32 -e 8", "-d i32 names no precision"},
                    BadInput{0, "run equivalence -d f32,f16", "-d names f16, which no suite of this run takes"},
                    BadInput{0, "run scaling -d f32", "-d f32: only the collectives and equivalence suites read -d"},
                    BadInput{0, "run topology convergence -d f64", "neither is in this run"}));

// A device the backend cannot use is a usage error before any case: --device cuda (or emulated) of
// a host backend names staged(...), and emulated under nccl-like backends is refused.
INSTANTIATE_TEST_SUITE_P(
    Devices, BadInputs,
    testing::Values(BadInput{2, "run -b 8 -e 8 --device cuda", "--device cuda needs a device backend: nccl (one GPU per rank) or staged(mpi)"},
                    BadInput{0, "run -b 8 -e 8 --device emulated --backend 'ring(mpi)'", "or staged(ring(mpi))"},
                    BadInput{0, "run -b 8 -e 8 --device cpu --backend 'staged(mpi)'", "takes device memory"},
                    BadInput{0, "run -b 8 -e 8 --backend 'staged(staged(mpi))'", "staged(mpi) takes device memory itself"},
                    BadInput{0, "run -b 8 -e 8 --backend 'staged(mpi,mpi)'", "exactly one argument"}));

// --metrics-address is read strictly at parse time: civetweb took 999.1.1.1 as 231.1.1.1 (exit 0)
// and failed on a malformed one with "null context when constructing CivetServer".
INSTANTIATE_TEST_SUITE_P(
    MetricsAddress, BadInputs,
    testing::Values(BadInput{0, "run -b 8 -e 8 -n 1 -w 0 --metrics-address 999.1.1.1", "--metrics-address: '999.1.1.1' is not an IPv4 or IPv6 address"},
                    BadInput{0, "run -b 8 -e 8 -n 1 -w 0 --metrics-address 256.0.0.1", "'256.0.0.1' is not an IPv4"},
                    BadInput{0, "run -b 8 -e 8 -n 1 -w 0 --metrics-address 1.2.3", "'1.2.3' is not an IPv4"},
                    BadInput{0, "run -b 8 -e 8 -n 1 -w 0 --metrics-address 1.2.3.4.5", "'1.2.3.4.5' is not an IPv4"},
                    BadInput{0, "run -b 8 -e 8 -n 1 -w 0 --metrics-address 1.2.3.-4", "'1.2.3.-4' is not an IPv4"},
                    BadInput{0, "run -b 8 -e 8 -n 1 -w 0 --metrics-address 0x7f.0.0.1", "'0x7f.0.0.1' is not an IPv4"},
                    BadInput{0, "run -b 8 -e 8 -n 1 -w 0 --metrics-address localhost", "'localhost' is not an IPv4"},
                    BadInput{0, "run -b 8 -e 8 -n 1 -w 0 --metrics-address ::1::2", "'::1::2' is not an IPv4"},
                    BadInput{0, "run -b 8 -e 8 -n 1 -w 0 --metrics-address '[::1'", "'[::1' is not an IPv4"},
                    BadInput{0, "run -b 8 -e 8 -n 1 -w 0 --metrics-address '[1.2.3.4]'", "'[1.2.3.4]' is not an IPv4"},
                    BadInput{0, "run -b 8 -e 8 -n 1 -w 0 --metrics-address ''", "'' is not an IPv4"},
                    BadInput{0, "run -b 8 -e 8 -n 1 -w 0 --metrics-address \"$(printf '1.2.3.4\\n5')\"", "'1.2.3.4\\n5' is not an IPv4"}));

// Addresses of both families pass the parse (port 0: nothing is served, so no interface is needed).
TEST(MetricsAddress, WellFormedAddressesAreTaken) {
  for (const std::string address : {"127.0.0.1", "0.0.0.0", "255.255.255.255", "::", "::1", "[::]", "[::1]", "fe80::1"}) {
    const RunResult r = run_dtsuite(0, "run --collective all_reduce -d f32 -o sum -b 8 -e 8 -n 1 -w 0 --metrics-port 0 "
                                       "--metrics-address '" + address + "' --csv " +
                                           (scratch_dir() / "address.csv").string());
    EXPECT_EQ(r.exit_code, 0) << address << ": " << r.err;
  }
}

// Outputs that would destroy something are refused at set-up, before any row: one line, exit 2.
// 2 ranks: the refusal is rank 0's, and every rank must leave with it.
constexpr int kOutputRanks = 2;
const std::string kOneCase = "collectives --collective all_reduce -d f32 -o sum -b 8 -e 8 -n 1 -w 0";

class SpecialFileOutput : public testing::TestWithParam<std::string> {};

TEST_P(SpecialFileOutput, IsRefusedAndLeftAsItWas) {
  // A FIFO stands in for /dev/null: writing would block on it, --prom's rename would replace it.
  const fs::path fifo = scratch_dir() / ("fifo" + GetParam());
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const fs::path csv = scratch_dir() / ("beside_fifo" + GetParam() + ".csv");
  const std::string csv_flag = GetParam() == "--csv" ? "" : " --csv " + csv.string();
  const RunResult r = run_dtsuite(kOutputRanks, "run " + kOneCase + csv_flag + " " + GetParam() + " " + fifo.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const auto ours = our_lines(r.err);
  ASSERT_EQ(ours.size(), 1u) << r.err;
  EXPECT_NE(ours[0].find(GetParam() + " '" + fifo.string() + "' is a FIFO"), std::string::npos) << ours[0];
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_FALSE(fs::exists(csv));  // the check comes before any sink opens its file
}

INSTANTIATE_TEST_SUITE_P(Flags, SpecialFileOutput, testing::Values("--csv", "--junit", "--prom"),
                         [](const testing::TestParamInfo<std::string>& flag) { return flag.param.substr(2); });

TEST(Outputs, OneFileForTwoOutputsIsRefusedWithNothingWritten) {
  const fs::path shared = scratch_dir() / "shared_output";
  fs::remove(shared);
  // Two spellings of one path: ./ must not hide it.
  const RunResult r = run_dtsuite(kOutputRanks, "run " + kOneCase + " --csv " + shared.string() + " --prom " +
                                                    (shared.parent_path() / "." / shared.filename()).string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const auto ours = our_lines(r.err);
  ASSERT_EQ(ours.size(), 1u) << r.err;
  EXPECT_NE(ours[0].find("is the same file as --csv"), std::string::npos) << ours[0];
  EXPECT_FALSE(fs::exists(shared));
}

// A fresh folder of the scratch folder for one case of the tests below.
fs::path fresh_folder(const std::string& name) {
  const fs::path dir = scratch_dir() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// One output aliased to another through a link, dangling or not, a ".." after a linked folder, a
// hard link, or a loop of links: one line naming both flags, exit 2, and no file written (before,
// `ln -s p.prom q.csv; run --csv q.csv --prom p.prom` exited 0 with the CSV's rows gone).
TEST(Outputs, AliasesThroughLinksAreRefusedWithNothingWritten) {
  struct Alias {
    std::string name, flags, expected;
  };
  const fs::path d = fresh_folder("aliases");
  fs::create_symlink("p.prom", d / "q.csv");  // dangling until p.prom is written
  fs::create_directories(d / "s4");
  fs::create_symlink("../s4/j.xml", d / "s4" / "q.csv");  // read from s4/: s4/j.xml
  fs::create_directories(d / "other" / "deep");
  fs::create_symlink(d / "other" / "deep", d / "sub");  // sub/../j.xml is other/j.xml
  std::ofstream(d / "kept.csv") << "kept\n";
  fs::create_hard_link(d / "kept.csv", d / "kept.prom");
  fs::create_symlink("loop_b", d / "loop_a");
  fs::create_symlink("loop_a", d / "loop_b");
  const std::string p = d.string() + "/";
  for (const Alias& alias : {
           Alias{"link", " --csv " + p + "q.csv --prom " + p + "p.prom",
                 "--prom '" + p + "p.prom' is the same file as --csv '" + p + "q.csv'"},
           Alias{"dotdot", " --junit " + p + "s4/j.xml --csv " + p + "s4/q.csv",
                 "--junit '" + p + "s4/j.xml' is the same file as --csv '" + p + "s4/q.csv'"},
           Alias{"linked folder", " --junit " + p + "other/j.xml --csv " + p + "sub/../j.xml",
                 "--junit '" + p + "other/j.xml' is the same file as --csv '" + p + "sub/../j.xml'"},
           Alias{"hard link", " --csv " + p + "kept.csv --prom " + p + "kept.prom",
                 "--prom '" + p + "kept.prom' is the same file as --csv '" + p + "kept.csv'"},
           Alias{"loop", " --csv " + p + "loop_a", "--csv '" + p + "loop_a': Too many levels of symbolic links"}}) {
    const RunResult r = run_dtsuite(kOutputRanks, "run " + kOneCase + alias.flags);
    EXPECT_EQ(r.exit_code, 2) << alias.name << ": " << r.err;
    const auto ours = our_lines(r.err);
    ASSERT_EQ(ours.size(), 1u) << alias.name << ": " << r.err;
    EXPECT_NE(ours[0].find(alias.expected), std::string::npos) << alias.name << ": " << ours[0];
    EXPECT_EQ(r.out.find("all_reduce"), std::string::npos) << alias.name << ": no case ran\n" << r.out;
  }
  for (const char* never_written : {"p.prom", "s4/j.xml", "other/j.xml", "j.xml"}) {
    EXPECT_FALSE(fs::exists(d / never_written)) << never_written;
  }
  EXPECT_EQ(read_file(d / "kept.csv"), "kept\n");
}

// Every command with outputs compares them by the file they resolve to: an output linked to an
// input, or to another output (dangling), is refused before anything is read or written.
TEST(Outputs, EveryCommandRefusesAnOutputLinkedToAnotherFile) {
  const fs::path d = fresh_folder("command_aliases");
  const std::string p = d.string() + "/";
  std::ofstream(d / "in.csv") << "an input\n";
  std::ofstream(d / "current.csv") << "another input\n";
  fs::create_symlink("in.csv", d / "to_input");
  fs::create_symlink("first.out", d / "to_first");  // dangling: first.out is an output not yet written
  fs::create_directories(d / "rounds");
  for (const auto& [command, expected] : {
           std::pair{"report " + p + "in.csv -o " + p + "to_input", "-o '" + p + "to_input' is the same file as"},
           std::pair{"compare " + p + "in.csv " + p + "current.csv --report " + p + "to_input",
                     "--report '" + p + "to_input' is the same file as"},
           std::pair{"compare " + p + "in.csv " + p + "current.csv --csv " + p + "first.out --junit " + p + "to_first",
                     "--junit '" + p + "to_first' is the same file as --csv '" + p + "first.out'"},
           std::pair{"plan --measurements " + p + "in.csv --ranks 4 --csv " + p + "to_input",
                     "--csv '" + p + "to_input' is the same file as --measurements"},
           std::pair{"ab --out " + p + "rounds --csv " + p + "first.out --report " + p + "to_first",
                     "--report '" + p + "to_first' is the same file as --csv '" + p + "first.out'"}}) {
    const RunResult r = run_dtsuite(0, command);
    EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.err;
    const auto ours = our_lines(r.err);
    ASSERT_EQ(ours.size(), 1u) << command << "\n" << r.err;
    EXPECT_NE(ours[0].find(expected), std::string::npos) << ours[0];
  }
  EXPECT_EQ(read_file(d / "in.csv"), "an input\n");
  EXPECT_FALSE(fs::exists(d / "first.out"));
}

TEST(Commands, ListVersionAndHelpExitZero) {
  RunResult r = run_dtsuite(0, "list");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* expected : {"collectives", "ring(INNER)", "faulty(KIND,INNER)", "mpi", "bf16"}) {
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected;
  }
  r = run_dtsuite(0, "--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.rfind("dtsuite ", 0), 0u);
  r = run_dtsuite(0, "run --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--minbytes"), std::string::npos);
}

}  // namespace
