// End-to-end tests of what the dtsuite binary reads and what a full disk leaves: a device, a FIFO
// without a writer, a TOML file nested too deep and an input named as an output are refused with
// one line (exit 2, or 3 for the FIFO after -T), a FIFO is read once for all ranks, and a run whose
// files hit the disk's limit ends with exit 2 leaving a CSV of whole rows and a well-formed JUnit
// document.
//   ctest -R inputs_e2e_test
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "harness/testing/e2e.h"
#include "results/csv_reader.h"
#include "results/record.h"

namespace {

namespace fs = std::filesystem;
using namespace dts::e2e;


// The shipped digits, inflated: a plain CSV the convergence suite reads as --data.
fs::path plain_digits() {
  const fs::path path = scratch_dir() / "digits.csv";
  if (!fs::exists(path)) run_shell("(gzip -dc " + std::string(DTS_DIGITS_PATH) + " > " + path.string() + ")");
  return path;
}

fs::path make_fifo(const std::string& name) {
  const fs::path path = scratch_dir() / name;
  fs::remove(path);
  EXPECT_EQ(::mkfifo(path.c_str(), 0644), 0);
  return path;
}

// A short convergence run: the linear scaling rule at k=2 with no scan, 1 epoch.
const std::string kShortConvergence = "run convergence --epochs 1 --scale 2 --scan-scales none";

TEST(Inputs, AnInputNamedAsAnOutputIsRefusedAndKept) {
  const fs::path data = plain_digits();
  const std::string before = read_file(data);
  for (const std::string flag : {"--csv", "--junit", "--prom"}) {
    const RunResult r = run_dtsuite(2, kShortConvergence + " --data " + data.string() + " " + flag + " " + data.string());
    EXPECT_EQ(r.exit_code, 2) << flag << r.err;
    const auto lines = our_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_NE(lines[0].find(flag + std::string(" '") + data.string() + "' is the same file as --data"), std::string::npos)
        << lines[0];
    EXPECT_EQ(read_file(data), before) << flag;  // the data file as it was
  }
}

TEST(Inputs, DevicesAreRefusedBeforeTheyAreRead) {
  // /dev/zero as data grew each rank to 12 GB; as a profile or a results file, the readers grew
  // without end. Each is now one line, exit 2, under a memory cap far below what that took.
  for (const auto& [args, np] : {std::pair{kShortConvergence + " --data /dev/zero", 2},
                                 std::pair{std::string("run collectives --quick --profile /dev/zero"), 2},
                                 std::pair{std::string("compare /dev/zero /dev/zero"), 0},
                                 std::pair{std::string("report /dev/zero -o ") + (scratch_dir() / "r.html").string(), 0}}) {
    std::string command;
    if (np > 0) command = std::string(DTS_MPIEXEC) + " -np " + std::to_string(np) + " " + DTS_MPIEXEC_FLAGS + " ";
    const RunResult r = run_shell(memory_cap() + command + DTS_BINARY + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << r.err;
    const auto lines = our_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << args << r.err;
    EXPECT_NE(lines[0].find("'/dev/zero': it is a character device"), std::string::npos) << lines[0];
  }
}

TEST(Inputs, AFifoWithoutAWriterIsAHangAfterTheTimeout) {
  const fs::path fifo = make_fifo("nobody.csv");
  for (const auto& [args, np] : {std::pair{kShortConvergence + " -T 2 --data " + fifo.string(), 2},
                                 std::pair{std::string("run collectives --quick -T 2 --profile ") + fifo.string(), 2},
                                 std::pair{"compare -T 2 " + fifo.string() + " " + fifo.string(), 0},
                                 std::pair{"report -T 2 " + fifo.string() + " -o " + (scratch_dir() / "r.html").string(), 0}}) {
    const RunResult r = run_dtsuite(np, args);
    EXPECT_EQ(r.exit_code, 3) << args << r.err;
    const auto lines = our_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << args << r.err;
    EXPECT_NE(lines[0].find("no bytes came for 2 s"), std::string::npos) << lines[0];
  }
}

// Rank 0 reads the FIFO and hands every rank the same bytes: the run is the file's run (before,
// each rank read part of the stream). The same through standard input, which mpirun gives rank 0.
TEST(Inputs, AFifoAndStandardInputAreReadOnceForEveryRank) {
  const fs::path data = plain_digits();
  const auto finals = [](const fs::path& csv) {
    std::map<std::string, double> values;
    for (const dts::Record& r : dts::read_results_csv(csv.string())) {
      if (r.metric == "final_loss") values[dts::config_value(r.labels.config, "run").value_or("")] = r.value;
    }
    return values;
  };
  // One epoch with two of warm-up: the rule does not hold (exit 1), the same way each time.
  const fs::path from_file = scratch_dir() / "from_file.csv";
  const RunResult f = run_dtsuite(2, kShortConvergence + " --data " + data.string() + " --csv " + from_file.string());
  const fs::path fifo = make_fifo("digits.fifo");
  // The writer waits for the run's reader (at most 5 minutes: a run that never opens the FIFO
  // fails the test below, it does not hang it), then writes the file in one go.
  std::thread writer([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    int fd = -1;
    while ((fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK)) < 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (fd < 0) return;
    ::fcntl(fd, F_SETFL, 0);
    const std::string text = read_file(data);
    for (size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  });
  const fs::path from_fifo = scratch_dir() / "from_fifo.csv";
  const RunResult r = run_dtsuite(2, kShortConvergence + " --data " + fifo.string() + " --csv " + from_fifo.string());
  writer.join();
  EXPECT_EQ(r.exit_code, f.exit_code) << r.err;
  const fs::path from_stdin = scratch_dir() / "from_stdin.csv";
  const RunResult s = run_shell("gzip -dc " + std::string(DTS_DIGITS_PATH) + " | " + DTS_MPIEXEC + " -np 2 " +
                                DTS_MPIEXEC_FLAGS + " " + DTS_BINARY + " " + kShortConvergence + " --data - --csv " +
                                from_stdin.string());
  EXPECT_EQ(s.exit_code, f.exit_code) << s.err;
  const auto expected = finals(from_file);
  ASSERT_EQ(expected.size(), 3u);  // the base run, the scaled one and its control
  EXPECT_EQ(finals(from_fifo), expected);
  EXPECT_EQ(finals(from_stdin), expected);
}

// A model the ranks cannot hold (--width 100000 is inside the flag's range: ten billion
// parameters) ended every case with "check = 0 [fail] std::bad_alloc" and exit 1. Now one line
// before anything is allocated, exit 2, under a memory cap that a regression would hit.
TEST(Inputs, AModelThatCannotFitIsASetUpError) {
  for (const std::string suite : {"equivalence", "scaling"}) {
    const RunResult r = run_shell(memory_cap() + std::string(DTS_MPIEXEC) + " -np 2 " + DTS_MPIEXEC_FLAGS + " " +
                                  DTS_BINARY + " run " + suite + " --width 100000");
    EXPECT_EQ(r.exit_code, 2) << suite << r.err;
    const auto lines = our_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_NE(lines[0].find(suite + ": a 3-layer MLP of width 100000 (10004400010 parameters)"), std::string::npos)
        << lines[0];
    EXPECT_NE(lines[0].find("per rank"), std::string::npos) << lines[0];
    EXPECT_EQ(r.out.find("Failed cases"), std::string::npos);  // no case ran
  }
}

// A dotted key of 32,000 parts (64,003 bytes, under the 64 KiB line limit), as a key or as a
// [table] or [[array]] header, overflowed toml++'s stack in every command that reads TOML:
// SIGSEGV, exit 139, nothing on stderr, under the launcher too. Now one line naming the file, its
// line and the limit (kTomlMaxDepth, results/toml_reader.h), exit 2, before toml++ parses.
TEST(Inputs, TomlNestedTooDeepIsOneLineNotACrash) {
  std::string chain = "a";
  for (int part = 1; part < 32000; ++part) chain += ".a";
  const auto write = [](const std::string& name, const std::string& text) {
    const fs::path path = scratch_dir() / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  };
  const std::string key = write("deep_key.toml", chain + " = 1\n"), table = write("deep_table.toml", "[" + chain + "]\n"),
                    array = write("deep_array.toml", "[[" + chain + "]]\n");
  ASSERT_EQ(fs::file_size(key), 64004u);  // the 64,003 bytes of the report and the line's '\n'
  const std::string run = "run collectives --quick -d f32 -o sum ";
  // compare reads --expect before the runs, which need not exist.
  for (const auto& [args, np, path] : {std::tuple{run + "--profile " + key, 0, key},
                                       std::tuple{run + "--expect " + key, 0, key},
                                       std::tuple{"compare a.csv b.csv --expect " + key, 0, key},
                                       std::tuple{run + "--profile " + table, 0, table},
                                       std::tuple{run + "--expect " + array, 0, array},
                                       std::tuple{run + "--profile " + array, 2, array},
                                       std::tuple{run + "--expect " + table, 2, table}}) {
    const RunResult r = run_dtsuite(np, args);
    EXPECT_EQ(r.exit_code, 2) << args.substr(0, 80) << r.err;
    const auto lines = our_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << args.substr(0, 80) << r.err;
    EXPECT_NE(lines[0].find(path + ":1: nested deeper than 64 levels"), std::string::npos) << lines[0];
  }
}

// A full disk: a 64 KiB tmpfs (a run that passes: f32 sums, so the exit code is the disk's), mounted in a mount namespace of the run's own (unshare -m), so it
// goes with the run whatever happens. The run goes on, says which output it dropped, and exits 2;
// the CSV ends at a whole row and reads without a warning (it was cut mid-row, and compare and
// report refused it whole); the JUnit file is a whole document (it was 12 KB of malformed XML).
TEST(Inputs, AFullDiskLeavesWholeRowsAndAWholeDocument) {
  if (run_shell("unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs " + scratch_dir().string() + "'").exit_code != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root and mount namespaces)";
  }
  const fs::path disk = scratch_dir() / "disk", kept = scratch_dir() / "kept";
  fs::create_directories(disk);
  fs::create_directories(kept);
  const RunResult r = run_shell("unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs " + disk.string() + " && " +
                                std::string(DTS_MPIEXEC) + " -np 2 " + DTS_MPIEXEC_FLAGS + " " + DTS_BINARY +
                                " run collectives --quick -d f32 -o sum --csv " + disk.string() + "/full.csv --junit " + disk.string() +
                                "/full.xml; code=$?; cp " + disk.string() + "/full.* " + kept.string() + "; exit $code'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const std::string err = r.err;
  EXPECT_NE(err.find("results sink dropped: cannot write CSV file"), std::string::npos) << err;
  EXPECT_NE(err.find("the file ends at its last whole row"), std::string::npos) << err;
  EXPECT_NE(err.find("the file is left as it was after the previous record"), std::string::npos) << err;
  const fs::path csv = kept / "full.csv", junit = kept / "full.xml";
  std::vector<std::string> warnings;
  dts::CsvReadOptions options;
  options.warn = [&](const std::string& w) { warnings.push_back(w); };
  EXPECT_GT(dts::read_results_csv(csv.string(), options).size(), 10u);
  EXPECT_TRUE(warnings.empty());
  const std::string xml = read_file(junit);
  ASSERT_GT(xml.size(), 100u);
  EXPECT_EQ(xml.substr(xml.size() - std::string("</testsuites>\n").size()), "</testsuites>\n");
  const std::string counted = "<testsuites name=\"dtsuite\" tests=\"";
  const size_t at_tests = xml.find(counted);
  ASSERT_NE(at_tests, std::string::npos);
  const size_t digits = at_tests + counted.size();
  const std::string tests = xml.substr(digits, xml.find('"', digits) - digits);
  size_t testcases = 0;
  for (size_t at = xml.find("<testcase "); at != std::string::npos; at = xml.find("<testcase ", at + 1)) ++testcases;
  EXPECT_EQ(std::to_string(testcases), tests);
  EXPECT_GT(testcases, 0u);
  // report takes the file as it is.
  EXPECT_EQ(run_dtsuite(0, "report " + csv.string() + " -o " + (scratch_dir() / "full.html").string()).exit_code, 0);
}

// Message sizes inside the flags' ranges that no rank can hold ended with a check row FAIL
// "std::bad_alloc" (exit 1). Now one line before anything is allocated, exit 2, naming the bytes a
// rank needs, under a memory cap that a regression would hit instead of the machine.
TEST(Inputs, AMessageThatCannotFitIsASetUpError) {
  const std::vector<std::pair<std::string, std::string>> runs{
      // 999999G: 1.07 PB a rank, 3 bytes a byte (buffer, host input, a library's scratch).
      {"scaling --scaling-bytes 999999G", "scaling: the all_reduce of 1.07 PB needs at least 3.22 PB per rank"},
      // Each past any node's memory, not only under ulimit -v: under ASan the cap is an RSS
      // limit the check cannot see, so a size that fits the node would run and be killed.
      // 4096G in and 4096G out: the out-of-place placement of all_reduce's widest case.
      {"collectives -b 4096G -e 4096G", "collectives: all_reduce f32 of 4.4 TB on 2 ranks needs at least 8.8 TB per rank"},
      // 4096G sent and 4096G received.
      {"topology --p2p-sweep 4096G:4096G", "topology: a message of 4.4 TB needs at least 8.8 TB per rank"}};
  for (const auto& [args, wanted] : runs) {
    const RunResult r = run_shell(memory_cap() + std::string(DTS_MPIEXEC) + " -np 2 " + DTS_MPIEXEC_FLAGS + " " +
                                  DTS_BINARY + " run " + args);
    EXPECT_EQ(r.exit_code, 2) << args << r.err;
    const auto lines = our_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << args << r.err;
    EXPECT_NE(lines[0].find(wanted), std::string::npos) << lines[0];
    EXPECT_EQ(r.out.find("bad_alloc"), std::string::npos) << r.out;  // no case ran
  }
}

}  // namespace
