// End-to-end test of `dtsuite plan` on measurement files written as the suites write them (lines
// of known alpha and beta, so the ranking is known): the table and the plan_* rows, and every
// kind of bad input as one line and exit 2 (a group or the compute the files lack, with the
// command that measures it; two stacks; an output over an input; bad flags), nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "harness/testing/e2e.h"
#include "results/csv_reader.h"
#include "results/csv_sink.h"
#include "results/record.h"

namespace {

namespace fs = std::filesystem;
using namespace dts::e2e;

dts::Labels stack(int ranks, const std::string& backend = "mpi") {
  dts::Labels l;
  l.backend = backend;
  l.backend_version = l.mpi_version = "Open MPI v4.1.4";
  l.device = "cpu";
  l.world_size = ranks;
  l.nodes = 1;
  l.ranks_per_node = ranks;
  return l;
}

// Collectives on 2 and 4 ranks (20 us + bytes / 2 GB/s), same-node messages (5 us + bytes / 4
// GB/s), and one rank's ddp step of a 3 x 64 MLP at two batches (1 ms + FLOPs / 1 GFLOP/s).
void write_measurements(const fs::path& path, const std::string& backend = "mpi", bool with_two = true,
                        bool with_compute = true, bool with_link = true) {
  dts::CsvSink csv(path.string());
  // What the harness fills in for every record it emits.
  const auto write = [&](dts::Record r) {
    r.run_id = "measured";
    r.timestamp = "2026-11-27T00:00:00.000Z";
    r.case_id = r.suite + "/" + r.metric + "/" + std::to_string(r.labels.world_size) + "/" + r.labels.op + "/" +
                std::to_string(r.labels.bytes) + "/" + r.labels.config;
    csv.write(r);
  };
  for (int ranks : {2, 4}) {
    if (ranks == 2 && !with_two) continue;
    for (const char* collective : {"all_reduce", "reduce_scatter", "all_gather"}) {
      for (int64_t b = 8; b <= (int64_t{16} << 20); b *= 4) {
        dts::Record r;
        r.suite = "collectives";
        r.metric = "time";
        r.unit = "seconds";
        r.labels = stack(ranks, backend);
        r.labels.op = collective;
        r.labels.dtype = "f32";
        r.labels.bytes = b;
        r.labels.placement = "out_of_place";
        r.labels.config = "redop=sum";
        r.value = 20e-6 + static_cast<double>(b) / 2e9;
        r.verdict = dts::Verdict::pass;
        write(r);
      }
    }
  }
  for (int64_t b : {int64_t{8}, int64_t{1} << 22}) {
    if (!with_link) break;
    dts::Record r;
    r.suite = "topology";
    r.metric = "p2p_latency";
    r.unit = "seconds";
    r.labels = stack(2, backend);
    r.labels.bytes = b;
    r.labels.config = "link=same-node;direction=one-way";
    r.value = 5e-6 + static_cast<double>(b) / 4e9;
    r.verdict = dts::Verdict::info;
    write(r);
  }
  for (int64_t batch : {16, 64}) {
    if (!with_compute) break;
    dts::Record r;
    r.suite = "scaling";
    r.metric = "step_time";
    r.unit = "seconds";
    r.labels = stack(1, backend);
    r.labels.strategy = "ddp";
    r.labels.config = "dp=1;tp=1;pp=1;zero=0;mb=1;schedule=none;mode=weak;job=4;layers=3;width=64;input=32;"
                      "classes=10;batch=" + std::to_string(batch);
    // training FLOPs of 32 -> 64 -> 64 -> 10 on `batch` rows: 2 B (2048 x 2 + 4096 x 3 + 640 x 3)
    r.value = 1e-3 + 2.0 * static_cast<double>(batch) * (2048 * 2 + 4096 * 3 + 640 * 3) / 1e9;
    r.verdict = dts::Verdict::info;
    write(r);
  }
  csv.close();
}

// The line of stderr that is the error.
std::string error_line(const RunResult& r) {
  const auto lines = our_lines(r.err);
  return lines.empty() ? "" : lines.front();
}

TEST(Plan, RanksTheLayoutsAndWritesTheRows) {
  const fs::path m = scratch_dir() / "m.csv", out = scratch_dir() / "plan.csv";
  write_measurements(m);
  const RunResult r = run_dtsuite(0, "plan --measurements " + m.string() + " --ranks 4 --batch 64 --csv " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("on 4 ranks (4 per node), global batch 64"), std::string::npos) << r.out;
  // Every strategy planned appears in the table; the pipelines alone have no layout (4 stages of
  // 3 layers), said in a line of their own.
  for (const char* s : {"ddp", "zero1", "zero2", "zero3", "tp", "hybrid", "ps-sync", "ps-async", "ps-ssp", "ps-backup", "gossip"}) {
    EXPECT_NE(r.out.find(std::string(" ") + s + " "), std::string::npos) << s << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("# no layout: gpipe: 3 layers cannot be split into 4 pipeline stages"), std::string::npos) << r.out;
  const std::vector<dts::Record> rows = dts::read_results_csv(out.string());
  double previous = 0;
  int layouts = 0;
  std::set<std::string> p2p_groups;
  for (const dts::Record& row : rows) {
    EXPECT_EQ(row.suite, "plan");
    EXPECT_EQ(row.labels.world_size, 4);
    if (row.metric == "plan_exposed_comm_time" && (row.labels.strategy.starts_with("ps-") || row.labels.strategy == "gossip")) {
      p2p_groups.insert(row.labels.strategy + ":" + dts::config_value(row.labels.config, "group").value_or(""));
    }
    if (row.metric != "plan_step_time") continue;
    ++layouts;
    // In rank order, by predicted step time (no memory limit: none over it).
    EXPECT_GE(row.value, previous) << row.case_id;
    previous = row.value;
    EXPECT_EQ(dts::config_value(row.labels.config, "plan_rank").value_or(""), std::to_string(layouts));
  }
  // ddp, zero1-3 and tp4 once each; hybrid on 4 ranks: dp2-tp2 and dp2-pp2 with and without
  // ZeRO-1 and tp2-pp2 without (ZeRO needs dp > 1), each at m = 1, 2, 4, 8, 16: 5 x 5; ps-sync,
  // ps-async and ps-ssp with 1, 2 or 3 servers, ps-backup (one backup) with the 1 or 2 that leave
  // it more than one worker; gossip once.
  EXPECT_EQ(layouts, 5 + 25 + 3 * 3 + 2 + 1);
  // The parameter servers' and gossip's messages, each in its group.
  EXPECT_EQ(p2p_groups, (std::set<std::string>{"gossip:ring", "ps-async:ps", "ps-backup:ps", "ps-ssp:ps", "ps-sync:ps"}));
  // One rank: every strategy's one-rank layout, no communication priced (none measured for it).
  const RunResult one = run_dtsuite(0, "plan --measurements " + m.string() + " --ranks 1 --strategy ddp,zero1");
  EXPECT_EQ(one.exit_code, 0) << one.err;
}

// Bigger than the measurements, on paper: 8 nodes of 8 ranks from one node and two. Refused as
// not measured; with --extend, every extended group named in a line of its own.
TEST(Plan, ALargerClusterOnPaperNamesWhatWasExtended) {
  const fs::path one = scratch_dir() / "one-node.csv", two = scratch_dir() / "two-nodes.csv";
  write_measurements(one);
  {
    // 4 ranks on 2 nodes (2 per node), and messages between nodes, as a second file.
    dts::CsvSink csv(two.string());
    for (dts::Record r : dts::read_results_csv(one.string())) {
      if (r.suite == "collectives" && r.labels.world_size == 4) {
        r.labels.nodes = 2;
        r.labels.ranks_per_node = 2;
        r.case_id += "/2nodes";
        r.value *= 4;
        csv.write(r);
      } else if (r.suite == "topology") {
        r.labels.config = "link=other-node;direction=one-way";
        r.value *= 10;
        csv.write(r);
      }
    }
    csv.close();
  }
  const std::string args = "plan --measurements " + one.string() + " " + two.string() + " --ranks 64 --ranks-per-node 8";
  RunResult r = run_dtsuite(0, args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(error_line(r).find("on 8 nodes (8 per node): not measured"), std::string::npos) << r.err;
  r = run_dtsuite(0, args + " --extend");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("on 64 ranks (8 per node)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# not measured, all_reduce f32 on 64 ranks on 8 nodes (8 per node): extended from 4 ranks on "
                       "2 nodes (2 per node) by the ring model"),
            std::string::npos)
      << r.out;
  // A tp group of 8 inside a node: from the single-node measurement nearest in ranks.
  EXPECT_NE(r.out.find("on 8 ranks on 1 node: extended from 4 ranks on 1 node"), std::string::npos) << r.out;
}

TEST(Plan, AMemoryLimitMarksTheLayoutsAboveIt) {
  const fs::path m = scratch_dir() / "m2.csv";
  write_measurements(m);
  // 3 x 64 MLP: 6,922 parameters. ddp holds 4 f32 copies (110.8 kB) and 16 rows' activations
  // (16 x (32 + 64 + 64 + 10) x 4 = 10.9 kB); zero3 on 4 ranks a quarter of the copies (27.7 kB)
  // and the same activations: 50 KiB lies between.
  const RunResult r = run_dtsuite(0, "plan --measurements " + m.string() + " --ranks 4 --memory-per-rank 50K");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t ddp = r.out.find(" ddp ");
  ASSERT_NE(ddp, std::string::npos) << r.out;
  const std::string ddp_line = r.out.substr(ddp, r.out.find('\n', ddp) - ddp);
  EXPECT_NE(ddp_line.find("over the memory limit"), std::string::npos) << r.out;
  const size_t zero3 = r.out.find(" zero3 ");
  ASSERT_NE(zero3, std::string::npos);
  EXPECT_EQ(r.out.substr(zero3, r.out.find('\n', zero3) - zero3).find("over the memory limit"), std::string::npos) << r.out;
  EXPECT_LT(zero3, ddp) << "layouts within the limit come first";
}

TEST(Plan, WhatTheFilesLackIsOneLineWithTheCommandExit2) {
  const fs::path four = scratch_dir() / "four.csv", no_compute = scratch_dir() / "nocompute.csv",
                 other = scratch_dir() / "other.csv", out = scratch_dir() / "never.csv",
                 no_link = scratch_dir() / "nolink.csv";
  write_measurements(four, "mpi", /*with_two=*/false);
  write_measurements(no_link, "mpi", true, true, /*with_link=*/false);
  write_measurements(no_compute, "mpi", true, /*with_compute=*/false);
  write_measurements(other, "nccl");
  // tp = 2 x dp = 2 needs groups of 2.
  RunResult r = run_dtsuite(0, "plan --measurements " + four.string() + " --ranks 4 --strategy hybrid --csv " + out.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(error_line(r).find("on 2 ranks on 1 node: not measured"), std::string::npos) << r.err;
  EXPECT_NE(error_line(r).find("mpirun -np 2 dtsuite run collectives"), std::string::npos) << r.err;
  EXPECT_EQ(our_lines(r.err).size(), 1u) << r.err;
  EXPECT_FALSE(fs::exists(out)) << "a refused plan wrote rows";
  r = run_dtsuite(0, "plan --measurements " + no_compute.string() + " --ranks 4 --strategy ddp");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(error_line(r).find("dtsuite run scaling --strategy all"), std::string::npos) << r.err;
  r = run_dtsuite(0, "plan --measurements " + four.string() + " " + other.string() + " --ranks 4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(error_line(r).find("another stack"), std::string::npos) << r.err;
  // The parameter servers price their messages on the point-to-point line: a file without it is
  // refused, naming the topology suite.
  r = run_dtsuite(0, "plan --measurements " + no_link.string() + " --ranks 4 --strategy ps-sync");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(error_line(r).find("dtsuite run topology"), std::string::npos) << r.err;
}

TEST(Plan, BadFlagsAndAnOutputOverAnInputExit2) {
  const fs::path m = scratch_dir() / "m3.csv";
  write_measurements(m);
  const std::string before = read_file(m);
  for (const std::string& args :
       std::vector<std::string>{"plan --ranks 4", "plan --measurements " + m.string(), "plan --measurements " + m.string() + " --ranks 0",
        "plan --measurements " + m.string() + " --ranks 6 --ranks-per-node 4",
        "plan --measurements " + m.string() + " --ranks 4 --memory-per-rank lots",
        "plan --measurements " + m.string() + " --ranks 4 --strategy nonesuch",
        "plan --measurements " + m.string() + " --ranks 4 --csv " + m.string(),
        "plan --measurements " + (scratch_dir() / "absent.csv").string() + " --ranks 4"}) {
    const RunResult r = run_dtsuite(0, args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out << r.err;
    EXPECT_EQ(our_lines(r.err).size(), 1u) << args << "\n" << r.err;
  }
  EXPECT_EQ(read_file(m), before) << "an input was written over";
}

// Measurement files that no run writes: a time of 1e200 s (it priced every call at 0 ms), NaN
// and 0 (left out, the group then "not measured"), each refused at its line; a group of one size
// says a fit needs two; one file given twice, under any name, is refused. One line, exit 2.
TEST(Plan, ImpossibleFiguresOneSizeAndAFileTwiceAreOneLineExit2) {
  const fs::path m = scratch_dir() / "m4.csv";
  write_measurements(m);
  const std::vector<dts::Record> rows = dts::read_results_csv(m.string());
  const auto changed = [&](const std::string& name, const std::function<bool(dts::Record&)>& change) {
    const fs::path path = scratch_dir() / name;
    dts::CsvSink csv(path.string());
    for (dts::Record r : rows) {
      if (change(r)) csv.write(r);
    }
    csv.close();
    return path;
  };
  // Line 2 is the first row: all_reduce on 2 ranks, 8 bytes.
  const auto first_time = [](double seconds) {
    return [seconds](dts::Record& r) {
      if (r.labels.world_size == 2 && r.labels.op == "all_reduce" && r.labels.bytes == 8) r.value = seconds;
      return true;
    };
  };
  const struct {
    fs::path file;
    std::string says;
  } cases[] = {
      {changed("e200.csv", first_time(1e200)), "e200.csv:2: time 1e+200 seconds is no clock's reading"},
      {changed("e300.csv", first_time(1e300)), "e300.csv:2: time 1e+300 seconds is no clock's reading"},
      {changed("nan.csv", first_time(std::numeric_limits<double>::quiet_NaN())),
       "nan.csv:2: value nan seconds: time is read from a clock"},
      {changed("zero.csv", first_time(0)), "zero.csv:2: value 0 seconds: time is read from a clock"},
      // all_reduce on 2 ranks at 8 bytes only.
      {changed("one-size.csv",
               [](dts::Record& r) { return !(r.labels.world_size == 2 && r.labels.op == "all_reduce" && r.labels.bytes > 8); }),
       "all_reduce in f32 on 2 ranks on 1 node: alpha-beta fit: needs at least two distinct sizes, got 1 (8 bytes)"},
  };
  for (const auto& c : cases) {
    const RunResult r = run_dtsuite(0, "plan --measurements " + c.file.string() + " --ranks 4 --strategy all");
    EXPECT_EQ(r.exit_code, 2) << c.file << "\n" << r.out.substr(0, 600);
    EXPECT_EQ(our_lines(r.err).size(), 1u) << r.err;
    EXPECT_NE(error_line(r).find(c.says), std::string::npos) << error_line(r);
  }
  const fs::path link = scratch_dir() / "m4-link.csv";
  fs::remove(link);
  fs::create_symlink(m, link);
  for (const std::string& again : {m.string(), (m.parent_path() / "." / m.filename()).string(), link.string()}) {
    const RunResult r = run_dtsuite(0, "plan --measurements " + m.string() + " " + again + " --ranks 4");
    EXPECT_EQ(r.exit_code, 2) << again;
    EXPECT_EQ(our_lines(r.err).size(), 1u) << r.err;
    EXPECT_NE(error_line(r).find("are one file"), std::string::npos) << error_line(r);
  }
}

}  // namespace

namespace {

// The rows of one verification, by metric then case.
std::map<std::string, std::map<std::string, dts::Record>> by_metric(const fs::path& csv) {
  std::map<std::string, std::map<std::string, dts::Record>> out;
  for (const dts::Record& r : dts::read_results_csv(csv.string())) out[r.metric][r.case_id] = r;
  return out;
}

// plan --verify on 2 ranks: the K = 1 layout predicted fastest and the one predicted slowest,
// timed on the stack; each layout's plan_error is its own measured / predicted - 1, and the exit
// code is the check's. The predictions come from lines made up for the test, so whether the goals
// hold here is not asserted: the faulty stack below is what must fail them.
TEST(PlanVerify, TimesTheBestAndTheWorstAndSaysHowWrongThePlanWas) {
  const fs::path m = scratch_dir() / "mv.csv", out = scratch_dir() / "verify.csv";
  write_measurements(m);
  const std::string flags = " --measurements " + m.string() + " --verify 1 -n 5 -w 1 --csv ";
  const RunResult r = run_dtsuite(2, "plan" + flags + out.string());
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err << r.out;
  auto rows = by_metric(out);
  ASSERT_EQ(rows["plan_error"].size(), 2u) << r.out;
  for (const auto& [id, error] : rows["plan_error"]) {
    const double measured = rows["step_time"].at(id).value, predicted = rows["plan_step_time"].at(id).value;
    EXPECT_GT(measured, 0) << id;
    EXPECT_NEAR(error.value, measured / predicted - 1, 1e-9 * std::abs(measured / predicted)) << id;
  }
  const dts::Record& check = rows["check"].at("verify");
  EXPECT_EQ(r.exit_code, check.verdict == dts::Verdict::pass ? 0 : 1) << check.detail;
  for (const char* summary : {"plan_error_median", "plan_error_max", "plan_best_rank"}) {
    EXPECT_EQ(rows[summary].count("verify"), 1u) << summary;
  }
}

// A stack slower than its measurements say (each call on rank 1 delayed 20 ms, where the lines
// predict about a millisecond a step) misses the goals: the check fails, exit 1.
// The same through point-to-point messages alone: the parameter servers and gossip.
TEST(PlanVerify, AStackSlowerThanItsMeasurementsFailsTheCheck) {
  const fs::path m = scratch_dir() / "mf.csv";
  write_measurements(m);
  for (const std::string strategies : {"all", "ps-sync,ps-async,gossip"}) {
    SCOPED_TRACE(strategies);
    const fs::path out = scratch_dir() / ("faulty-" + std::to_string(strategies.size()) + ".csv");
    const RunResult r = run_dtsuite(2, "plan --backend 'faulty(delay(20),mpi)' --fault-rank 1 --measurements " +
                                           m.string() + " --strategy " + strategies + " --verify 1 -n 3 -w 1 --csv " +
                                           out.string());
    EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
    auto rows = by_metric(out);
    const dts::Record& check = rows["check"].at("verify");
    EXPECT_EQ(check.verdict, dts::Verdict::fail);
    EXPECT_NE(check.detail.find("missed: median |plan_error|"), std::string::npos) << check.detail;
    EXPECT_EQ(rows["plan_error"].size(), 2u);
    for (const auto& [id, error] : rows["plan_error"]) EXPECT_GT(error.value, 1) << id << ": " << error.detail;
  }
}

TEST(PlanVerify, BadInputIsOneLineExit2) {
  const fs::path m = scratch_dir() / "mb.csv";
  write_measurements(m);
  for (const std::string& args :
       std::vector<std::string>{"plan --measurements " + m.string() + " --verify 1 --ranks 2",
                                "run plan --verify 1", "plan --measurements " + m.string() + " --verify 0",
                                "plan --measurements " + m.string() + " --verify 1 --memory-per-rank 1",
                                "plan --measurements " + m.string() + " --verify=1 --extend",
                                // Under mpirun the offline plan would print and write on every rank.
                                "plan --measurements " + m.string() + " --ranks 2"}) {
    const RunResult r = run_dtsuite(2, args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out << r.err;
    EXPECT_EQ(our_lines(r.err).size(), 1u) << args << "\n" << r.err;
  }
}


// The planner's cost grows with the layouts it prices: 65,536 ranks with --extend
// ended in std::bad_alloc at 2.8 GB (every parameter server layout's S x W messages held at
// once), and 4,096 took 85 s. The parameter servers, whose messages grow as ranks^3 over their layouts,
// are left out past the planner's bound, each in a line naming it; a pinned one is planned.
TEST(Plan, AClusterOfManyRanksIsPlannedWithinMemory) {
  const fs::path m = scratch_dir() / "many.csv";
  write_measurements(m);
  // A batch of 2^20 rows gives every replica of 65,536 rows (and 16 micro-batches) some.
  const std::string args = "plan --measurements " + m.string() + " --ranks 65536 --batch 1048576 --extend --top 3";
  RunResult r = run_shell(memory_cap() + std::string(DTS_BINARY) + " " + args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* ps : {"ps-sync", "ps-async", "ps-ssp", "ps-backup"}) {
    EXPECT_NE(r.out.find(std::string("# no layout: ") + ps + ": "), std::string::npos) << ps << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("over the 4194304 the planner prices one by one"), std::string::npos) << r.out;
  r = run_shell(memory_cap() + std::string(DTS_BINARY) + " " + args + " --strategy 'ps-sync(servers=2)'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(" ps-sync   s2-w65534 "), std::string::npos) << r.out;
}

// A model far beyond any rank's memory, on paper: --width 65536 --layers 1000 (4.3e12
// parameters) failed with std::bad_alloc at 3 GB (a tensor-parallel stage's layout listed a run
// per weight row). The planner allocates nothing per parameter: planned, every layout over
// --memory-per-rank marked.
TEST(Plan, AModelOfTrillionsOfParametersIsPlannedOnPaper) {
  const fs::path m = scratch_dir() / "huge.csv";
  write_measurements(m);
  const RunResult r = run_shell(memory_cap() + std::string(DTS_BINARY) + " plan --measurements " + m.string() +
                                " --ranks 4 --width 65536 --layers 1000 --memory-per-rank 80G --top 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("a 1000-layer MLP of width 65536"), std::string::npos) << r.out;
  // The smallest layout holds a quarter of 4.3e12 parameters' copies: terabytes, over 80G.
  EXPECT_NE(r.out.find("over the memory limit"), std::string::npos) << r.out;
}

// An empty --memory-per-rank (a script's unset variable) was taken as no limit.
TEST(Plan, AnEmptyMemoryPerRankIsRefused) {
  const fs::path m = scratch_dir() / "empty.csv";
  write_measurements(m);
  for (const std::string& args : {"plan --measurements " + m.string() + " --ranks 4 --memory-per-rank ''",
                                  "run plan --measurements " + m.string() + " --memory-per-rank ''"}) {
    const RunResult r = run_dtsuite(args.starts_with("run") ? 2 : 0, args);
    EXPECT_EQ(r.exit_code, 2) << args << r.err;
    const auto lines = our_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << args << r.err;
    EXPECT_NE(lines[0].find("--memory-per-rank: an empty value (a size such as 16G)"), std::string::npos) << lines[0];
  }
}

// --verify of a model no rank can hold blamed --memory-per-rank, which was not given (and without
// a limit the layouts were run: the kernel killed the job). Now the bound is this node's memory
// or the process's limit, named with the bytes the smallest layout needs.
TEST(PlanVerify, ALayoutThatCannotFitNamesTheMachinesBound) {
  const fs::path m = scratch_dir() / "nofit.csv";
  write_measurements(m);
  // --width 100000: 10 billion parameters, 60 GB a rank in the smallest layout.
  const RunResult r = run_shell(memory_cap() + std::string(DTS_MPIEXEC) + " -np 2 " + DTS_MPIEXEC_FLAGS + " " +
                                DTS_BINARY + " plan --measurements " + m.string() + " --verify 1 --width 100000");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const auto lines = our_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("plan: no layout of 2 ranks fits: the smallest needs 60.1 GB per rank, and a rank may hold"),
            std::string::npos)
      << lines[0];
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_NE(lines[0].find("(ulimit -v leaves"), std::string::npos) << lines[0];
#endif
  EXPECT_EQ(lines[0].find("--memory-per-rank"), std::string::npos) << lines[0];
}

}  // namespace
