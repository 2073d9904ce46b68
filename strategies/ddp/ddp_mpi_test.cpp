// DDP against the single-process reference under mpirun (NP 1 2 3 4): the same global batches,
// rows that do not split evenly (23 over 2, 3, 4 ranks), many small buckets and gradient
// accumulation; parameters must match the reference within a bound derived from summation
// order, and every replica must hold the same bits.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>

#include "comm/communicator.h"
#include "strategies/testing.h"
#include "strategies/ddp/ddp_strategy.h"

namespace dts {
namespace {

using strategy_testing::expect_replicas_identical;
using strategy_testing::max_abs_difference;

const ModelSpec kSpec{3, 12, 7, 5, 21, 22};  // odd widths: 7 -> 12 -> 12 -> 5
constexpr int64_t kGlobalRows = 23;          // prime: uneven over 2, 3 and 4 ranks
constexpr int kSteps = 3;



struct DdpRun {
  std::vector<double> params;
  std::vector<StepReport> reports;
};

DdpRun run_ddp(const ParallelConfig& config) {
  auto comm = make_communicator("mpi");
  DdpStrategy<double> ddp(kSpec, config, *comm);
  DdpRun run;
  for (int s = 0; s < kSteps; ++s) run.reports.push_back(ddp.step(make_batch(kSpec, s * kGlobalRows, kGlobalRows)));
  run.params = ddp.full_parameters();
  return run;
}

std::vector<double> run_single(const TrainConfig& train, std::vector<double>* losses = nullptr) {
  return strategy_testing::run_single(kSpec, train, kSteps, kGlobalRows, losses);
}

class DdpMatchesSingle : public ::testing::TestWithParam<std::tuple<OptimizerKind, int, size_t>> {};

TEST_P(DdpMatchesSingle, ParametersAfterThreeSteps) {
  const auto [optimizer, accumulation, bucket_bytes] = GetParam();
  ParallelConfig config;
  config.train.optimizer = optimizer;
  config.train.sgd.lr = 0.05;
  config.microbatches = accumulation;
  config.bucket_bytes = bucket_bytes;
  std::vector<double> single_losses;
  const std::vector<double> want = run_single(config.train, &single_losses);
  const DdpRun got = run_ddp(config);
  // The gradients differ from the reference only in summation order (ranks, micro-batches):
  // at most ~(n + K + depth) * 2^-52 relative to sums of magnitude O(1), i.e. ~1e-15. Three SGD
  // steps (lr 0.05, momentum 0.9) move that by < 3 * 0.05 * 2.71 * 1e-15; AdamW divides by
  // sqrt(v) ~ |g|, turning it into a relative 1e-15 of lr-sized steps. 1e-12 leaves a margin of
  // 1000 and still catches any real error (a lost rank or micro-batch moves parameters by ~1e-3).
  EXPECT_LT(max_abs_difference(got.params, want), 1e-12);
  expect_replicas_identical(got.params);
  for (int s = 0; s < kSteps; ++s) {
    // The reported loss is the global mean before the update, as the reference's.
    EXPECT_NEAR(got.reports[static_cast<size_t>(s)].loss, single_losses[static_cast<size_t>(s)], 1e-12);
  }
}

INSTANTIATE_TEST_SUITE_P(
    OptimizersAccumulationBuckets, DdpMatchesSingle,
    ::testing::Combine(::testing::Values(OptimizerKind::sgd, OptimizerKind::adamw), ::testing::Values(1, 2, 3),
                       // 200 bytes: a bucket every few parameters; 25 MiB: the whole model in one.
                       ::testing::Values(size_t{200}, size_t{25} << 20)));

TEST(Ddp, BucketsTileTheGradientInReverseOrder) {
  auto comm = make_communicator("mpi");
  ParallelConfig config;
  config.bucket_bytes = 200;  // 25 doubles
  DdpStrategy<double> ddp(kSpec, config, *comm);
  const auto& buckets = ddp.buckets();
  ASSERT_GT(buckets.size(), 1u);
  // Launch order walks the buffer from its end to its start without gaps or overlaps.
  int64_t expected_end = parameter_count(kSpec);
  for (const auto& [begin, end] : buckets) {
    EXPECT_EQ(end, expected_end);
    EXPECT_LT(begin, end);
    expected_end = begin;
  }
  EXPECT_EQ(expected_end, 0);
  // Default 25 MiB: this small model is one bucket.
  DdpStrategy<double> one(kSpec, ParallelConfig{}, *comm);
  EXPECT_EQ(one.buckets().size(), 1u);
}

TEST(Ddp, FirstBucketIsCappedAtOneMebibyteAsInPyTorch) {
  // Gradients in ready order: layer2.bias (10), layer2.weight (6000), layer1.bias (600),
  // layer1.weight (360000 elements, 1.44 MB in f32), then layer0 (600 + 360000). The first bucket
  // closes at the first parameter that takes it to 1 MiB (layer1.weight, in f32 and f64 alike);
  // the rest (layer0, under 25 MiB) is the second, at PyTorch's fixed 25 MiB. Without the cap the model would be one bucket
  // that starts only when backward ends.
  const ModelSpec spec{.layers = 3, .width = 600, .input = 600, .classes = 10};
  auto comm = make_communicator("mpi");
  const std::vector<ParameterInfo> layout = parameter_layout(spec);
  const int64_t total = parameter_count(spec), layer1_weight = layout[2].offset, layer0_end = layout[2].offset;
  const std::vector<std::pair<int64_t, int64_t>> want = {{layer1_weight, total}, {0, layer0_end}};
  ParallelConfig pytorch;
  pytorch.bucket_bytes = size_t{25} << 20;
  EXPECT_EQ(DdpStrategy<float>(spec, pytorch, *comm).buckets(), want);
  EXPECT_EQ(DdpStrategy<double>(spec, pytorch, *comm).buckets(), want);
  // A bucket_bytes below 1 MiB is the cap of every bucket, the first included: 300 KB buckets
  // hold one large weight each (360000 f32 elements pass 300 KB alone).
  ParallelConfig small;
  small.bucket_bytes = 300000;
  EXPECT_EQ(DdpStrategy<float>(spec, small, *comm).buckets().size(), 2u);
}

TEST(Ddp, DefaultBucketsAreAQuarterOfTheGradientBetweenOneAndTwentyFiveMebibytes) {
  EXPECT_EQ(auto_bucket_bytes(0), size_t{1} << 20);
  EXPECT_EQ(auto_bucket_bytes(size_t{4} << 20), size_t{1} << 20);      // a quarter below 1 MiB
  EXPECT_EQ(auto_bucket_bytes(16'834'600), size_t{4'208'650});          // model A in f32
  EXPECT_EQ(auto_bucket_bytes(size_t{100} << 20), size_t{25} << 20);   // PyTorch's from here on
  EXPECT_EQ(auto_bucket_bytes(size_t{1} << 40), size_t{25} << 20);
  // Model A (4 x (1024^2 + 1024) hidden parameters, 4,198,400 bytes a layer in f32, then a 10-class
  // layer): the first bucket closes at the first parameter past 1 MiB (layer3.weight), the next
  // needs 4,208,650 bytes so it takes layers 2 and 1, and layer 0 is the last: 3 buckets, two of
  // them launched during backward, where a fixed 25 MiB has 2 (the second launched when backward
  // ends, with 3/4 of the gradient).
  const ModelSpec model_a{.layers = 5, .width = 1024, .input = 1024, .classes = 10};
  auto comm = make_communicator("mpi");
  EXPECT_EQ(DdpStrategy<float>(model_a, ParallelConfig{}, *comm).buckets().size(), 3u);
  ParallelConfig pytorch;
  pytorch.bucket_bytes = size_t{25} << 20;
  EXPECT_EQ(DdpStrategy<float>(model_a, pytorch, *comm).buckets().size(), 2u);
}

TEST(Ddp, ReportsAccountForTimeBytesAndMemory) {
  ParallelConfig config;
  config.bucket_bytes = 200;
  const DdpRun run = run_ddp(config);
  const int64_t psi = parameter_count(kSpec);
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  for (const StepReport& r : run.reports) {
    // Every gradient element is all-reduced once per step: ring model 2 psi (N-1)/N elements,
    // rounded once per bucket (at most half a byte each).
    EXPECT_NEAR(static_cast<double>(r.bytes_sent), 2.0 * static_cast<double>(psi * 8) * (n - 1) / n,
                0.5 * static_cast<double>(r.collectives));
    EXPECT_GT(r.collectives, 1);  // 200-byte buckets: several
    EXPECT_GE(r.step_time, r.compute_time);
    EXPECT_GE(r.step_time, r.exposed_comm_time);
    EXPECT_GE(r.comm_time, r.exposed_comm_time);
  }
  auto comm = make_communicator("mpi");
  DdpStrategy<float> ddp(kSpec, config, *comm);
  ddp.step(make_batch(kSpec, 0, kGlobalRows));
  const MemoryReport m = ddp.memory();
  EXPECT_EQ(m.params, psi * 4);
  EXPECT_EQ(m.grads, 2 * psi * 4);      // accumulated gradients and the micro-batch's
  EXPECT_EQ(m.optimizer, 2 * psi * 4);  // AdamW's m and v
  EXPECT_GT(m.activations_peak, 0);
}

}  // namespace
}  // namespace dts
