// End-to-end tests of `dtsuite run --expect` and `compare --expect`: the real binary under the
// launcher, with deviations planted by the faulty backend over ring(mpi) (whose own arithmetic is
// right, so the planted kinds are the only ones): an expected deviation is xfail and the run
// passes, citing the entry; a deviation of another kind on the same cases still fails; an entry
// whose deviation no longer shows is xpass and fails the run; one that selects nothing is unused;
// a bad file is one line and exit 2. Last, the shipped file of the stack this was built against,
// on the plan README's first command runs, where that stack is the one the file is for.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "harness/testing/e2e.h"
#include "results/csv_reader.h"
#include "results/expectations.h"
#include "results/record.h"

namespace {

namespace fs = std::filesystem;
using namespace dts::e2e;

fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path path = scratch_dir() / name;
  std::ofstream(path) << text;
  return path;
}

// i8 sums at 2 ranks: the saturating victim clamps the one addition it makes, so its overflow
// inputs show "saturates at 127" and "saturates at -128" and nothing else.
const std::string kSums = " run collectives --collective all_reduce -d i8 -o sum -b 64 -e 64 -n 2 -w 1";

// The library the rows ran on: either MPI this project builds with (a pattern must name one).
const std::string kEntry = R"(
[[expect]]
library = ["Open MPI *", "MPICH *"]
backend = "faulty"
collective = "all_reduce"
dtype = "i8"
redop = "sum"
deviation = ["saturates at 127", "saturates at -128"]
citation = "planted by faulty(saturate): comm/faulty/faulty_communicator.cpp"
)";

std::vector<dts::Record> rows_of(const fs::path& csv, const std::string& metric) {
  std::vector<dts::Record> rows;
  for (dts::Record& r : dts::read_results_csv(csv.string())) {
    if (r.metric == metric) rows.push_back(std::move(r));
  }
  return rows;
}

TEST(Expect, AnExpectedDeviationIsXfailAndTheRunPassesCitingIt) {
  const fs::path file = write_file("planted.toml", kEntry);
  const fs::path csv = scratch_dir() / "xfail.csv", junit = scratch_dir() / "xfail.xml";
  const RunResult r = run_dtsuite(2, kSums + " --backend 'faulty(saturate,ring(mpi))' --expect " + file.string() +
                                         " --csv " + csv.string() + " --junit " + junit.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  int xfailed = 0;
  for (const dts::Record& row : rows_of(csv, "wrong")) {
    // The 64-byte case fails on the victim (rank 1); the 1- and 1021-element extras too.
    if (row.value == 0) continue;
    ++xfailed;
    EXPECT_EQ(row.verdict, dts::Verdict::xfail) << row.case_id << ": " << row.detail;
    EXPECT_EQ(row.detail.rfind("expected: planted.toml #1 (planted by faulty(saturate)", 0), 0u) << row.detail;
  }
  EXPECT_GT(xfailed, 0);
  const std::vector<dts::Record> summary = rows_of(csv, "check");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0].suite, "expect");
  EXPECT_EQ(summary[0].verdict, dts::Verdict::info);
  EXPECT_EQ(summary[0].value, xfailed);
  EXPECT_NE(r.out.find("# Failed cases : 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# Expected failures (known deviations, --expect) : "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("known deviation, on " + std::to_string(xfailed)), std::string::npos) << r.out;
  const std::string xml = read_file(junit);
  EXPECT_NE(xml.find("<skipped message=\"expected: planted.toml #1"), std::string::npos) << xml;
  EXPECT_EQ(xml.find("<failure"), std::string::npos) << xml;
}

TEST(Expect, ADeviationOfAnotherKindStillFailsAndTheEntryIsXpass) {
  const fs::path file = write_file("planted2.toml", kEntry);
  const fs::path csv = scratch_dir() / "other.csv";
  // A bit flipped on the victim: "wrong value", which the entry does not name.
  const RunResult r = run_dtsuite(2, kSums + " --backend 'faulty(bitflip,ring(mpi))' --expect " + file.string() +
                                         " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  int failed = 0;
  for (const dts::Record& row : rows_of(csv, "wrong")) {
    if (row.value == 0) continue;
    ++failed;
    EXPECT_EQ(row.verdict, dts::Verdict::fail) << row.detail;
  }
  EXPECT_GT(failed, 0);
  const std::vector<dts::Record> summary = rows_of(csv, "check");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0].verdict, dts::Verdict::xpass) << summary[0].detail;
}

TEST(Expect, BothKindsOnOneCaseFailWhenTheFileNamesOnlyOne) {
  // saturate and the same entry without -128: the rows showing both kinds are not expected.
  std::string narrower = kEntry;
  narrower.replace(narrower.find(", \"saturates at -128\""), 21, "");
  const fs::path file = write_file("narrow.toml", narrower);
  const fs::path csv = scratch_dir() / "narrow.csv";
  const RunResult r = run_dtsuite(2, kSums + " --backend 'faulty(saturate,ring(mpi))' --expect " + file.string() +
                                         " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  int not_expected = 0;
  for (const dts::Record& row : rows_of(csv, "wrong")) {
    if (row.verdict == dts::Verdict::fail) {
      EXPECT_EQ(row.detail.rfind("not expected: saturates at -128 | ", 0), 0u) << row.detail;
      ++not_expected;
    }
  }
  EXPECT_GT(not_expected, 0);
}

TEST(Expect, AFixedDeviationIsXpassAndFailsTheRun) {
  // The same entry for ring(mpi), whose sums wrap as stated: the deviation is gone.
  std::string fixed = kEntry;
  fixed.replace(fixed.find("backend = \"faulty\""), 18, "backend = \"ring\"");
  const fs::path file = write_file("fixed.toml", fixed);
  const fs::path csv = scratch_dir() / "fixed.csv";
  const RunResult r = run_dtsuite(2, kSums + " --backend 'ring(mpi)' --expect " + file.string() + " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  for (const dts::Record& row : rows_of(csv, "wrong")) EXPECT_EQ(row.verdict, dts::Verdict::pass) << row.detail;
  const std::vector<dts::Record> summary = rows_of(csv, "check");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0].verdict, dts::Verdict::xpass);
  EXPECT_NE(summary[0].detail.find("update fixed.toml (line 2)"), std::string::npos) << summary[0].detail;
  EXPECT_NE(r.out.find("# Failed cases : 1"), std::string::npos) << r.out;  // the stale entry

  // compare --expect judges the same way: the run against itself as baseline is refused, so a
  // second run of the fixed stack is the current one.
  const fs::path csv2 = scratch_dir() / "fixed2.csv";
  ASSERT_EQ(run_dtsuite(2, kSums + " --backend 'ring(mpi)' --csv " + csv2.string()).exit_code, 0);
  const RunResult gate = run_dtsuite(0, "compare " + csv.string() + " " + csv2.string() + " --expect " + file.string());
  EXPECT_EQ(gate.exit_code, 1) << gate.err << gate.out;
  EXPECT_NE(gate.out.find("# expect fixed.toml#1 [xpass]"), std::string::npos) << gate.out;
}

TEST(Expect, UnusedAndOtherStacksAreReportedNotFailed) {
  const fs::path file = write_file("unused.toml", R"(
[[expect]]
library = ["Open MPI *", "MPICH *"]
dtype = "u8"
deviation = "saturates at 255"
citation = "selects no case of an i8 run"

[[expect]]
library = "NoSuchLibrary 1.*"
deviation = "saturates at 127"
citation = "another stack's"
)");
  const fs::path csv = scratch_dir() / "unused.csv";
  const RunResult r = run_dtsuite(2, kSums + " --backend 'ring(mpi)' --expect " + file.string() + " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::vector<dts::Record> summary = rows_of(csv, "check");
  ASSERT_EQ(summary.size(), 2u);
  EXPECT_EQ(summary[0].case_id, "unused.toml#1");
  EXPECT_EQ(summary[0].verdict, dts::Verdict::skip);
  EXPECT_EQ(summary[0].detail.rfind("unused: ", 0), 0u) << summary[0].detail;
  EXPECT_EQ(summary[1].case_id, "unused.toml");
  EXPECT_NE(summary[1].detail.find("1 of its 2 entries are for another stack"), std::string::npos) << summary[1].detail;
}

TEST(Expect, BadFilesAreOneLineAndExit2) {
  const fs::path bad = write_file("bad.toml", "[[expect]]\nlibrary = \"Open MPI 4.1.*\"\ndeviation = \"saturates at 127\"\n");
  RunResult r = run_dtsuite(2, kSums + " --backend 'ring(mpi)' --expect " + bad.string());
  EXPECT_EQ(r.exit_code, 2);
  std::vector<std::string> lines = our_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("bad.toml:1: [[expect]] #1 has no citation"), std::string::npos) << lines[0];
  // An output over the expectation file is refused before anything is written.
  const fs::path good = write_file("kept.toml", kEntry);
  r = run_dtsuite(2, kSums + " --backend 'ring(mpi)' --expect " + good.string() + " --csv " + good.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(read_file(good), kEntry);
  r = run_dtsuite(0, "compare a.csv b.csv --expect " + (scratch_dir() / "missing.toml").string());
  EXPECT_EQ(r.exit_code, 2);
}

// What could hide a fault is refused at load, before any case runs: an entry for every library
// that waives an unclassified wrong answer turned every bit flip of a run into xfail, exit 0.
TEST(Expect, AWaiverThatCouldHideAFaultIsRefused) {
  const std::vector<std::pair<std::string, std::string>> files{
      {"library = \"*\"\ndeviation = [\"wrong value\"]\ncitation = \"x\"\n",
       "hide.toml:2: 'library' of [[expect]] #1: '*' does not name a library"},
      {"library = \"Open MPI *\"\ndeviation = [\"wrong value\"]\ncitation = \"x\"\n",
       "hide.toml:3: 'deviation' of [[expect]] #1: 'wrong value' is a failure the check could not classify"},
      {"library = \"Open MPI *\"\ndeviation = [\"NaN droped by min\"]\ncitation = \"x\"\n",
       "hide.toml:3: 'deviation' of [[expect]] #1: 'NaN droped by min' is no deviation kind a check names; did you "
       "mean 'NaN dropped by min'?"},
      {"library = \"Open MPI *\"\ndeviation = [\"NaN dropped by min\"]\ncitation = \"  \"\n",
       "hide.toml:4: 'citation' of [[expect]] #1 is blank"},
  };
  for (const auto& [text, message] : files) {
    const fs::path file = write_file("hide.toml", "[[expect]]\n" + text);
    const fs::path csv = scratch_dir() / "hide.csv";
    fs::remove(csv);
    const RunResult r = run_dtsuite(2, kSums + " --backend 'faulty(bitflip,mpi)' --expect " + file.string() +
                                           " --csv " + csv.string());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    const std::vector<std::string> lines = our_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_NE(lines[0].find(message), std::string::npos) << lines[0];
    EXPECT_FALSE(fs::exists(csv));  // refused before anything ran
    const RunResult gate = run_dtsuite(0, "compare a.csv b.csv --expect " + file.string());
    EXPECT_EQ(gate.exit_code, 2) << gate.err;
    EXPECT_NE(gate.err.find(message), std::string::npos) << gate.err;
  }
}

// The shipped file of this build's MPI library, on the collectives README's first command runs,
// narrowed to the dtypes and ops where the deviations live: exit 0, and every failure xfail.
TEST(Expect, TheShippedFileOfThisStackPassesItsKnownDeviations) {
  const RunResult list = run_dtsuite(0, "list");
  ASSERT_EQ(list.exit_code, 0);
  std::string file;
  if (list.out.find("MPI Open MPI v4.1.") != std::string::npos) file = "openmpi-4.1.toml";
  if (list.out.find("MPI MPICH Version:\t4.0.") != std::string::npos) file = "mpich-4.0.toml";
  if (file.empty()) GTEST_SKIP() << "no shipped expectation file for this MPI library";
  const fs::path csv = scratch_dir() / "shipped.csv";
  const RunResult r = run_dtsuite(4, "run collectives --collective all_reduce,reduce -r 0 -d i8,u8,f32,u64 -o sum,max "
                                     "-b 64 -e 4K -n 2 -w 1 --expect " DTS_SOURCE_DIR "/results/expectations/" + file +
                                     " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  int xfailed = 0;
  for (const dts::Record& row : rows_of(csv, "wrong")) {
    EXPECT_NE(row.verdict, dts::Verdict::fail) << row.case_id << ": " << row.detail;
    xfailed += row.verdict == dts::Verdict::xfail;
  }
  EXPECT_GT(xfailed, 0);  // the stack's deviations are there, and named
}

// An expectation file that is a FIFO no one writes: after -T, one line naming it and exit 3, in
// `run` (under the launcher) and in `compare`, as a profile's FIFO. Its own ctest with a short
// timeout (harness/CMakeLists.txt), and `timeout` here, so that a regression fails, not hangs.
TEST(ExpectHang, AnExpectationFifoWithoutAWriterEndsAfterTheTimeout) {
  const fs::path fifo = scratch_dir() / "expect.fifo", csv = scratch_dir() / "fifo_run.csv";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const RunResult first = run_dtsuite(1, kSums + " --csv " + csv.string());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const fs::path baseline = scratch_dir() / "fifo_baseline.csv";
  fs::copy_file(csv, baseline, fs::copy_options::overwrite_existing);
  const std::string bounded = "timeout -k 10 60 ";
  const std::string launcher = std::string(DTS_MPIEXEC) + " -np 2 " + DTS_MPIEXEC_FLAGS + " ";
  for (const std::string& command :
       {bounded + launcher + DTS_BINARY + kSums + " -T 2 --expect " + fifo.string() + " --csv " +
            (scratch_dir() / "fifo_never.csv").string(),
        bounded + DTS_BINARY + " compare -T 2 --expect " + fifo.string() + " " + baseline.string() + " " + csv.string()}) {
    const RunResult r = run_shell(command);
    EXPECT_EQ(r.exit_code, 3) << command << "\n" << r.err;
    const std::vector<std::string> ours = our_lines(r.err);
    ASSERT_EQ(ours.size(), 1u) << command << "\n" << r.err;
    EXPECT_NE(ours[0].find("expectation file '" + fifo.string() + "': no bytes came for 2 s"), std::string::npos)
        << ours[0];
  }
}

}  // namespace
