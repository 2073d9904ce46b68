// End-to-end tests of the results outputs of the dtsuite binary: `run --junit` under mpirun (one
// testcase per case of the CSV, failures under faulty(bitflip,mpi)), and `compare` on files as a CI
// job would call it (exit 0, 1 and 2; the table; --csv and --junit; one stderr line on bad input).
#include <expat.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "harness/testing/e2e.h"
#include "results/csv_reader.h"
#include "results/csv_sink.h"

namespace {

namespace fs = std::filesystem;
using namespace dts::e2e;

// Counts of a JUnit document, read with expat (a parse error fails the test).
struct JunitCounts {
  bool well_formed = false;
  int testcases = 0, failures = 0, errors = 0, skipped = 0;
  std::set<std::string> names;
  std::multiset<std::string> failing;  // names of the testcases with a <failure>
  std::string root_tests;  // the tests="" attribute of <testsuites>
  std::string open;        // the testcase being read
};

JunitCounts read_junit(const fs::path& path) {
  JunitCounts counts;
  const std::string text = read_file(path);
  XML_Parser parser = XML_ParserCreate("UTF-8");
  XML_SetUserData(parser, &counts);
  XML_SetStartElementHandler(parser, [](void* data, const XML_Char* element, const XML_Char** attributes) {
    auto* c = static_cast<JunitCounts*>(data);
    const std::string name = element;
    for (size_t i = 0; attributes[i]; i += 2) {
      if (name == "testcase" && std::string(attributes[i]) == "name") {
        c->names.insert(attributes[i + 1]);
        c->open = attributes[i + 1];
      }
      if (name == "testsuites" && std::string(attributes[i]) == "tests") c->root_tests = attributes[i + 1];
    }
    c->testcases += name == "testcase";
    c->failures += name == "failure";
    if (name == "failure") c->failing.insert(c->open);
    c->errors += name == "error";
    c->skipped += name == "skipped";
  });
  counts.well_formed = XML_Parse(parser, text.data(), static_cast<int>(text.size()), 1) == XML_STATUS_OK;
  EXPECT_TRUE(counts.well_formed) << XML_ErrorString(XML_GetErrorCode(parser)) << " at line "
                                  << XML_GetCurrentLineNumber(parser) << " of " << path;
  XML_ParserFree(parser);
  return counts;
}

std::set<std::string> cases_of(const fs::path& csv) {
  std::set<std::string> cases;
  for (const dts::Record& r : dts::read_results_csv(csv.string())) cases.insert(r.case_id);
  return cases;
}

// A small sweep: every collective, one float and one integer type, 8 B .. 512 B plus the extras.
const std::string kSweep = "--quick -e 512 -d f32,i32 -o sum";

TEST(JunitRun, OneTestcasePerCaseOfTheCsv) {
  const fs::path csv = scratch_dir() / "junit_pass.csv", xml = scratch_dir() / "junit_pass.xml";
  const RunResult r = run_dtsuite(2, "run collectives " + kSweep + " --csv " + csv.string() + " --junit " + xml.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const JunitCounts junit = read_junit(xml);
  const std::set<std::string> cases = cases_of(csv);
  ASSERT_GT(cases.size(), 7u);  // at least one case per collective
  EXPECT_EQ(junit.testcases, static_cast<int>(cases.size()));
  EXPECT_EQ(junit.root_tests, std::to_string(cases.size()));
  EXPECT_EQ(junit.names, cases);
  EXPECT_EQ(junit.failures, 0);
  EXPECT_EQ(junit.errors, 0);
}

TEST(JunitRun, BitflipCasesAreFailures) {
  const fs::path csv = scratch_dir() / "junit_fault.csv", xml = scratch_dir() / "junit_fault.xml";
  const RunResult r = run_dtsuite(
      2, "run collectives --backend 'faulty(bitflip,mpi)' " + kSweep + " --csv " + csv.string() + " --junit " + xml.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const JunitCounts junit = read_junit(xml);
  std::set<std::string> failed;
  for (const dts::Record& rec : dts::read_results_csv(csv.string())) {
    if (rec.verdict == dts::Verdict::fail) failed.insert(rec.case_id);
  }
  ASSERT_FALSE(failed.empty());
  EXPECT_EQ(junit.testcases, static_cast<int>(cases_of(csv).size()));
  EXPECT_EQ(junit.failures, static_cast<int>(failed.size()));  // one <failure> per failed case
}

// A baseline made once by the real binary (2 ranks, the small sweep); the comparisons below work
// on it and on copies changed in known ways.
const fs::path& baseline_csv() {
  static const fs::path path = [] {
    const fs::path p = scratch_dir() / "baseline.csv";
    const RunResult r = run_dtsuite(2, "run collectives " + kSweep + " --csv " + p.string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return p;
  }();
  return path;
}

// Writes `records` as a results CSV with the sink the binary uses, as a run of its own: its run id
// is the file's name (compare tells runs apart by run id and repetition, and refuses a run as its
// own baseline), the repetitions kept.
fs::path write_run(const std::string& name, const std::vector<dts::Record>& records) {
  const fs::path path = scratch_dir() / name;
  dts::CsvSink sink(path.string());
  for (dts::Record r : records) {
    r.run_id = name;
    sink.write(r);
  }
  sink.close();
  return path;
}

// Scales every time by `factor` (its samples and stats too) and every bandwidth by 1/factor.
std::vector<dts::Record> slowed(std::vector<dts::Record> records, double factor) {
  for (dts::Record& r : records) {
    const double scale = r.unit == "seconds" ? factor : r.unit == "bytes_per_second" ? 1 / factor : 1;
    r.value *= scale;
    for (double* s : {&r.stats.min, &r.stats.p05, &r.stats.median, &r.stats.p95, &r.stats.max}) *s *= scale;
    for (double& s : r.samples) s *= scale;
  }
  return records;
}

TEST(Compare, ARerunWithTheSameNumbersPasses) {
  const fs::path again = write_run("again.csv", dts::read_results_csv(baseline_csv().string()));
  const RunResult r = run_dtsuite(0, "compare " + baseline_csv().string() + " " + again.string());
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("0 regressed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("REGRESSED  "), std::string::npos);
  EXPECT_TRUE(r.err.empty()) << r.err;
}

// The exit code and our one stderr line of `compare ARGS` (the test fails unless it is one line).
std::pair<int, std::string> refused(const std::string& args) {
  const RunResult r = run_dtsuite(0, "compare " + args);
  const auto ours = our_lines(r.err);
  EXPECT_EQ(ours.size(), 1u) << r.err << r.out.substr(0, 600);
  return {r.exit_code, ours.empty() ? "" : ours.front()};
}

// Open MPI's transport choices are part of the stack: a run under `--mca btl tcp,self --mca op
// ^avx` records them (mpi_config, on every row), and compare refuses it against a run with the
// defaults, naming the setting, exit 2. Without the column both ran as `mpi` on one machine and
// compare judged the TCP run's times against shared memory's.
TEST(Compare, OpenMpiTransportSettingsAreTheStacks) {
  const std::string launcher = run_shell(std::string(DTS_MPIEXEC) + " --version").out;
  if (launcher.find("Open MPI") == std::string::npos && launcher.find("OpenRTE") == std::string::npos) {
    GTEST_SKIP() << "needs Open MPI's launcher (--mca)";
  }
  const std::string plan = " run collectives --collective all_reduce -d f32 -o sum -b 1K -e 1K -n 3 -w 1 --csv ";
  const fs::path plain = scratch_dir() / "mca_default.csv", tcp = scratch_dir() / "mca_tcp.csv";
  const std::string launch = std::string(DTS_MPIEXEC) + " -np 2 " + DTS_MPIEXEC_FLAGS;
  ASSERT_EQ(run_shell(launch + " " + DTS_BINARY + plan + plain.string()).exit_code, 0);
  const RunResult r = run_shell(launch + " --mca btl tcp,self --mca op ^avx " + DTS_BINARY + plan + tcp.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const dts::Record& row : dts::read_results_csv(plain.string())) EXPECT_EQ(row.labels.mpi_config, "");
  const auto rows = dts::read_results_csv(tcp.string());
  ASSERT_FALSE(rows.empty());
  for (const dts::Record& row : rows) EXPECT_EQ(row.labels.mpi_config, "btl=tcp,self;op=^avx") << row.case_id;
  const auto [code, line] = refused(plain.string() + " " + tcp.string());
  EXPECT_EQ(code, 2);
  EXPECT_NE(line.find("different stacks: mpi_config '' (baseline) vs 'btl=tcp,self;op=^avx' (current)"),
            std::string::npos)
      << line;
}

// `compare a.csv a.csv` judged a run against itself and said "no regression": it says now that
// the two are one run, with exit 2.
TEST(Compare, ARunAgainstItselfIsRefusedSayingSo) {
  const std::string a = baseline_csv().string();
  const auto [code, line] = refused(a + " " + a);
  EXPECT_EQ(code, 2);
  EXPECT_NE(line.find("the baseline and the current run are the same run"), std::string::npos) << line;
  EXPECT_NE(line.find("repetition 1, in " + a + "): a run cannot be its own baseline"), std::string::npos) << line;
}

// Runs are (run id, repetition) whatever file holds them: two copies of one baseline run in a
// folder, or one file named twice, would count the run twice; a folder that holds the current
// run would judge it against itself. Each is exit 2, naming the run and the files.
TEST(Compare, ARunGivenTwiceOrAsItsOwnBaselineIsRefused) {
  const fs::path dir = scratch_dir() / "copied_baselines";
  fs::create_directories(dir);
  const fs::path original = write_run("original.csv", dts::read_results_csv(baseline_csv().string()));
  fs::copy_file(original, dir / "a.csv", fs::copy_options::overwrite_existing);
  fs::copy_file(original, dir / "b.csv", fs::copy_options::overwrite_existing);
  const fs::path current = write_run("current_run.csv", dts::read_results_csv(baseline_csv().string()));
  const std::string a = (dir / "a.csv").string(), b = (dir / "b.csv").string();
  auto [code, line] = refused(dir.string() + " " + current.string());
  EXPECT_EQ(code, 2);
  EXPECT_NE(line.find("run original.csv (repetition 1) is in " + a + " and " + b + ": give each baseline run once"),
            std::string::npos)
      << line;
  std::tie(code, line) = refused(a + " " + a + " " + current.string());
  EXPECT_EQ(code, 2);
  EXPECT_NE(line.find("run original.csv (repetition 1) is in " + a + " twice"), std::string::npos) << line;

  // A folder of baselines that holds the current run's file.
  fs::remove(dir / "b.csv");
  fs::copy_file(current, dir / "current.csv", fs::copy_options::overwrite_existing);
  const std::string inside = (dir / "current.csv").string();
  std::tie(code, line) = refused(dir.string() + " " + inside);
  EXPECT_EQ(code, 2);
  EXPECT_NE(line.find("the current run current_run.csv (repetition 1) in " + inside +
                      " is also among the baselines (in " + inside + "): a run cannot be its own baseline"),
            std::string::npos)
      << line;
}

// The table line of `label`'s `metric`, or "".
std::string table_line(const std::string& table, const std::string& label, const std::string& metric) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string case_id, placement, line_metric;
    words >> case_id >> placement >> line_metric;
    if (case_id + " " + placement == label && line_metric == metric) return line;
  }
  return "";
}

TEST(Compare, TwentyPercentSlowerIsARegressionNamingTheCase) {
  const std::vector<dts::Record> baseline = dts::read_results_csv(baseline_csv().string());
  const fs::path current = write_run("slower.csv", slowed(baseline, 1.2));
  const fs::path table = scratch_dir() / "slower_table.csv", xml = scratch_dir() / "slower.xml";
  // Which rows must be caught is decided by the baseline's own noise, measured on this machine:
  // scaled by 1.2, a time row's p05 clears its p95 when p95 < 1.2 p05 (the interval rule), and
  // every scaled sample clears every original one when max < 1.2 min (complete separation, p =
  // 1/252 with 5 iterations a side, under the U test's 0.01). Rows noisier than that may pass:
  // that is the gate working, not failing.
  std::set<std::string> must_intervals, must_samples;
  for (const dts::Record& rec : baseline) {
    if (rec.metric != "time" || rec.value <= 0) continue;
    const std::string label = rec.case_id + " " + rec.labels.placement;
    if (rec.stats.p95 < 1.2 * rec.stats.p05) must_intervals.insert(label);
    if (rec.stats.max < 1.2 * rec.stats.min) must_samples.insert(label);
  }
  ASSERT_FALSE(must_intervals.empty()) << "every baseline row is noisier than 20%: rerun on a quieter machine";
  // By default one baseline run gives no timing verdict (7 are needed at the 5% false-alarm rate):
  // the slowdown is not flagged, and not passed either: every timing row is blind, and the power
  // line and the cure say so.
  {
    const RunResult r = run_dtsuite(0, "compare " + baseline_csv().string() + " " + current.string());
    EXPECT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 3000);
    for (const std::string& label : must_intervals) {
      const std::string line = table_line(r.out, label, "time");
      EXPECT_NE(line.find("  blind  "), std::string::npos) << label << ": " << line;
    }
    EXPECT_NE(r.out.find("# power (a change flagged in 9 runs of 10): 0 rows can detect the 5% tolerance, 0 only a "
                         "larger change, "),
              std::string::npos)
        << r.out.substr(r.out.size() - std::min<size_t>(r.out.size(), 1500));
    EXPECT_NE(r.out.find(" nothing (fewer than 7 baseline runs)"), std::string::npos);
    EXPECT_NE(r.out.find("cure: "), std::string::npos);
    EXPECT_NE(r.out.find(": 7 baseline runs, recorded at different times"), std::string::npos);
  }
  // --min-runs 1: the runs' own noise judges, as it did before the gate knew its power.
  for (const std::string extra : {" --min-runs 1", " --min-runs 1 --samples"}) {
    SCOPED_TRACE(extra);
    const RunResult r = run_dtsuite(0, "compare " + baseline_csv().string() + " " + current.string() + extra +
                                           " --csv " + table.string() + " --junit " + xml.string());
    const bool samples = extra.find("--samples") != std::string::npos;
    if (!samples || !must_samples.empty()) {
      EXPECT_EQ(r.exit_code, 1) << r.err << r.out.substr(0, 3000);
      EXPECT_NE(r.out.find("# verdict: REGRESSION"), std::string::npos);
    }
    // The table names each case that had to be caught, flagged, with its +20% change.
    for (const std::string& label : !samples ? must_intervals : must_samples) {
      const std::string line = table_line(r.out, label, "time");
      EXPECT_NE(line.find("REGRESSED"), std::string::npos) << label << ": " << line;
      EXPECT_NE(line.find("+20.0%"), std::string::npos) << label << ": " << line;
    }
    // The CSV output: a header, then one line per compared row; no `time` row improved.
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line.rfind("suite,case,op,dtype,bytes,placement", 0), 0u) << line;
    int time_regressed = 0;
    while (std::getline(in, line)) {
      if (line.find(",time,seconds,") == std::string::npos) continue;
      EXPECT_EQ(line.find(",improved,"), std::string::npos) << line;
      time_regressed += line.find(",REGRESSED,") != std::string::npos;
    }
    EXPECT_GE(time_regressed, static_cast<int>((!samples ? must_intervals : must_samples).size()));
    // The JUnit output: well-formed, a failure per regressed row.
    const JunitCounts junit = read_junit(xml);
    EXPECT_GE(junit.failures, time_regressed);
  }
}

// The gate's two machine outputs carry the same verdicts: one JUnit testcase per CSV row, failed
// exactly when the row REGRESSED or went missing, skipped exactly when it is blind; here with 3
// baseline runs (the between-run noise; --min-runs 3), all_gather 50% slower, one check turned to
// fail, and the rest unchanged.
TEST(Compare, JunitAndCsvCarryTheSameVerdicts) {
  const std::vector<dts::Record> baseline = dts::read_results_csv(baseline_csv().string());
  std::vector<dts::Record> current = baseline;
  for (dts::Record& rec : current) {
    if (rec.labels.op == "all_gather") rec = slowed({rec}, 1.5).front();
  }
  bool turned = false;
  for (dts::Record& rec : current) {
    if (!turned && rec.labels.op == "broadcast" && rec.verdict == dts::Verdict::pass) {
      rec.verdict = dts::Verdict::fail;
      rec.detail = "planted";
      turned = true;
    }
  }
  ASSERT_TRUE(turned);
  const fs::path dir = scratch_dir() / "verdict_baselines";
  fs::create_directories(dir);
  for (const double factor : {1.0, 1.01, 0.99}) {
    const std::string name = "b" + std::to_string(static_cast<int>(factor * 100)) + ".csv";
    fs::copy_file(write_run(name, slowed(baseline, factor)), dir / name, fs::copy_options::overwrite_existing);
  }
  const fs::path cur = write_run("verdicts_current.csv", current);
  const fs::path table = scratch_dir() / "verdicts.csv", xml = scratch_dir() / "verdicts.xml";
  const RunResult r =
      run_dtsuite(0, "compare " + dir.string() + " " + cur.string() + " --min-runs 3 --csv " + table.string() +
                         " --junit " + xml.string());
  ASSERT_EQ(r.exit_code, 1) << r.err << r.out.substr(0, 3000);
  EXPECT_NE(r.out.find("baseline 3 runs from 3 file(s)"), std::string::npos) << r.out.substr(0, 600);

  // The CSV's rows, read with the header's columns.
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);
  const auto split = [](const std::string& text) {  // the fields used here hold no quotes
    std::vector<std::string> fields;
    std::string field;
    bool quoted = false;
    for (const char ch : text) {
      if (ch == '"') quoted = !quoted;
      else if (ch == ',' && !quoted) fields.push_back(std::exchange(field, ""));
      else field += ch;
    }
    fields.push_back(field);
    return fields;
  };
  const std::vector<std::string> header = split(line);
  const auto column = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const size_t case_col = column("case"), metric_col = column("metric"), verdict_col = column("verdict");
  ASSERT_LT(verdict_col, header.size());
  int rows = 0;
  int blind = 0;
  std::multiset<std::string> csv_failing;  // "case metric" of each REGRESSED or missing row
  std::set<std::string> regressed_ops;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split(line);
    ASSERT_EQ(f.size(), header.size()) << line;
    ++rows;
    blind += f[verdict_col] == "blind";
    // detectable_percent: a number, "inf", or empty (a row not judged by numbers); set on blind rows.
    const std::string& detectable = f[column("detectable_percent")];
    if (f[verdict_col] == "blind") {
      EXPECT_FALSE(detectable.empty()) << line;
      if (detectable != "inf") {
        EXPECT_GT(std::stod(detectable), 5) << line;
      }
    }
    if (f[verdict_col] == "REGRESSED" || f[verdict_col] == "MISSING") {
      csv_failing.insert(f[case_col] + " " + f[metric_col]);
      regressed_ops.insert(f[column("op")]);
    }
  }
  // The JUnit testcases: "<label> <metric>", the label starting with the case id.
  const JunitCounts junit = read_junit(xml);
  EXPECT_EQ(junit.testcases, rows);
  std::multiset<std::string> junit_failing;
  for (const std::string& name : junit.failing) {
    junit_failing.insert(name.substr(0, name.find(' ')) + " " + name.substr(name.rfind(' ') + 1));
  }
  EXPECT_EQ(junit_failing, csv_failing);
  EXPECT_EQ(junit.failures, static_cast<int>(csv_failing.size()));
  EXPECT_EQ(junit.skipped, blind);
  // What was planted, and nothing else: all_gather's rows and the broadcast check.
  EXPECT_EQ(regressed_ops, (std::set<std::string>{"all_gather", "broadcast"}));
  EXPECT_LT(junit.failures, rows);
}

TEST(Compare, AnOutputOverAnInputIsRefusedAndTheInputUnchanged) {
  const std::string before = read_file(baseline_csv());
  const fs::path current = scratch_dir() / "current_for_clobber.csv";
  fs::copy_file(baseline_csv(), current, fs::copy_options::overwrite_existing);
  // The baseline by another spelling (./), then the current run, each as --csv and as --junit.
  const std::string baseline_again = (baseline_csv().parent_path() / "." / baseline_csv().filename()).string();
  for (const std::string& output : {"--csv " + baseline_again, "--junit " + current.string()}) {
    const RunResult r = run_dtsuite(0, "compare " + baseline_csv().string() + " " + current.string() + " " + output);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    const auto ours = our_lines(r.err);
    ASSERT_EQ(ours.size(), 1u) << r.err;
    EXPECT_NE(ours[0].find("refusing to overwrite an input"), std::string::npos) << ours[0];
    EXPECT_EQ(read_file(baseline_csv()), before);  // byte for byte
    EXPECT_EQ(read_file(current), before);
  }
}

TEST(Compare, SpecialFileOutputsAreRefused) {
  const fs::path fifo = scratch_dir() / "compare_fifo";
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  for (const std::string flag : {"--csv", "--junit"}) {
    const RunResult r =
        run_dtsuite(0, "compare " + baseline_csv().string() + " " + baseline_csv().string() + " " + flag + " " + fifo.string());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    const auto ours = our_lines(r.err);
    ASSERT_EQ(ours.size(), 1u) << r.err;
    EXPECT_NE(ours[0].find(flag + " '" + fifo.string() + "' is a FIFO"), std::string::npos) << ours[0];
    EXPECT_TRUE(fs::is_fifo(fifo));
  }
}

// `--csv` is written whole or not at all, and a failure names the OS's reason: a folder where no
// file can be made (proc's, even for root), and a full disk (RLIMIT_FSIZE from the shell, SIGXFSZ
// ignored), which must leave the table of an earlier run as it was, byte for byte.
TEST(Compare, CsvOutputIsWholeOrNotAtAllNamingTheReason) {
  const std::string inputs =
      baseline_csv().string() + " " + write_run("csv_current.csv", dts::read_results_csv(baseline_csv().string())).string();
  if (fs::is_directory("/proc/self")) {
    const auto [code, line] = refused(inputs + " --csv /proc/self/x.csv");
    EXPECT_EQ(code, 2);
    EXPECT_NE(line.find("--csv '/proc/self/x.csv': " + std::string(std::strerror(ENOENT))), std::string::npos) << line;
  }
  const fs::path table = scratch_dir() / "kept_table.csv";
  std::ofstream(table) << "the table of an earlier run\n";
  // ulimit -f counts blocks of 512 or 1024 bytes: one block is smaller than the table (a line
  // per row of the baseline), and stdout goes where no limit applies.
  const RunResult r = run_shell("sh -c 'trap \"\" XFSZ; ulimit -f 1; exec " + std::string(DTS_BINARY) + " compare " +
                                inputs + " --csv " + table.string() + " >/dev/null'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const auto ours = our_lines(r.err);
  ASSERT_EQ(ours.size(), 1u) << r.err;
  EXPECT_NE(ours[0].find("--csv '" + table.string() + "': " + std::strerror(EFBIG) + " (left as it was)"),
            std::string::npos)
      << ours[0];
  EXPECT_EQ(read_file(table), "the table of an earlier run\n");
  for (const auto& entry : fs::directory_iterator(scratch_dir())) {
    EXPECT_NE(entry.path().extension(), ".tmp") << "a temporary file was left: " << entry.path();
  }
}

TEST(Compare, MalformedCsvIsOneLineAndExitTwo) {
  std::string text = read_file(baseline_csv());
  // Corrupt the `value` of the third data row (line 4): replace the row with too few fields.
  std::istringstream lines(text);
  std::string rebuilt, line;
  for (int n = 1; std::getline(lines, line); ++n) rebuilt += (n == 4 ? std::string("2,run,broken") : line) + "\n";
  const fs::path bad = scratch_dir() / "malformed.csv";
  std::ofstream(bad) << rebuilt;
  const RunResult r = run_dtsuite(0, "compare " + baseline_csv().string() + " " + bad.string());
  EXPECT_EQ(r.exit_code, 2);
  const auto ours = our_lines(r.err);
  ASSERT_EQ(ours.size(), 1u) << r.err;
  EXPECT_NE(ours[0].find(bad.string() + ":4: too few fields"), std::string::npos) << ours[0];
}

// Rows no measurement gives, each judged before (`ok`, `blind`, 608 rows `improved`, exit 0):
// malformed input now, one line naming the file, the line and what is impossible, exit 2, and
// no verdict printed, whichever side holds it.
TEST(Compare, RowsNoMeasurementGivesAreRefusedNamingTheLine) {
  const std::vector<dts::Record> baseline = dts::read_results_csv(baseline_csv().string());
  // The first time row whose p05 lies below its p95, so that swapping them puts them out of order.
  const auto row = std::find_if(baseline.begin(), baseline.end(), [](const dts::Record& r) {
    return r.metric == "time" && r.stats.p05 < r.stats.p95;
  });
  ASSERT_NE(row, baseline.end());
  const size_t index = static_cast<size_t>(row - baseline.begin());
  const std::string line = ":" + std::to_string(index + 2) + ": ";  // the header is line 1
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const struct {
    std::string name;
    std::function<void(dts::Record&)> change;
    std::string says;
  } faults[] = {
      {"p05_above_p95", [](dts::Record& r) { std::swap(r.stats.p05, r.stats.p95); }, "p05 "},
      {"nan_p05", [&](dts::Record& r) { r.stats.p05 = nan; }, "p05 is nan"},
      {"median_100_max", [](dts::Record& r) { r.value = r.stats.median = 100 * r.stats.max; }, "median "},
      {"max_below_min", [](dts::Record& r) { std::swap(r.stats.min, r.stats.max); }, "min "},
      {"every_time_0",
       [](dts::Record& r) {
         r.value = r.stats.min = r.stats.p05 = r.stats.median = r.stats.p95 = r.stats.max = 0;
         for (double& s : r.samples) s = 0;
       },
       "value 0 seconds: time is read from a clock"},
  };
  for (const auto& fault : faults) {
    std::vector<dts::Record> changed = baseline;
    for (size_t i = index; i < changed.size(); ++i) {
      if (changed[i].metric != "time") continue;
      fault.change(changed[i]);
      if (fault.name != "every_time_0") break;
    }
    const fs::path bad = write_run(fault.name + ".csv", changed);
    for (const std::string& args : {baseline_csv().string() + " " + bad.string(), bad.string() + " " + baseline_csv().string()}) {
      const RunResult r = run_dtsuite(0, "compare " + args + " --min-runs 1");
      EXPECT_EQ(r.exit_code, 2) << fault.name << "\n" << r.out.substr(0, 600);
      const auto ours = our_lines(r.err);
      ASSERT_EQ(ours.size(), 1u) << fault.name << ": " << r.err;
      EXPECT_NE(ours[0].find(bad.string() + line + fault.says), std::string::npos) << fault.name << ": " << ours[0];
      EXPECT_EQ(r.out.find(" time "), std::string::npos) << fault.name << ": a verdict was printed\n" << r.out;
    }
  }
}

TEST(Compare, UnreadableMissingCasesAndOtherStacksAreExitTwo) {
  std::vector<dts::Record> baseline = dts::read_results_csv(baseline_csv().string());
  // Missing cases: the current run lacks the baseline's last case.
  std::vector<dts::Record> fewer;
  for (const dts::Record& rec : baseline) {
    if (rec.case_id != baseline.back().case_id) fewer.push_back(rec);
  }
  // Another stack: the same numbers, said to come from 3 ranks.
  std::vector<dts::Record> other = baseline;
  for (dts::Record& rec : other) rec.labels.world_size = 3;
  const struct {
    std::string current, message;
  } cases[] = {
      {(scratch_dir() / "absent.csv").string(), "cannot read results CSV"},
      {write_run("fewer.csv", fewer).string(), "1 case(s) of the baseline are missing from the current run"},
      {write_run("other.csv", other).string(), "different stacks: world_size 2 (baseline) vs 3 (current)"},
  };
  for (const auto& c : cases) {
    const RunResult r = run_dtsuite(0, "compare " + baseline_csv().string() + " " + c.current);
    EXPECT_EQ(r.exit_code, 2) << c.current;
    const auto ours = our_lines(r.err);
    ASSERT_EQ(ours.size(), 1u) << r.err;
    EXPECT_NE(ours[0].find(c.message), std::string::npos) << ours[0];
  }
}

// `run --repeat 3`: every case once per repetition, each pass in its own order, every row saying
// its repetition; `compare` takes the passes as runs, several files or a folder as baseline runs,
// and with one baseline run says that the between-run noise is unknown.
TEST(CompareRuns, RepetitionsFilesAndFoldersAreRuns) {
  const fs::path dir = scratch_dir() / "baseline_runs";
  fs::create_directories(dir);
  const fs::path repeated = dir / "repeated.csv", single = scratch_dir() / "single.csv";
  const std::string sweep = "run collectives --collective all_reduce,all_gather -d f32 -o sum -b 8 -e 512 -f 4 -c 0 -n 3";
  RunResult r = run_dtsuite(2, sweep + " --repeat 3 --csv " + repeated.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3 repetitions of the plan"), std::string::npos) << r.out;
  std::vector<std::vector<std::string>> order(3);  // case ids of each repetition, in the order run
  for (const dts::Record& rec : dts::read_results_csv(repeated.string())) {
    ASSERT_GE(rec.repetition, 1);
    ASSERT_LE(rec.repetition, 3);
    auto& cases = order[static_cast<size_t>(rec.repetition - 1)];
    if (cases.empty() || cases.back() != rec.case_id) cases.push_back(rec.case_id);
  }
  ASSERT_GT(order[0].size(), 4u);
  for (const auto& cases : order) {
    EXPECT_EQ(std::set<std::string>(cases.begin(), cases.end()), std::set<std::string>(order[0].begin(), order[0].end()));
    EXPECT_EQ(cases.size(), order[0].size());  // each case once per pass
  }
  EXPECT_TRUE(order[0] != order[1] || order[1] != order[2]) << "three passes in one order";

  // The repeated file against a rerun of the same numbers: 3 baseline runs, 3 current runs,
  // nothing changed.
  const fs::path rerun = write_run("repeated_again.csv", dts::read_results_csv(repeated.string()));
  r = run_dtsuite(0, "compare " + repeated.string() + " " + rerun.string());
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("baseline 3 runs from 1 file(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("beyond the between-run noise of 3 runs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 regressed"), std::string::npos) << r.out;

  // A folder of baselines, and a second run of one pass as the current run.
  r = run_dtsuite(2, sweep + " --csv " + single.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // (A tolerance of 1e6%: which rows a stall on this shared machine slows is not the point here.)
  r = run_dtsuite(0, "compare " + dir.string() + " " + single.string() + " --tolerance 1e6");
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("baseline 3 runs from 1 file(s)"), std::string::npos) << r.out;

  // One baseline run: the header says what is missing.
  r = run_dtsuite(0, "compare " + single.string() + " " +
                         write_run("single_again.csv", dts::read_results_csv(single.string())).string());
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("between-run noise: unknown (1 run of the baseline)"), std::string::npos) << r.out;

  // The current run must be a file; an empty folder is no baseline.
  r = run_dtsuite(0, "compare " + single.string() + " " + dir.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is a folder; the last argument is the current run's CSV"), std::string::npos) << r.err;
  const fs::path empty = scratch_dir() / "no_baselines";
  fs::create_directories(empty);
  r = run_dtsuite(0, "compare " + empty.string() + " " + single.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("holds no .csv file"), std::string::npos) << r.err;
}

}  // namespace
