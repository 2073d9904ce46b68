// End-to-end tests of how a run ends when a case cannot: an error on some ranks while the others
// wait inside a call (faulty(error,...)), on one rank, on a sub-world and on every rank, at 3 and 4
// ranks; SIGINT/SIGTERM to a rank; and a launch by another MPI library's launcher. -T 600 in every run: if the harness left the job to the
// watchdog, the run would report a timeout, which these tests refuse (and ctest's limit is lower).
//   ctest -R errors_e2e_test
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "harness/testing/e2e.h"
#include "results/csv_reader.h"
#include "results/record.h"

namespace {

namespace fs = std::filesystem;
using namespace dts::e2e;

// The first line of dtsuite's own on stderr that starts with `prefix`, or "".
std::string line_starting(const std::string& err, const std::string& prefix) {
  for (const std::string& line : our_lines(err)) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

class ErrorOnSomeRanks : public ::testing::TestWithParam<int> {
 protected:
  int np() const { return GetParam(); }
};

// One rank's call throws; the others wait inside the same collective for it. The case's row is a
// FAIL naming the error and where the others are, every row before it is kept, exit 1.
TEST_P(ErrorOnSomeRanks, OneRankEndsTheCaseAndTheJob) {
  const fs::path csv = scratch_dir() / ("one" + std::to_string(np()) + ".csv");
  // --fault-after 30: the first cases (0 and 1 element, several calls each) run clean, so rows
  // measured before the error exist and must survive it.
  const RunResult r = run_dtsuite(np(), "run collectives --collective all_reduce -d f32 -o sum -b 1K -e 4K -n 2 -w 1 "
                                        "-T 600 --backend 'faulty(error,mpi)' --fault-rank 1 --fault-after 30 --csv " +
                                            csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string line = line_starting(r.err, "dtsuite: error in case ");
  EXPECT_NE(line.find("rank 1: faulty(error): the stack reported an error on rank 1"), std::string::npos) << r.err;
  EXPECT_NE(line.find("the job stops"), std::string::npos) << line;
  EXPECT_EQ(line_starting(r.err, "dtsuite: timeout"), "") << r.err;
  const auto rows = dts::read_results_csv(csv.string());
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows.back().verdict, dts::Verdict::fail);
  EXPECT_EQ(rows.back().metric, "check");
  EXPECT_NE(rows.back().detail.find("ranks still in it: rank 0 in "), std::string::npos) << rows.back().detail;
  size_t passed = 0;
  for (const auto& row : rows) passed += row.verdict == dts::Verdict::pass ? 1 : 0;
  EXPECT_GT(passed, 0u) << "the cases before the error lost their rows";
}

// The error on a sub-world: equivalence runs ddp on 1, 2, ... ranks; the victim (rank 1) is a
// member from 2 ranks on, while the ranks outside the sub-world wait to verify. The one-rank cases
// pass, the first two-rank case fails with the error and a world size of 2.
TEST_P(ErrorOnSomeRanks, OnASubWorld) {
  const fs::path csv = scratch_dir() / ("sub" + std::to_string(np()) + ".csv");
  const RunResult r = run_dtsuite(np(), "run equivalence --strategy ddp -T 600 --backend 'faulty(error,mpi)' "
                                        "--fault-rank 1 --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(line_starting(r.err, "dtsuite: timeout"), "") << r.err;
  const auto rows = dts::read_results_csv(csv.string());
  ASSERT_FALSE(rows.empty());
  const dts::Record& last = rows.back();
  EXPECT_EQ(last.verdict, dts::Verdict::fail);
  EXPECT_EQ(last.labels.world_size, 2) << last.case_id;
  EXPECT_NE(last.detail.find("rank 1: faulty(error)"), std::string::npos) << last.detail;
  for (size_t i = 0; i + 1 < rows.size(); ++i) {
    EXPECT_EQ(rows[i].labels.world_size, 1) << rows[i].case_id;
    EXPECT_NE(rows[i].verdict, dts::Verdict::fail) << rows[i].case_id << ": " << rows[i].detail;
  }
}

// Every rank's call throws: the ranks agree at once, each case is a FAIL row and the run goes on
// to its end (every case has its row), exit 1.
TEST_P(ErrorOnSomeRanks, OnEveryRankTheRunGoesOn) {
  const fs::path csv = scratch_dir() / ("all" + std::to_string(np()) + ".csv");
  const RunResult r = run_dtsuite(np(), "run collectives --collective all_reduce,all_gather -d f32,i32 -o sum -b 1K "
                                        "-e 1K -T 600 --backend 'faulty(error(all),mpi)' --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(line_starting(r.err, "dtsuite: error in case"), "") << r.err;
  const auto rows = dts::read_results_csv(csv.string());
  // 2 collectives x 2 dtypes x 4 counts (0, 1, 1021 and 1K's) = 16 cases, out of and in place in
  // one case; each case's only row is its check.
  ASSERT_EQ(rows.size(), 16u) << r.out;
  for (const auto& row : rows) {
    EXPECT_EQ(row.verdict, dts::Verdict::fail) << row.case_id;
    EXPECT_NE(row.detail.find("faulty(error(all))"), std::string::npos) << row.detail;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ErrorOnSomeRanks, ::testing::Values(3, 4),
                         [](const auto& param) { return "np" + std::to_string(param.param); });

// SIGINT and SIGTERM to rank 0 (as a batch system or a terminal's process group sends them): the
// running case's row says it was interrupted, the rows before it stay, the sinks are closed, and
// the exit code is 128 + the signal's number, not 1 (a case failed).
class Interrupted : public ::testing::TestWithParam<int> {};

TEST_P(Interrupted, KeepsTheRowsAndExitsWithTheSignal) {
  const int signal = GetParam();
  const fs::path csv = scratch_dir() / ("signal" + std::to_string(signal) + ".csv");
  const fs::path junit = scratch_dir() / ("signal" + std::to_string(signal) + ".xml");
  const fs::path err = scratch_dir() / ("signal" + std::to_string(signal) + ".err");
  fs::remove(scratch_dir() / "rank0.pid");
  // Up to 64 MiB on 4 ranks: far longer than the moment it takes to see the first rows.
  const std::string command = two_node_command() + " run collectives -d f32 -o sum -e 64M -T 600 --csv " +
                              csv.string() + " --junit " + junit.string() + " >/dev/null 2>" + err.string();
  const pid_t child = start_shell(command);
  ASSERT_GE(child, 0);
  wait_for_lines(csv, 20);
  const std::string pid_text = read_file(scratch_dir() / "rank0.pid");
  ASSERT_FALSE(pid_text.empty());
  kill(static_cast<pid_t>(std::stol(pid_text)), signal);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + signal) << read_file(err);
  const std::string name = signal == SIGINT ? "SIGINT" : "SIGTERM";
  EXPECT_NE(line_starting(read_file(err), "dtsuite: interrupted by " + name), "") << read_file(err);
  const auto rows = dts::read_results_csv(csv.string());
  ASSERT_GE(rows.size(), 20u);  // what was measured before the signal is kept
  EXPECT_EQ(rows.back().verdict, dts::Verdict::skip);
  EXPECT_NE(rows.back().detail.find("interrupted by " + name), std::string::npos) << rows.back().detail;
  // The JUnit file was closed: its document ends.
  EXPECT_NE(read_file(junit).find("</testsuites>"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Signals, Interrupted, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& param) { return param.param == SIGINT ? "SIGINT" : "SIGTERM"; });

// Started by another MPI library's launcher (or with its variables), each rank is a job of one
// rank: N jobs that measure nothing between ranks and write the same outputs. The run refuses
// with one line from the launcher's rank 0 and exit 2, and writes nothing.
TEST(LauncherMismatch, NJobsOfOneRankAreRefused) {
  const fs::path csv = scratch_dir() / "launcher_mismatch.csv";
  fs::remove(csv);
  const std::string run = std::string(DTS_BINARY) +
                          " run collectives --collective all_reduce -d f32 -o sum -b 8 -e 8 -n 2 -T 600 --csv " + csv.string();
  for (const std::string vars : {"PMI_SIZE=3 PMI_RANK=0", "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0"}) {
    const RunResult r = run_shell("env " + vars + " " + run);
    EXPECT_EQ(r.exit_code, 2) << vars << ": " << r.err;
    const auto ours = our_lines(r.err);
    ASSERT_EQ(ours.size(), 1u) << vars << ": " << r.err;
    EXPECT_NE(ours[0].find("the launcher started " + vars.substr(vars.find('=') + 1, 1) + " ranks (" +
                           vars.substr(0, vars.find(' ')) + ") but MPI sees a world of 1"),
              std::string::npos)
        << ours[0];
    EXPECT_FALSE(fs::exists(csv));
  }
  // The launcher's other ranks end the same way, silently.
  RunResult r = run_shell("env PMI_SIZE=3 PMI_RANK=1 " + run);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(our_lines(r.err).empty()) << r.err;
  // A launch as it happens: MPICH's mpiexec (Hydra) starting a build against another MPI.
  const fs::path hydra = "/usr/bin/mpiexec.mpich";
  std::error_code error;
  if (::access(hydra.c_str(), X_OK) != 0 || fs::canonical(hydra, error) == fs::canonical(DTS_MPIEXEC, error)) {
    GTEST_SKIP() << "needs MPICH's mpiexec beside a build against another MPI";
  }
  r = run_shell(hydra.string() + " -n 2 " + run);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const auto ours = our_lines(r.err);
  ASSERT_EQ(ours.size(), 1u) << r.err;
  EXPECT_NE(ours[0].find("the launcher started 2 ranks (PMI_SIZE=2) but MPI sees a world of 1"), std::string::npos) << ours[0];
  EXPECT_FALSE(fs::exists(csv));
}

}  // namespace
