// The planner's index of measurements (measurements.h) on rows made as the suites write them:
// what it takes, what it leaves, and the one line it gives for what is missing.
#include "planner/measurements.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"

namespace dts::planner {
namespace {

Labels mpi_stack(int ranks, int nodes = 1) {
  Labels l;
  l.backend = "mpi";
  l.backend_version = "Open MPI v4.1.4, package: Debian";
  l.mpi_version = "Open MPI v4.1.4, package: Debian";
  l.device = "cpu";
  l.world_size = ranks;
  l.nodes = nodes;
  l.ranks_per_node = ranks / nodes;
  return l;
}

// A collectives `time` row as the suite writes it.
Record time_row(const Labels& stack, const std::string& collective, const std::string& dtype, int64_t bytes,
                double seconds, const std::string& redop = "sum", const std::string& placement = "out_of_place") {
  Record r;
  r.suite = "collectives";
  r.metric = "time";
  r.unit = "seconds";
  r.labels = stack;
  r.labels.op = collective;
  r.labels.dtype = dtype;
  r.labels.bytes = bytes;
  r.labels.placement = placement;
  r.labels.config = "redop=" + redop + ";root=-1;count=" + std::to_string(bytes / 4);
  r.value = seconds;
  return r;
}

// all_reduce f32 on 4 ranks: 20 us + bytes / 2 GB/s, sizes 8 B to 8 MiB (x4).
std::vector<Record> all_reduce_rows(const Labels& stack) {
  std::vector<Record> rows;
  for (int64_t b = 8; b <= (int64_t{8} << 20); b *= 4) {
    rows.push_back(time_row(stack, "all_reduce", "f32", b, 20e-6 + static_cast<double>(b) / 2e9));
  }
  return rows;
}

TEST(Measurements, FitsTheCollectivesOfAGroupShape) {
  Measurements m;
  std::vector<Record> rows = all_reduce_rows(mpi_stack(4));
  // Rows it must leave out: in place, another reduction, a skipped case, a failed one.
  rows.push_back(time_row(mpi_stack(4), "all_reduce", "f32", 4096, 1.0, "sum", "in_place"));
  rows.push_back(time_row(mpi_stack(4), "all_reduce", "f32", 4096, 1.0, "max"));
  rows.push_back(time_row(mpi_stack(4), "all_reduce", "f32", 4096, 1.0));
  rows.back().verdict = Verdict::skip;
  rows.push_back(time_row(mpi_stack(4), "all_reduce", "f32", 4096, 1.0));
  rows.back().verdict = Verdict::fail;
  rows.push_back(time_row(mpi_stack(4), "all_reduce", "f32", 0, 1.0));  // an empty call: the library's no-op
  m.add(rows, "a.csv");
  const AlphaBetaFit fit = m.collective("all_reduce", "f32", {4, 1, 4});
  ASSERT_EQ(fit.pieces.size(), 1u) << fit.describe();
  EXPECT_NEAR(fit.pieces[0].alpha, 20e-6, 20e-6 * 1e-9);  // any of the 1.0 s rows would move it by far more
  EXPECT_NEAR(fit.pieces[0].beta(), 2e9, 2e9 * 1e-9);
  ASSERT_EQ(m.collectives().size(), 1u);
  EXPECT_EQ(m.collectives()[0].shape.text(), "4 ranks on 1 node");
  EXPECT_EQ(m.stack().text(), "mpi Open MPI v4.1.4 on cpu");  // the version line in a few words, once
  // One node said without its ranks per node is the same group; rows written with nodes = 0
  // (a run that did not count them) are one node too.
  EXPECT_EQ(m.collective("all_reduce", "f32", {4}).pieces.size(), 1u);
  Labels uncounted = mpi_stack(4);
  uncounted.nodes = 0;
  uncounted.ranks_per_node = 0;
  Measurements u;
  u.add(all_reduce_rows(uncounted), "u.csv");
  EXPECT_NO_THROW(u.collective("all_reduce", "f32", {4, 1, 4}));
}

TEST(Measurements, WhatIsMissingIsOneLineWithTheCommandThatMeasuresIt) {
  Measurements m;
  m.add(all_reduce_rows(mpi_stack(4)), "a.csv");
  try {
    m.collective("all_reduce", "f32", {2, 1, 2});
    FAIL() << "a group of 2 was never measured";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find("all_reduce in f32 on 2 ranks on 1 node: not measured (measured on 4 ranks on 1 node) in a.csv"),
              std::string::npos) << what;
    EXPECT_NE(what.find("mpirun -np 2 dtsuite run collectives --collective all_reduce -d f32 -o sum"), std::string::npos)
        << what;
  }
  EXPECT_THROW(m.collective("all_gather", "f32", {4, 1, 4}), Error);
  EXPECT_THROW(m.collective("all_reduce", "bf16", {4, 1, 4}), Error);
  EXPECT_THROW(m.collective("all_reduce", "f32", {4, 2, 2}), Error);  // the same ranks over two nodes: another group
  try {
    m.link(kOtherNode);
    FAIL() << "no topology rows were added";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dtsuite run topology"), std::string::npos) << e.what();
  }
  // One size only: no line, said as such.
  Measurements one;
  one.add({time_row(mpi_stack(2), "broadcast", "f32", 64, 1e-5, "none")}, "b.csv");
  try {
    one.collective("broadcast", "f32", {2, 1, 2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("two distinct sizes"), std::string::npos) << e.what();
  }
}

// Figures no clock reads, in a row the planner takes: refused at their line (row i of the file is
// line i + 2), not left out (NaN and 0 were, and the group was then "not measured") nor fitted
// (1e200 s made the fit's weights 0 and priced every call at 0 s).
TEST(Measurements, FiguresNoClockReadsAreRefusedAtTheirLine) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // kLongestFitTime is 1e9 s and kShortestFitTime 1e-15 s: just past each, and far past.
  for (const double seconds : {nan, 0.0, -1e-6, 2e9, 1e200, 1e300, 1e-16}) {
    std::vector<Record> rows = all_reduce_rows(mpi_stack(4));
    rows[2].value = seconds;  // line 4
    Measurements m;
    try {
      m.add(rows, "m.csv");
      ADD_FAILURE() << "taken: " << seconds;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("m.csv:4: time ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find("no clock's reading"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(m.empty()) << "a refused file left rows behind";
  }
  // A bandwidth is bytes over a time: 4 MiB at 1e-300 bytes/s would take 4e306 s.
  Record bw;
  bw.suite = "topology";
  bw.metric = "p2p_bandwidth";
  bw.unit = "bytes_per_second";
  bw.labels = mpi_stack(2);
  bw.labels.bytes = 4 << 20;
  bw.labels.config = "src=0;dst=1;direction=one-way;link=same-node";
  bw.value = 1e-300;
  Measurements m;
  try {
    m.add({bw}, "topo.csv");
    ADD_FAILURE() << "a bandwidth of 1e-300 bytes/s was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("topo.csv:2: p2p_bandwidth 1e-300 bytes_per_second (4194304 bytes in"),
              std::string::npos) << e.what();
  }
  // The rows it leaves out are not judged: a skipped case's 0, an empty message's bandwidth.
  std::vector<Record> rows = all_reduce_rows(mpi_stack(4));
  rows.push_back(time_row(mpi_stack(4), "all_reduce", "f32", 4096, 0));
  rows.back().verdict = Verdict::skip;
  bw.labels.bytes = 0;
  bw.value = 0;
  rows.push_back(bw);
  EXPECT_NO_THROW(m.add(rows, "m.csv"));
}

// A group measured at one size has no line: where another group would be extended from it, the
// message says so, not just "not measured".
TEST(Measurements, AGroupOfOneSizeSaysAFitNeedsTwo) {
  Measurements m;
  m.add({time_row(mpi_stack(4), "all_reduce", "f32", 64, 1e-5), time_row(mpi_stack(4), "all_reduce", "f32", 64, 2e-5)},
        "one.csv");
  try {
    m.collective("all_reduce", "f32", {8, 1, 8});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not measured (measured on 4 ranks on 1 node (alpha-beta fit: needs at least two "
                                         "distinct sizes, got 1 (64 bytes)))"),
              std::string::npos)
        << e.what();
  }
}

// The same file twice (by name, through ./, a symbolic link or a hard link): refused, one line.
TEST(Measurements, OneFileGivenTwiceIsRefused) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("dts_measurements_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path file = dir / "m.csv", other = dir / "n.csv";
  std::ofstream(file) << "x\n";
  std::ofstream(other) << "y\n";
  fs::create_symlink(file, dir / "link.csv");
  fs::create_hard_link(file, dir / "hard.csv");
  const std::string f = file.string();
  for (const std::string& again : {f, (dir / "." / "m.csv").string(), (dir / "link.csv").string(),
                                   (dir / "hard.csv").string(), (dir / ".." / dir.filename() / "m.csv").string()}) {
    try {
      refuse_repeated_files({f, other.string(), again}, "--measurements");
      ADD_FAILURE() << "accepted twice: " << again;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
      EXPECT_EQ(std::string(e.what()), "--measurements " + f + " and --measurements " + again +
                                           " are one file: its rows would count twice; give each once");
    }
  }
  // Two files, and a path that is not there (the reader names why), pass.
  EXPECT_NO_THROW(refuse_repeated_files({f, other.string(), (dir / "absent.csv").string()}, "--measurements"));
  fs::remove_all(dir);
}

TEST(Measurements, FilesOfAnotherStackAreRefusedNotMixed) {
  Measurements m;
  m.add(all_reduce_rows(mpi_stack(4)), "a.csv");
  Labels nccl = mpi_stack(4);
  nccl.backend = "nccl";
  nccl.backend_version = "2.28.9";
  nccl.device = "NVIDIA H100 80GB HBM3";
  try {
    m.add(all_reduce_rows(nccl), "b.csv");
    FAIL() << "two stacks mixed";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("b.csv holds measurements of another stack (nccl 2.28.9"), std::string::npos) << what;
    EXPECT_NE(what.find("than a.csv (mpi"), std::string::npos) << what;
  }
  // A file of two stacks is refused whole, and leaves no stack behind: the next file sets it.
  {
    Measurements fresh;
    std::vector<Record> both = all_reduce_rows(mpi_stack(2));
    for (const Record& r : all_reduce_rows(nccl)) both.push_back(r);
    try {
      fresh.add(both, "mixed.csv");
      FAIL() << "a file of two stacks was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("mixed.csv holds measurements of two stacks"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(fresh.empty());
    EXPECT_NO_THROW(fresh.add(all_reduce_rows(nccl), "gpu.csv"));
    EXPECT_EQ(fresh.stack().backend, "nccl");
    EXPECT_EQ(fresh.sources(), "gpu.csv");
  }
  // The same stack in a second file adds to the same fit (a second group shape here).
  m.add(all_reduce_rows(mpi_stack(2)), "c.csv");
  EXPECT_NO_THROW(m.collective("all_reduce", "f32", {2, 1, 2}));
  EXPECT_EQ(m.sources(), "a.csv, c.csv");
}

TEST(Measurements, PointToPointLinksFromTheTopologySuite) {
  // Same-node pairs: latency 2 us for 8 bytes (half a round trip), 5 GB/s one way for 4 MiB: the
  // line through both; both-direction rows (a shared link) are left out.
  std::vector<Record> rows;
  for (const char* direction : {"one-way", "both"}) {
    Record bw;
    bw.suite = "topology";
    bw.metric = "p2p_bandwidth";
    bw.labels = mpi_stack(2);
    bw.labels.op = "send_recv";
    bw.labels.bytes = 4 << 20;
    bw.labels.config = std::string("src=0;dst=1;direction=") + direction + ";link=same-node";
    bw.value = std::string(direction) == "both" ? 1e6 : 5e9;
    rows.push_back(bw);
  }
  Record lat;
  lat.suite = "topology";
  lat.metric = "p2p_latency";
  lat.labels = mpi_stack(2);
  lat.labels.op = "send_recv";
  lat.labels.bytes = 8;
  lat.labels.config = "src=0;dst=1;direction=round-trip-half;link=same-node";
  lat.value = 2e-6;
  rows.push_back(lat);
  Measurements m;
  m.add(rows, "topo.csv");
  const AlphaBetaFit& same = m.link(kSameNode);
  EXPECT_NEAR(same.seconds(8), 2e-6, 1e-15);
  EXPECT_NEAR(same.seconds(4 << 20), (4 << 20) / 5e9, 1e-12);
  EXPECT_THROW(m.link(kOtherNode), Error);
}

TEST(Measurements, ComputeRatePerRowsFromOneRanksSteps) {
  // One rank's ddp steps of a 2 x 8 MLP (input 4, classes 2): 16 rows in 2 ms, 64 rows in 4 ms,
  // and 64 rows as 4 micro-batches of 16 (accumulation) in 7 ms. The rate at a row count is the
  // steps' time over their FLOPs there (16 rows: the median of the two steps'), between two row
  // counts linear in log(rows), outside them the nearest's.
  const auto step = [](int64_t batch, int mb, double seconds, const std::string& strategy = "ddp") {
    Record r;
    r.suite = "scaling";
    r.metric = "step_time";
    r.labels = mpi_stack(1);
    r.labels.strategy = strategy;
    r.labels.config = "dp=1;tp=1;pp=1;zero=0;mb=" + std::to_string(mb) + ";mode=weak;layers=2;width=8;input=4;classes=2;"
                      "batch=" + std::to_string(batch);
    r.value = seconds;
    return r;
  };
  // Training FLOPs: forward 2 R (4 x 8 + 8 x 2) = 96 R; backward twice that, less the first
  // layer's input gradient (2 R x 32): 3 x 96 R - 64 R = 224 R.
  const double per_row = 224;
  Measurements m;
  m.add({step(16, 1, 2e-3), step(64, 1, 4e-3), step(64, 4, 7e-3)}, "compute.csv");
  const double at16 = (2e-3 / (16 * per_row) + 7e-3 / (4 * 16 * per_row)) / 2, at64 = 4e-3 / (64 * per_row);
  EXPECT_DOUBLE_EQ(m.compute_rate(16), at16);
  EXPECT_DOUBLE_EQ(m.compute_rate(64), at64);
  EXPECT_NEAR(m.compute_rate(32), (at16 + at64) / 2, at64 * 1e-12);  // halfway in log(rows)
  EXPECT_DOUBLE_EQ(m.compute_rate(4), at16);
  EXPECT_DOUBLE_EQ(m.compute_rate(1000), at64);
  EXPECT_EQ(m.compute_rows(), (std::pair<int64_t, int64_t>{16, 64}));
  // A strategy's own one-rank steps: ZeRO-3 at 16 and 64 rows, its FLOPs counting the forward
  // twice (96 R more), at 2.5 and 1.5 times ddp's rate there; between, the factor too is linear
  // in log(rows) (2 at 32 rows); beyond, the nearest's. A strategy without rows of its own takes
  // ddp's.
  EXPECT_DOUBLE_EQ(m.compute_factor("zero3", 32), 1);
  m.add({step(16, 1, 2.5 * at16 * 16 * (per_row + 96), "zero3"), step(64, 1, 1.5 * at64 * 64 * (per_row + 96), "zero3")},
        "zero3.csv");
  EXPECT_NEAR(m.compute_factor("zero3", 32), 2, 1e-12);
  EXPECT_NEAR(m.compute_factor("zero3", 8), 2.5, 1e-12);
  EXPECT_NEAR(m.compute_factor("zero3", 256), 1.5, 1e-12);
  EXPECT_NEAR(m.compute_rate(32, "zero3"), (at16 + at64), at64 * 1e-12);
  EXPECT_DOUBLE_EQ(m.compute_rate(32, "gpipe"), m.compute_rate(32));
  EXPECT_DOUBLE_EQ(m.compute_rate(16), at16);  // ddp's own unchanged
  // Accumulation that does not divide the batch: 10 rows as 4 micro-batches, the fullest of 3
  // rows, over the whole batch's FLOPs; a step with a straggler injected, or an mb that is not a
  // number, is not taken.
  Measurements uneven;
  Record straggled = step(16, 1, 1.0);
  straggled.labels.config += ";straggler=0:3";
  Record bad_mb = step(16, 1, 1.0);
  bad_mb.labels.config = std::string(bad_mb.labels.config).replace(bad_mb.labels.config.find("mb=1"), 4, "mb=x");
  uneven.add({step(10, 4, 3e-3), straggled, bad_mb}, "uneven.csv");
  EXPECT_DOUBLE_EQ(uneven.compute_rate(3), 3e-3 / (10 * per_row));
  EXPECT_EQ(uneven.compute_rows(), (std::pair<int64_t, int64_t>{3, 3}));
  // None measured: the refusal names the command.
  Measurements none;
  EXPECT_THROW(none.compute_rate(16), Error);
  // Another strategy's steps alone are no ddp line: refused the same way.
  Measurements only_zero3;
  only_zero3.add({step(16, 1, 1e-3, "zero3")}, "z.csv");
  EXPECT_THROW(only_zero3.compute_rate(16, "zero3"), Error);
}

}  // namespace
}  // namespace dts::planner
