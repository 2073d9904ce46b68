// ZeRO stages 1-3 against the single-process reference under mpirun (NP 1 2 3 4): a parameter
// count (317, prime) that no rank count divides, so shards differ in size and padding is real;
// rows that do not split evenly (23); gradient accumulation. Also the memory and byte models.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>

#include "comm/communicator.h"
#include "strategies/testing.h"
#include "strategies/zero/zero_strategy.h"

namespace dts {
namespace {

using strategy_testing::expect_replicas_identical;
using strategy_testing::max_abs_difference;

const ModelSpec kSpec{3, 12, 7, 5, 21, 22};  // odd widths: 7 -> 12 -> 12 -> 5
constexpr int64_t kPsi = (7 * 12 + 12) + (12 * 12 + 12) + (12 * 5 + 5);  // 317: prime
constexpr int64_t kGlobalRows = 23;          // prime: uneven over 2, 3 and 4 ranks
constexpr int kSteps = 3;

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
int64_t padded_shard(int n) { return (kPsi + n - 1) / n; }  // S = ceil(Psi / N)



struct ZeroRun {
  std::vector<double> params;
  std::vector<StepReport> reports;
  MemoryReport memory;
};

// The layout a zeroN strategy runs on this job: every rank in its dp group.
ParallelConfig zero_layout(const std::string& name, ParallelConfig config, int ranks) {
  config.dp = ranks;
  config.zero = name.back() - '0';
  return config;
}

ZeroRun run_zero(const std::string& name, const ParallelConfig& base, Precision precision = Precision::f64) {
  auto comm = make_communicator("mpi");
  const ParallelConfig config = zero_layout(name, base, comm->size());
  ProcessGroups groups = ProcessGroups::split(*comm, config);
  auto zero = make_strategy(name, kSpec, config, groups, precision);
  ZeroRun run;
  for (int s = 0; s < kSteps; ++s) run.reports.push_back(zero->step(make_batch(kSpec, s * kGlobalRows, kGlobalRows)));
  run.memory = zero->memory();
  run.params = zero->full_parameters();
  return run;
}

std::vector<double> run_single(const TrainConfig& train, std::vector<double>* losses = nullptr) {
  return strategy_testing::run_single(kSpec, train, kSteps, kGlobalRows, losses);
}

const char* optimizer_name(OptimizerKind kind) { return kind == OptimizerKind::sgd ? "sgd" : "adamw"; }

TEST(Zero, ParameterCountIsNotDivisibleByTheRankCount) {
  ASSERT_EQ(parameter_count(kSpec), kPsi);
  if (world_size() > 1) {
    EXPECT_NE(kPsi % world_size(), 0);  // else padding would go untested
  }
}

class ZeroMatchesSingle : public ::testing::TestWithParam<std::tuple<std::string, OptimizerKind, int>> {};

TEST_P(ZeroMatchesSingle, ParametersAfterThreeSteps) {
  const auto& [name, optimizer, accumulation] = GetParam();
  ParallelConfig config;
  config.train.optimizer = optimizer;
  config.train.sgd.lr = 0.05;
  config.microbatches = accumulation;
  std::vector<double> single_losses;
  const std::vector<double> want = run_single(config.train, &single_losses);
  const ZeroRun got = run_zero(name, config);
  ASSERT_EQ(got.params.size(), want.size());
  // The bound is ddp's, for the same reason: the gradients differ from the reference only in
  // summation order (ranks, micro-batches), ~(n + K + depth) * 2^-52 relative to O(1) sums, i.e.
  // ~1e-15; sharding adds nothing, because both optimizers are element-wise, so stepping a shard
  // is bitwise the same arithmetic as stepping those elements of the whole. Three SGD steps
  // (lr 0.05, momentum 0.9) amplify by < 3 * 0.05 * 2.71; AdamW divides by sqrt(v) ~ |g|, a
  // relative 1e-15 of lr-sized steps. 1e-12 leaves a margin of 1000 and still catches a lost or
  // misplaced shard (it moves parameters by ~1e-3).
  EXPECT_LT(max_abs_difference(got.params, want), 1e-12);
  expect_replicas_identical(got.params);
  for (int s = 0; s < kSteps; ++s) {
    // The reported loss is the global mean before the update, as the reference's.
    EXPECT_NEAR(got.reports[static_cast<size_t>(s)].loss, single_losses[static_cast<size_t>(s)], 1e-12);
  }
}

INSTANTIATE_TEST_SUITE_P(
    StagesOptimizersAccumulation, ZeroMatchesSingle,
    ::testing::Combine(::testing::Values("zero1", "zero2", "zero3"),
                       ::testing::Values(OptimizerKind::sgd, OptimizerKind::adamw), ::testing::Values(1, 2)),
    [](const auto& test) {
      return std::get<0>(test.param) + "_" + optimizer_name(std::get<1>(test.param)) + "_accumulation" +
             std::to_string(std::get<2>(test.param));
    });

TEST(Zero, ShardsTileTheParametersInRankOrder) {
  auto comm = make_communicator("mpi");
  ZeroStrategy<double> zero(ZeroStage::optimizer_states, kSpec, ParallelConfig{}, *comm);
  const int n = world_size();
  EXPECT_EQ(zero.padded_shard_size(), padded_shard(n));
  const auto [first, count] = zero.shard();
  const int64_t mine[2] = {first, count};
  std::vector<int64_t> all(static_cast<size_t>(2 * n));
  MPI_Allgather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, MPI_COMM_WORLD);
  int64_t expected_first = 0;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(all[static_cast<size_t>(2 * r)], expected_first);
    const int64_t shard_count = all[static_cast<size_t>(2 * r + 1)];
    // Padding is under one element per shard: the slot is never more than one element too big.
    EXPECT_LE(shard_count, padded_shard(n));
    EXPECT_GE(shard_count, padded_shard(n) - 1);
    expected_first += shard_count;
  }
  EXPECT_EQ(expected_first, kPsi);
}

class ZeroReports : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(ZeroReports, BytesSentFollowTheRingModel) {
  const auto& [name, accumulation] = GetParam();
  ParallelConfig config;
  config.microbatches = accumulation;
  const ZeroRun run = run_zero(name, config);
  const int n = world_size();
  // One reduce_scatter or all_gather of N * S padded elements sends (N - 1) * S per rank (ring).
  // Stages 1-2: one of each per step. Stage 3: an all_gather before each micro-batch's forward
  // and another before its backward, then one reduce_scatter.
  const int64_t collectives = name == "zero3" ? 2 * accumulation + 1 : 2;
  const int64_t want = collectives * (n - 1) * padded_shard(n) * static_cast<int64_t>(sizeof(double));
  for (const StepReport& r : run.reports) {
    EXPECT_EQ(r.bytes_sent, want);
    EXPECT_GE(r.step_time, r.compute_time + r.comm_time);  // they do not overlap
    EXPECT_EQ(r.exposed_comm_time, r.comm_time);           // blocking collectives: nothing hidden
  }
}

INSTANTIATE_TEST_SUITE_P(StagesAccumulation, ZeroReports,
                         ::testing::Combine(::testing::Values("zero1", "zero2", "zero3"), ::testing::Values(1, 2)),
                         [](const auto& test) {
                           return std::get<0>(test.param) + "_accumulation" + std::to_string(std::get<1>(test.param));
                         });

class ZeroMemory : public ::testing::TestWithParam<std::tuple<std::string, Precision, OptimizerKind>> {};

TEST_P(ZeroMemory, HeldBytesFollowThePaperModel) {
  const auto& [name, precision, optimizer] = GetParam();
  ParallelConfig config;
  config.train.optimizer = optimizer;
  config.microbatches = 2;  // the micro-batch buffer must be gone after the step, too
  const ZeroRun run = run_zero(name, config, precision);
  const int64_t bytes = precision == Precision::f64 ? 8 : 4;
  const int64_t s = padded_shard(world_size());
  const int64_t k = optimizer == OptimizerKind::adamw ? 2 : 1;  // m and v, or the velocity
  const int64_t params = name == "zero3" ? s : kPsi;
  const int64_t grads = name == "zero1" ? kPsi : s;
  EXPECT_EQ(run.memory.params, params * bytes);
  EXPECT_EQ(run.memory.grads, grads * bytes);
  EXPECT_EQ(run.memory.optimizer, k * s * bytes);
  EXPECT_GT(run.memory.activations_peak, 0);
}

INSTANTIATE_TEST_SUITE_P(StagesPrecisionsOptimizers, ZeroMemory,
                         ::testing::Combine(::testing::Values("zero1", "zero2", "zero3"),
                                            ::testing::Values(Precision::f32, Precision::f64),
                                            ::testing::Values(OptimizerKind::sgd, OptimizerKind::adamw)),
                         [](const auto& test) {
                           return std::get<0>(test.param) +
                                  (std::get<1>(test.param) == Precision::f64 ? "_f64_" : "_f32_") +
                                  optimizer_name(std::get<2>(test.param));
                         });

TEST(Zero, UnknownStageIsRejectedByName) {
  auto comm = make_communicator("mpi");
  ProcessGroups groups = ProcessGroups::split(*comm, zero_layout("zero1", ParallelConfig{}, comm->size()));
  try {
    make_strategy("zero4", kSpec, ParallelConfig{}, groups);
    ADD_FAILURE() << "zero4 made a strategy";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("zero3"), std::string::npos);  // names the known ones
  }
}

TEST(Zero, RegisteredUnderTheirOwnNames) {
  auto comm = make_communicator("mpi");
  for (const std::string name : {"zero1", "zero2", "zero3"}) {
    const ParallelConfig config = zero_layout(name, ParallelConfig{}, comm->size());
    ProcessGroups groups = ProcessGroups::split(*comm, config);
    EXPECT_EQ(make_strategy(name, kSpec, config, groups, Precision::f32)->name(), name);
  }
}

}  // namespace
}  // namespace dts
