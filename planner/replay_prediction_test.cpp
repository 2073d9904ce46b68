// A replay's classes priced by the planner's fits (replay_prediction.h): a class the measurements
// fit exactly is predicted exactly, its error is (predicted - replayed) / replayed, and what has
// no fit is named with its reason instead of priced.
#include "planner/replay_prediction.h"

#include <gtest/gtest.h>

namespace dts::planner {
namespace {

Labels mpi_stack(int ranks) {
  Labels l;
  l.backend = "mpi";
  l.backend_version = "Open MPI v4.1.4, package: Debian";
  l.mpi_version = "Open MPI v4.1.4, package: Debian";
  l.device = "cpu";
  l.world_size = ranks;
  l.nodes = 1;
  l.ranks_per_node = ranks;
  return l;
}

Record row(const std::string& suite, const std::string& op, const std::string& dtype, int64_t bytes, int ranks,
           double seconds) {
  Record r;
  r.suite = suite;
  r.metric = "time";
  r.unit = "seconds";
  r.labels = mpi_stack(ranks);
  r.labels.op = op;
  r.labels.dtype = dtype;
  r.labels.bytes = bytes;
  r.labels.placement = "out_of_place";
  r.labels.config = "redop=sum;root=-1;count=" + std::to_string(bytes / 4);
  r.case_id = op + "/" + dtype + "/" + std::to_string(bytes) + "/g0-" + std::to_string(ranks - 1);
  r.value = seconds;
  return r;
}

// all_reduce f32 on 4 ranks: 20 us + bytes / 2 GB/s, measured from 8 B to 8 MiB (x4).
double model(int64_t bytes) { return 20e-6 + static_cast<double>(bytes) / 2e9; }

Measurements measured() {
  std::vector<Record> rows;
  for (int64_t b = 8; b <= (int64_t{8} << 20); b *= 4) rows.push_back(row("collectives", "all_reduce", "f32", b, 4, model(b)));
  Measurements m;
  m.add(rows, "m.csv");
  return m;
}

TEST(ReplayPrediction, AClassTheFitsCoverIsPricedAndItsErrorSaid) {
  // 4096 B is measured exactly on the line: replayed 10% slower than the fit, the error is
  // 1/1.1 - 1 = -9.09%; 100000 B lies between measured sizes, replayed as the fit says: 0%.
  const std::vector<Record> replay{row("replay", "all_reduce", "f32", 4096, 4, model(4096) * 1.1),
                                   row("replay", "all_reduce", "f32", 100000, 4, model(100000))};
  const ReplayPredictions p = predict_replay(replay, measured());
  ASSERT_EQ(p.priced.size(), 2u);
  EXPECT_TRUE(p.unpriced.empty());
  EXPECT_NEAR(p.priced[0].predicted, model(4096), model(4096) * 1e-6);
  EXPECT_NEAR(p.priced[0].error(), 1 / 1.1 - 1, 1e-6);
  EXPECT_NEAR(p.priced[1].error(), 0, 1e-6);
  // The median of |-9.09%| and |0%|.
  EXPECT_NEAR(p.median_abs_error().at("all_reduce"), (1 - 1 / 1.1) / 2, 1e-6);
}

TEST(ReplayPrediction, WhatHasNoFitIsNamedNotPriced) {
  const std::vector<Record> replay{
      row("replay", "barrier", "none", 0, 4, 1e-5),          // no measurement times a barrier
      row("replay", "all_to_allv", "f32", 4096, 4, 1e-5),    // uneven splits
      row("replay", "all_reduce", "bytes", 4096, 4, 1e-5),   // a Chakra class: no dtype
      row("replay", "all_gather", "f32", 4096, 4, 1e-5),     // not in the measurements
      row("collectives", "all_reduce", "f32", 4096, 4, 1),   // another suite's row: not a class
  };
  const ReplayPredictions p = predict_replay(replay, measured());
  EXPECT_TRUE(p.priced.empty());
  ASSERT_EQ(p.unpriced.size(), 4u);
  EXPECT_NE(p.unpriced[0].find("a barrier is not measured"), std::string::npos) << p.unpriced[0];
  EXPECT_NE(p.unpriced[1].find("uneven splits"), std::string::npos) << p.unpriced[1];
  EXPECT_NE(p.unpriced[2].find("bytes only"), std::string::npos) << p.unpriced[2];
  EXPECT_NE(p.unpriced[3].find("all_gather/f32/4096/g0-3: "), std::string::npos) << p.unpriced[3];
  EXPECT_NE(p.unpriced[3].find("mpirun -np 4"), std::string::npos) << "says how to measure it: " << p.unpriced[3];
}

TEST(ReplayPrediction, AGroupShapeNotMeasuredIsExtendedAndSaid) {
  // A 2-rank group's all_reduce from the 4-rank fit by the ring model.
  const ReplayPredictions p = predict_replay({row("replay", "all_reduce", "f32", 4096, 2, 1e-5)}, measured());
  ASSERT_EQ(p.priced.size(), 1u) << (p.unpriced.empty() ? "" : p.unpriced[0]);
  EXPECT_NE(p.priced[0].basis.find("extended from 4 ranks"), std::string::npos) << p.priced[0].basis;
}

}  // namespace
}  // namespace dts::planner
