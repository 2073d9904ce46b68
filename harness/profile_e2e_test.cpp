// End-to-end tests of `dtsuite run --profile`: the real binary under mpirun with small profiles
// written here. A profile the run meets exits 0 with its verdicts and citations in the CSV; an
// impossible threshold exits 1 naming itself in the failing rows' detail; a threshold that
// matched nothing fails (or skips, if optional); a malformed profile is one stderr line, exit 2.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "harness/testing/e2e.h"
#include "results/csv_reader.h"
#include "results/record.h"
#include "suites/profiles/profile.h"

namespace {

namespace fs = std::filesystem;
using namespace dts::e2e;

fs::path write_profile(const std::string& name, const std::string& text) {
  const fs::path path = scratch_dir() / name;
  std::ofstream(path) << text;
  return path;
}

const std::string kSweep = "run collectives --collective all_reduce -d f32 -o sum -b 8 -e 512 -f 8 -n 3 -w 1";

TEST(Profile, ARunThatMeetsItPassesAndEveryJudgedRowCitesItsThreshold) {
  const fs::path profile = write_profile("met.toml", R"(
[[threshold]]
metric = "wrong"
max = 0
source = "exact answers"

[[threshold]]
metric = "busbw"
op = "all_reduce"
min_bytes = 8
min = 1
source = "any positive bandwidth"

[[threshold]]
metric = "gradient_noise_scale"
min = 0.8
optional = true
source = "no convergence suite in this run"
)");
  const fs::path csv = scratch_dir() / "met.csv";
  const RunResult r = run_dtsuite(2, kSweep + " --profile " + profile.string() + " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("# profile " + profile.string() + ": 3 thresholds"), std::string::npos) << r.out;

  int judged_busbw = 0, summaries = 0;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.metric == "busbw" && row.labels.bytes >= 8) {
      ++judged_busbw;
      EXPECT_EQ(row.verdict, dts::Verdict::pass) << row.case_id;
      EXPECT_EQ(row.threshold, 1);
      EXPECT_NE(row.detail.find(">= 1 (met.toml [[threshold]] #2)"), std::string::npos) << row.detail;
    }
    if (row.metric == "busbw" && row.labels.bytes == 0) {
      EXPECT_EQ(row.verdict, dts::Verdict::info);  // below min_bytes: not judged
    }
    if (row.suite == "profile") {
      ++summaries;
      EXPECT_EQ(row.metric, "check");
      EXPECT_EQ(row.run_id.empty(), false);  // stamped like every other row
      const bool optional = row.case_id == "met/3/gradient_noise_scale";
      EXPECT_EQ(row.verdict, optional ? dts::Verdict::skip : dts::Verdict::pass) << row.case_id << ": " << row.detail;
    }
  }
  // Sizes 8, 64, 512 and the 1021-element extra (4084 B), 2 placements each; the 1-element extra
  // (4 B) is below min_bytes.
  EXPECT_EQ(judged_busbw, 4 * 2);
  EXPECT_EQ(summaries, 3);
}

TEST(Profile, AnImpossibleBandwidthFailsTheRunAndTheCsvCitesIt) {
  const fs::path profile = write_profile("impossible.toml", R"(
[[threshold]]
metric = "busbw"
op = "all_reduce"
min_bytes = 8
min = 1e15
source = "a petabyte per second, which no stack reaches"
)");
  const fs::path csv = scratch_dir() / "impossible.csv";
  const RunResult r = run_dtsuite(2, kSweep + " --profile " + profile.string() + " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  int failed = 0;
  bool summary_failed = false;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.metric == "busbw" && row.labels.bytes >= 8) {
      EXPECT_EQ(row.verdict, dts::Verdict::fail);
      EXPECT_EQ(row.threshold, 1e15);
      EXPECT_NE(row.detail.find("< 1e+15 required by impossible.toml [[threshold]] #1: a petabyte per second"),
                std::string::npos)
          << row.detail;
      ++failed;
    }
    if (row.suite == "profile") {
      summary_failed = row.verdict == dts::Verdict::fail;
      EXPECT_NE(row.detail.find("8 of 8 records fail"), std::string::npos) << row.detail;
    }
  }
  EXPECT_EQ(failed, 4 * 2);  // every judged size and placement, as above
  EXPECT_TRUE(summary_failed);
}

TEST(Profile, AThresholdThatMatchedNothingFailsTheRun) {
  const fs::path profile = write_profile("unmatched.toml", R"(
[[threshold]]
metric = "scaling_efficiency"
min = 0.9
source = "weak scaling target"
)");
  const fs::path csv = scratch_dir() / "unmatched.csv";
  const RunResult r = run_dtsuite(2, kSweep + " --profile " + profile.string() + " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::vector<dts::Record> rows = dts::read_results_csv(csv.string());
  ASSERT_FALSE(rows.empty());
  const dts::Record& last = rows.back();  // the summary comes after every measurement
  EXPECT_EQ(last.suite, "profile");
  EXPECT_EQ(last.verdict, dts::Verdict::fail);
  EXPECT_NE(last.detail.find("matched no record"), std::string::npos) << last.detail;
}

TEST(Profile, ASuiteDeclaresFlagsAProfileCanSet) {
  // The convergence suite's own flags, set by a profile: nothing outside its folder knows them.
  const fs::path profile = write_profile("suite-flags.toml", R"toml(
[run]
suites = ["convergence"]
scale = 4
scan-scales = "none"
warmup-epochs = 1.0

[[threshold]]
metric = "final_accuracy"
suite = "convergence"
min = 0.1
source = "above chance (10 classes)"
)toml");
  const fs::path csv = scratch_dir() / "suite-flags.csv";
  const RunResult r = run_dtsuite(2, "run --profile " + profile.string() + " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> runs;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.metric != "final_accuracy") continue;
    runs.insert(dts::config_value(row.labels.config, "run").value_or(""));
    EXPECT_EQ(row.verdict, dts::Verdict::pass) << row.detail;  // judged by the profile
    if (row.labels.config.find("run=scaled") != std::string::npos) {
      EXPECT_EQ(dts::config_value(row.labels.config, "warmup_epochs").value_or(""), "1") << row.labels.config;
    }
  }
  // scale = 4 names the runs; scan-scales = "none" leaves out the scan.
  EXPECT_EQ(runs, (std::set<std::string>{"base", "scaled-k4", "control-k4"}));
}

TEST(Profile, RunDefaultsApplyWhereTheCommandLineIsSilent) {
  const fs::path profile = write_profile("defaults.toml", R"(
[run]
collective = "all_reduce"
datatype = ["f32"]
op = "sum"
minbytes = 8
maxbytes = "4K"
stepfactor = 8
iters = 3
warmup_iters = 1

[[threshold]]
metric = "wrong"
max = 0
source = "exact answers"
)");
  const fs::path csv = scratch_dir() / "defaults.csv";
  // -e 512 on the command line wins over the profile's maxbytes 4K; the rest comes from the profile.
  const RunResult r = run_dtsuite(2, "run -e 512 --profile " + profile.string() + " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> ops, dtypes;
  std::set<int64_t> sizes;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.suite != "collectives") continue;
    ops.insert(row.labels.op);
    dtypes.insert(row.labels.dtype);
    sizes.insert(row.labels.bytes);
  }
  EXPECT_EQ(ops, std::set<std::string>{"all_reduce"});
  EXPECT_EQ(dtypes, std::set<std::string>{"f32"});
  EXPECT_EQ(sizes.count(512), 1u);   // the command line's -e
  EXPECT_EQ(sizes.count(4096), 0u);  // the profile's 4K, overridden
}

// A bad [run] value is refused even where the command line gives the flag (and so wins): the
// profile is wrong whatever -n says. One line naming the file and line, exit 2, before MPI starts.
TEST(Profile, ABadRunValueIsRefusedWhenTheCommandLineOverridesIt) {
  const fs::path profile = write_profile("negative.toml", R"(
[run]
iters = -5

[[threshold]]
metric = "wrong"
max = 0
source = "exact answers"
)");
  const fs::path csv = scratch_dir() / "negative.csv";
  const RunResult r = run_dtsuite(0, "run -n 3 --profile " + profile.string() + " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const auto lines = our_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("negative.toml:3: [run] iters"), std::string::npos) << lines[0];
  EXPECT_FALSE(fs::exists(csv));
}

// Where results go and what listens are the command line's decisions (suites/profiles/README.md):
// a profile naming an output is refused before anything is written, there or anywhere.
TEST(Profile, OutputsAreNotProfileKeys) {
  const fs::path elsewhere = scratch_dir() / "elsewhere.csv";
  const fs::path csv = scratch_dir() / "outputs.csv";
  const fs::path profile = write_profile("outputs.toml", "[run]\niters = 3\ncsv = \"" + elsewhere.string() + R"("

[[threshold]]
metric = "wrong"
max = 0
source = "exact answers"
)");
  const RunResult r = run_dtsuite(2, kSweep + " --profile " + profile.string() + " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const auto lines = our_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("outputs.toml:3: [run] csv: outputs and listeners are command-line decisions, not profile keys"),
            std::string::npos)
      << lines[0];
  EXPECT_FALSE(fs::exists(elsewhere));
  EXPECT_FALSE(fs::exists(csv));
}

// The profile keys are an allow-list (suites/profiles/profile.cpp): every `run` flag of this build
// is either one, or the command line's alone, and each profile key is a run flag. A new flag fails
// here until someone decides which it is, so an output cannot become a profile key unnoticed.
TEST(Profile, EveryRunFlagIsAProfileKeyOrTheCommandLines) {
  const RunResult r = run_dtsuite(0, "run --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> flags{"suites"};  // the positional list
  std::istringstream help(r.out);
  for (std::string line; std::getline(help, line);) {
    // "  -n,--iters INT ..." or "    --strategy TEXT ...": an option's line starts with its names.
    const size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos || line[first] != '-') continue;
    const size_t dashes = line.find("--", first);
    if (dashes == std::string::npos || dashes > first + 3) continue;
    const size_t end = line.find_first_of(" =", dashes);
    flags.insert(line.substr(dashes + 2, end == std::string::npos ? std::string::npos : end - dashes - 2));
  }
  ASSERT_GT(flags.size(), 30u) << r.out;  // the help was read (this build has some 50 run flags)
  std::set<std::string> keys, command_line;
  for (std::string_view key : dts::profile_run_keys()) keys.emplace(key);
  for (std::string_view flag : dts::command_line_only_run_flags()) command_line.emplace(flag);
  for (const std::string& flag : flags) {
    EXPECT_TRUE(keys.count(flag) + command_line.count(flag) == 1)
        << "--" << flag << " is neither a profile key nor the command line's alone: decide in "
        << "suites/profiles/profile.cpp (kRunKeys or kCommandLineOnly) and suites/profiles/README.md";
  }
  for (const std::string& key : keys) EXPECT_EQ(flags.count(key), 1u) << "profile key '" << key << "' is no run flag";
}

// A [run] strategy may pin layouts: its commas are the spec's, not the list's.
TEST(Profile, RunStrategyTakesPinnedLayouts) {
  const fs::path profile = write_profile("pinned.toml", R"toml(
[run]
suites = ["equivalence"]
strategy = ["tp(tp=2)"]
optimizer = "sgd"
steps = 1

[[threshold]]
metric = "max_abs_error"
max = 1
source = "any finite error: this test is about the strategy the profile names"
)toml");
  const fs::path csv = scratch_dir() / "pinned.csv";
  const RunResult r = run_dtsuite(2, "run --profile " + profile.string() + " --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> layouts;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.suite == "equivalence") layouts.insert(row.labels.strategy + ":" + row.case_id.substr(row.case_id.rfind('/') + 1));
  }
  EXPECT_EQ(layouts, std::set<std::string>{"tp:tp2"});
}

struct BadProfile {
  std::string name, text, message;
};

class BadProfiles : public testing::TestWithParam<BadProfile> {};

TEST_P(BadProfiles, OneLineOnStderrAndExitTwo) {
  const BadProfile& b = GetParam();
  const fs::path profile = b.text.empty() ? scratch_dir() / "missing.toml" : write_profile(b.name, b.text);
  const RunResult r = run_dtsuite(2, kSweep + " --profile " + profile.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const auto ours = our_lines(r.err);
  for (const std::string& line : ours) EXPECT_NE(line.find(b.message), std::string::npos) << line;
  EXPECT_EQ(ours.size(), 1u) << r.err;  // from rank 0 only, though every rank read the file
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, BadProfiles,
    testing::Values(BadProfile{"syntax.toml", "[[threshold]]\nmetric = \"busbw\"\nmin = \n", "syntax.toml:3: TOML syntax error"},
                    BadProfile{"metric.toml", "[[threshold]]\nmetric = \"busbandwidth\"\nmin = 1\nsource = \"s\"\n",
                               "metric.toml:2: unknown metric 'busbandwidth'"},
                    BadProfile{"range.toml", "[[threshold]]\nmetric = \"busbw\"\nmin = 2\nmax = 1\nsource = \"s\"\n",
                               "range.toml:1: [[threshold]] #1: min 2 > max 1"},
                    BadProfile{"run.toml", "[run]\ntimeout = -1.0\n[[threshold]]\nmetric = \"wrong\"\nmax = 0\nsource = \"s\"\n",
                               "run.toml:2: [run] timeout"},
                    // A key the profile keys do not list (suites/profiles/README.md): said at its line.
                    BadProfile{"typo.toml", "[run]\nminbyte = 8\n[[threshold]]\nmetric = \"wrong\"\nmax = 0\nsource = \"s\"\n",
                               "typo.toml:2: [run] minbyte is not a profile key"},
                    // Outputs and listeners are the command line's.
                    BadProfile{"listener.toml", "[run]\nmetrics-port = 9100\nmetrics-address = \"0.0.0.0\"\n[[threshold]]\nmetric = \"wrong\"\nmax = 0\nsource = \"s\"\n",
                               "listener.toml:2: [run] metrics-port: outputs and listeners are command-line decisions, not profile keys"},
                    BadProfile{"address.toml", "[run]\nmetrics-address = \"0.0.0.0\"\n[[threshold]]\nmetric = \"wrong\"\nmax = 0\nsource = \"s\"\n",
                               "address.toml:2: [run] metrics-address: outputs and listeners are command-line decisions, not profile keys"},
                    // The flags' own checks, at the profile's line: a list naming an item twice.
                    BadProfile{"twice.toml", "[run]\nstrategy = [\"ddp\", \"ddp\"]\n[[threshold]]\nmetric = \"wrong\"\nmax = 0\nsource = \"s\"\n",
                               "twice.toml:2: [run] strategy: --strategy: bad strategy list 'ddp,ddp': 'ddp' twice"},
                    BadProfile{"optimizer.toml", "[run]\noptimizer = \"lion\"\n[[threshold]]\nmetric = \"wrong\"\nmax = 0\nsource = \"s\"\n",
                               "optimizer.toml:2: [run] optimizer: --optimizer: 'lion' is not one of sgd, adamw"},
                    // A suite's own flag, checked by its own validator.
                    BadProfile{"mode.toml", "[run]\nscaling-mode = \"sideways\"\n[[threshold]]\nmetric = \"wrong\"\nmax = 0\nsource = \"s\"\n",
                               "unknown scaling mode 'sideways'"},
                    BadProfile{"missing.toml", "", "missing.toml': No such file or directory"}),
    [](const testing::TestParamInfo<BadProfile>& param_info) {
      return param_info.param.name.substr(0, param_info.param.name.find('.'));
    });

}  // namespace

namespace {

// This machine's CPU model, as /proc/cpuinfo says it ("" where it does not).
std::string cpu_model_here() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    return colon == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", colon + 1));
  }
  return "";
}

// --profile auto picks the shipped profile for the part every rank runs on: on this machine kind
// (CPU "AMD EPYC", no GPU) acceptance-cpu.toml, cited in the profile's rows; on a CPU no shipped
// profile names, one line and exit 2 before anything runs.
TEST(Profile, AutoPicksTheShippedProfileOfThePart) {
  if (fs::exists("/dev/nvidia0")) GTEST_SKIP() << "a GPU here: auto picks by its name (profile_test covers the names)";
  const fs::path csv = scratch_dir() / "auto.csv";
  const RunResult r = run_dtsuite(2, kSweep + " --profile auto --csv " + csv.string());
  if (cpu_model_here() == "AMD EPYC") {
    EXPECT_NE(r.out.find("profile: auto chose acceptance-cpu.toml"), std::string::npos) << r.out.substr(0, 2000);
    bool cited = false;
    for (const dts::Record& row : dts::read_results_csv(csv.string())) {
      if (row.suite == "profile" && row.case_id == "acceptance-cpu/1/wrong") cited = row.verdict == dts::Verdict::pass;
    }
    EXPECT_TRUE(cited) << "acceptance-cpu.toml's first threshold (wrong = 0) did not pass";
  } else {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--profile auto: no shipped profile is for '" + cpu_model_here() + "'"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(csv));
  }
}

}  // namespace
