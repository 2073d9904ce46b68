// The scaling suite's arithmetic in one process: sub-world sizes, efficiency formulas, batches,
// the layout each strategy runs at n ranks, node capacity and the detail line. Timing on real
// sub-worlds is scaling_mpi_test.cpp's.
//   ctest -R scaling_test
#include "suites/scaling/scaling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"

namespace dts {
namespace {

// The strategies of the scaling suite (DESIGN.md, strategy names without the parameter servers).
const std::vector<std::string> kStrategies{"ddp", "zero1", "zero2", "zero3", "tp", "gpipe", "1f1b", "hybrid"};
const ModelSpec kModel;             // the default: 3 layers of width 64, so pipelines have at most 3 stages
constexpr int kMicrobatches = 4;    // the pipeline's m, as the harness's default
constexpr int64_t kRoomyBatch = 64;  // >= 8 ranks x 4 micro-batches: no layout here is refused for rows

TEST(ScalingWorldSizes, PowersOfTwoThenTheJob) {
  EXPECT_EQ(scaling_world_sizes(1), (std::vector<int>{1}));           // one rank: only the reference
  EXPECT_EQ(scaling_world_sizes(2), (std::vector<int>{1, 2}));
  EXPECT_EQ(scaling_world_sizes(3), (std::vector<int>{1, 2, 3}));     // 3 is not a power of two: added
  EXPECT_EQ(scaling_world_sizes(4), (std::vector<int>{1, 2, 4}));     // 4 is: not repeated
  EXPECT_EQ(scaling_world_sizes(5), (std::vector<int>{1, 2, 4, 5}));
  EXPECT_EQ(scaling_world_sizes(6), (std::vector<int>{1, 2, 4, 6}));
  EXPECT_EQ(scaling_world_sizes(8), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_THROW(scaling_world_sizes(0), Error);
}

TEST(ScalingWorldSizes, LargestIntDoesNotOverflow) {
  // 2^30 is the last power of two below INT_MAX; doubling it would overflow.
  const std::vector<int> sizes = scaling_world_sizes(0x7fffffff);
  ASSERT_EQ(sizes.size(), 32u);  // 2^0 .. 2^30, then the job itself
  EXPECT_EQ(sizes[30], 1 << 30);
  EXPECT_EQ(sizes[31], 0x7fffffff);
}

TEST(ScalingMode, Names) {
  EXPECT_EQ(name(ScalingMode::weak), "weak");
  EXPECT_EQ(name(ScalingMode::strong), "strong");
}

TEST(ScalingEfficiency, OneAtOneRank) {
  // n = 1 is the reference itself: T(n) = T(1), so both formulas give exactly 1.
  EXPECT_EQ(scaling_efficiency(ScalingMode::weak, 0.37, 0.37, 1), 1.0);
  EXPECT_EQ(scaling_efficiency(ScalingMode::strong, 0.37, 0.37, 1), 1.0);
}

TEST(ScalingEfficiency, PerfectScalersGiveOne) {
  const double t1 = 0.37;
  for (int n : {2, 3, 4, 7, 8}) {
    // Weak: a perfect scaler keeps T(n) = T(1) as the batch grows with n.
    EXPECT_EQ(scaling_efficiency(ScalingMode::weak, t1, t1, n), 1.0);
    // Strong: T(n) = T(1)/n; t1 / (n * (t1 / n)) rounds twice, so within a few ulp of 1.
    EXPECT_DOUBLE_EQ(scaling_efficiency(ScalingMode::strong, t1, t1 / n, n), 1.0);
  }
}

TEST(ScalingEfficiency, Formulas) {
  // Weak, T(4) = 2 T(1): half as efficient (binary fractions, exact).
  EXPECT_EQ(scaling_efficiency(ScalingMode::weak, 0.5, 1.0, 4), 0.5);
  // Strong, no speed-up at all on 4 ranks: 1/4.
  EXPECT_EQ(scaling_efficiency(ScalingMode::strong, 1.0, 1.0, 4), 0.25);
  // Strong, 3x faster on 4 ranks: 3/4.
  EXPECT_DOUBLE_EQ(scaling_efficiency(ScalingMode::strong, 3.0, 1.0, 4), 0.75);
  // Weak above 1 (super-linear, e.g. caches) is reported as measured, not clamped.
  EXPECT_EQ(scaling_efficiency(ScalingMode::weak, 1.0, 0.5, 2), 2.0);
}

TEST(ScalingEfficiency, RefusesMeaninglessInput) {
  EXPECT_THROW(scaling_efficiency(ScalingMode::weak, 1.0, 1.0, 0), Error);
  EXPECT_THROW(scaling_efficiency(ScalingMode::weak, 0.0, 1.0, 2), Error);
  EXPECT_THROW(scaling_efficiency(ScalingMode::strong, 1.0, -1.0, 2), Error);
  EXPECT_THROW(scaling_efficiency(ScalingMode::strong, 1.0, INFINITY, 2), Error);
  EXPECT_THROW(scaling_efficiency(ScalingMode::weak, NAN, 1.0, 2), Error);
}

TEST(ScaledBatch, WeakGrowsStrongStays) {
  EXPECT_EQ(scaled_batch(ScalingMode::weak, 1, 8), 8);     // n = 1: the per-rank batch is the global one
  EXPECT_EQ(scaled_batch(ScalingMode::weak, 3, 8), 24);    // 8 rows per rank x 3
  EXPECT_EQ(scaled_batch(ScalingMode::strong, 1, 24), 24);
  EXPECT_EQ(scaled_batch(ScalingMode::strong, 3, 24), 24);  // fixed global batch
  EXPECT_THROW(scaled_batch(ScalingMode::weak, 0, 8), Error);
  EXPECT_THROW(scaled_batch(ScalingMode::strong, 2, 0), Error);
}

TEST(RowsNeeded, EveryMicrobatchOfEveryReplicaGetsARow) {
  ParallelConfig layout;
  layout.dp = 3;
  layout.tp = 2;           // tp ranks share rows: no more needed
  layout.microbatches = 4;
  EXPECT_EQ(rows_needed(layout), 12);  // 3 x 4
}

TEST(ScalingLayout, OneRankIsTheReferenceForEveryStrategy) {
  for (const std::string& strategy : kStrategies) {
    SCOPED_TRACE(strategy);
    const auto layout = scaling_layout(parse_strategy_spec(strategy), 1, kModel, kRoomyBatch, kMicrobatches);
    ASSERT_TRUE(layout.has_value());
    EXPECT_EQ(layout->dp, 1);
    EXPECT_EQ(layout->tp, 1);
    EXPECT_EQ(layout->pp, 1);
    const StrategyTraits& traits = strategy_traits(strategy);
    EXPECT_EQ(layout->zero, traits.zero);  // make_strategy requires a zero strategy's own stage
    EXPECT_EQ(layout->schedule, traits.schedule);
    EXPECT_EQ(layout->microbatches, traits.pp ? kMicrobatches : 1);  // the same work per step at every n
    EXPECT_EQ(layout->train.optimizer, OptimizerKind::sgd);
  }
}

TEST(ScalingLayout, TwoRanksForEveryStrategyButHybrid) {
  for (const std::string& strategy : kStrategies) {
    SCOPED_TRACE(strategy);
    const auto layout = scaling_layout(parse_strategy_spec(strategy), 2, kModel, kRoomyBatch, kMicrobatches);
    if (strategy == "hybrid") {
      // Two dimensions above 1 need at least 4 ranks: hybrid's curve is 1 (reference), 4, 8, ...
      EXPECT_FALSE(layout.has_value());
      continue;
    }
    ASSERT_TRUE(layout.has_value());
    EXPECT_EQ(layout->world(), 2);
  }
  const auto hybrid = scaling_layout(parse_strategy_spec("hybrid"), 4, kModel, kRoomyBatch, kMicrobatches);
  ASSERT_TRUE(hybrid.has_value());
  EXPECT_EQ(hybrid->world(), 4);
}

TEST(ScalingLayout, NoneWhereTheModelOrRanksCannotHoldIt) {
  // 4 stages of a 3-layer model: a stage would hold no layer.
  EXPECT_FALSE(scaling_layout(parse_strategy_spec("gpipe"), 4, kModel, kRoomyBatch, kMicrobatches).has_value());
  EXPECT_FALSE(scaling_layout(parse_strategy_spec("1f1b"), 4, kModel, kRoomyBatch, kMicrobatches).has_value());
  // 3 stages fit 3 layers.
  EXPECT_TRUE(scaling_layout(parse_strategy_spec("gpipe"), 3, kModel, kRoomyBatch, kMicrobatches).has_value());
  // A prime number of ranks cannot be split along two dimensions.
  EXPECT_FALSE(scaling_layout(parse_strategy_spec("hybrid"), 3, kModel, kRoomyBatch, kMicrobatches).has_value());
}

TEST(ScalingLayout, PinnedSpecRunsOnlyAtItsOwnSizeAndAtTheReference) {
  const StrategySpec spec = parse_strategy_spec("hybrid(dp=2,tp=2,pp=1)");
  const auto four = scaling_layout(spec, 4, kModel, kRoomyBatch, kMicrobatches);
  ASSERT_TRUE(four.has_value());
  EXPECT_EQ(four->dp, 2);
  EXPECT_EQ(four->tp, 2);
  EXPECT_EQ(four->pp, 1);
  EXPECT_EQ(four->zero, 0);  // layouts_of lists it without ZeRO-1 first
  EXPECT_FALSE(scaling_layout(spec, 2, kModel, kRoomyBatch, kMicrobatches).has_value());  // world() = 4 != 2
  EXPECT_FALSE(scaling_layout(spec, 8, kModel, kRoomyBatch, kMicrobatches).has_value());
  const auto one = scaling_layout(spec, 1, kModel, kRoomyBatch, kMicrobatches);
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->world(), 1);

  // A dimension left open still grows with n: hybrid(dp=2,tp=2) on 8 ranks takes pp = 2.
  const auto eight = scaling_layout(parse_strategy_spec("hybrid(dp=2,tp=2)"), 8, kModel, kRoomyBatch, kMicrobatches);
  ASSERT_TRUE(eight.has_value());
  EXPECT_EQ(eight->pp, 2);

  // A pinned mb is the work per step at every n, the reference included.
  const auto pipeline = scaling_layout(parse_strategy_spec("1f1b(pp=2,mb=8)"), 1, kModel, kRoomyBatch, kMicrobatches);
  ASSERT_TRUE(pipeline.has_value());
  EXPECT_EQ(pipeline->microbatches, 8);
  EXPECT_EQ(pipeline->schedule, PipelineSchedule::one_f_one_b);
}

TEST(ScalingLayout, NoneWhenTheBatchCannotBeSplit) {
  // ddp on 4 ranks needs a row per replica: 3 rows leave one empty, 4 do not.
  EXPECT_FALSE(scaling_layout(parse_strategy_spec("ddp"), 4, kModel, 3, kMicrobatches).has_value());
  EXPECT_TRUE(scaling_layout(parse_strategy_spec("ddp"), 4, kModel, 4, kMicrobatches).has_value());
  // A pipeline needs a row per micro-batch even on one rank: dp 1 x mb 4.
  EXPECT_FALSE(scaling_layout(parse_strategy_spec("1f1b"), 1, kModel, 3, kMicrobatches).has_value());
  EXPECT_TRUE(scaling_layout(parse_strategy_spec("1f1b"), 1, kModel, 4, kMicrobatches).has_value());
}

// A skipped n says why: the model or the ranks, or the batch, whichever it is.
TEST(ScalingLayout, WhyNoneNamesTheCause) {
  const auto why = [](const std::string& spec, int n, int64_t batch) {
    return why_no_scaling_layout(parse_strategy_spec(spec), n, kModel, batch, kMicrobatches);
  };
  // gpipe at 4 ranks with a roomy batch: the 3 layers, not the batch, stop it.
  for (const char* pipeline : {"gpipe", "1f1b"}) {
    const std::string text = why(pipeline, 4, kRoomyBatch);
    EXPECT_NE(text.find("3 layers cannot be split into 4 pipeline stages"), std::string::npos) << text;
    EXPECT_EQ(text.find("batch"), std::string::npos) << text;
  }
  EXPECT_NE(why("hybrid", 2, kRoomyBatch).find("hybrid needs at least 2 of dp, tp, pp above 1, and 2 ranks (a prime)"),
            std::string::npos)
      << why("hybrid", 2, kRoomyBatch);
  EXPECT_NE(why("hybrid(dp=2,tp=2,pp=1)", 2, kRoomyBatch).find("make no split of 2 ranks"), std::string::npos);
  // ddp on 4 ranks with 3 rows: layouts exist, the batch fills none (dp 4 x mb 1 = 4 rows needed).
  EXPECT_NE(why("ddp", 4, 3).find("a global batch of 3 rows leaves some of the dp x mb = 4 micro-batches without a row"),
            std::string::npos)
      << why("ddp", 4, 3);
  // 1f1b on one rank: its 4 micro-batches need 4 rows.
  EXPECT_NE(why("1f1b", 1, 3).find("dp x mb = 4"), std::string::npos) << why("1f1b", 1, 3);
  // Where there is a layout, there is nothing to say.
  EXPECT_EQ(why("gpipe", 3, kRoomyBatch), "");
  EXPECT_EQ(why("ddp", 4, 4), "");
}

TEST(ScalingLayout, RefusesBadArguments) {
  EXPECT_THROW(scaling_layout(parse_strategy_spec("ddp"), 0, kModel, kRoomyBatch, kMicrobatches), Error);
  EXPECT_THROW(scaling_layout(parse_strategy_spec("ddp"), 2, kModel, kRoomyBatch, 0), Error);
}

TEST(NodeCapacity, ThisMachine) {
  const NodeCapacity one = node_capacity(1);
  EXPECT_GE(one.cores, 1);  // a process runs on at least one core
  EXPECT_EQ(one.cores, usable_cores());
  EXPECT_FALSE(one.oversubscribed);  // one rank fits any machine
  // One rank per core fits; one more does not.
  EXPECT_FALSE(node_capacity(one.cores).oversubscribed);
  EXPECT_TRUE(node_capacity(one.cores + 1).oversubscribed);
  EXPECT_EQ(node_capacity(one.cores + 1).ranks_on_node, one.cores + 1);
  EXPECT_THROW(node_capacity(0), Error);
}

TEST(ScalingDetail, SaysSoWhenOversubscribed) {
  ScalingPoint reference, point;
  reference.n = 1;
  reference.seconds_per_step = 1.2e-3;
  point.n = 4;
  point.seconds_per_step = 1.5e-3;
  point.layout = "dp=4;tp=1;pp=1;zero=0;mb=1;schedule=none";
  const std::string busy = scaling_detail(ScalingMode::weak, reference, point, {2, 4, true});
  EXPECT_NE(busy.find("oversubscribed"), std::string::npos) << busy;
  EXPECT_NE(busy.find("4 ranks on 2 cores"), std::string::npos) << busy;
  EXPECT_NE(busy.find("T(1) = 1.2 ms"), std::string::npos) << busy;
  EXPECT_NE(busy.find("T(4) = 1.5 ms"), std::string::npos) << busy;
  const std::string roomy = scaling_detail(ScalingMode::strong, reference, point, {16, 4, false});
  EXPECT_EQ(roomy.find("oversubscribed"), std::string::npos) << roomy;
  EXPECT_NE(roomy.find("strong"), std::string::npos) << roomy;
}

}  // namespace
}  // namespace dts
