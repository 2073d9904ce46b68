// Pipeline schedules (GPipe, 1F1B) checked for every small pipeline: each micro-batch once each
// way, backwards in micro-batch order, the activation peak the theory claims, and no deadlock when
// every stage runs its schedule against its neighbours. One process, no MPI.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "strategies/pipeline/schedule.h"

namespace dts {
namespace {

constexpr PipelineSchedule kSchedules[] = {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b};
// p and m from 1 to past each other: m < p (a pipeline never full), m == p and m > p.
constexpr int kMaxStages = 4, kMaxMicrobatches = 6;

TEST(PipelineSchedule, EachMicrobatchOnceEachWayBackwardsInOrderPeakAsTheory) {
  for (PipelineSchedule schedule : kSchedules) {
    for (int p = 1; p <= kMaxStages; ++p) {
      for (int s = 0; s < p; ++s) {
        for (int m = 1; m <= kMaxMicrobatches; ++m) {
          SCOPED_TRACE(std::string(name(schedule)) + " p " + std::to_string(p) + " stage " + std::to_string(s) +
                       " m " + std::to_string(m));
          const std::vector<PipelineOp> ops = pipeline_schedule(schedule, p, s, m);
          ASSERT_EQ(ops.size(), 2 * size_t(m));
          std::vector<int> forwarded(size_t(m), 0), backwarded(size_t(m), 0);
          int in_flight = 0, peak = 0, next_backward = 0;
          for (const PipelineOp& op : ops) {
            ASSERT_TRUE(op.microbatch >= 0 && op.microbatch < m);
            const auto j = static_cast<size_t>(op.microbatch);
            if (op.forward) {
              ++forwarded[j];
              peak = std::max(peak, ++in_flight);
            } else {
              EXPECT_EQ(forwarded[j], 1) << "backward of " << op.microbatch << " before its forward";
              // Gradients accumulate in micro-batch order, as one process accumulates them.
              EXPECT_EQ(op.microbatch, next_backward++);
              ++backwarded[j];
              --in_flight;
            }
          }
          EXPECT_EQ(forwarded, std::vector<int>(size_t(m), 1));
          EXPECT_EQ(backwarded, std::vector<int>(size_t(m), 1));
          EXPECT_EQ(peak, microbatches_in_flight_theory(schedule, p, s, m));
        }
      }
    }
  }
}

TEST(PipelineSchedule, TheoryPeaks) {
  EXPECT_EQ(microbatches_in_flight_theory(PipelineSchedule::gpipe, 4, 0, 6), 6);  // every forward first
  EXPECT_EQ(microbatches_in_flight_theory(PipelineSchedule::one_f_one_b, 4, 0, 6), 4);  // p - s
  EXPECT_EQ(microbatches_in_flight_theory(PipelineSchedule::one_f_one_b, 4, 3, 6), 1);  // last: 1F1B at once
  EXPECT_EQ(microbatches_in_flight_theory(PipelineSchedule::one_f_one_b, 4, 0, 2), 2);  // capped by m
}

TEST(PipelineSchedule, OneFOneBLastStageStartsBackwardAtOnce) {
  // The last stage has no warm-up: its first backward directly follows its first forward.
  for (int p = 1; p <= kMaxStages; ++p) {
    for (int m = 1; m <= kMaxMicrobatches; ++m) {
      const std::vector<PipelineOp> ops = pipeline_schedule(PipelineSchedule::one_f_one_b, p, p - 1, m);
      ASSERT_GE(ops.size(), 2u);
      EXPECT_TRUE(ops[0].forward && ops[0].microbatch == 0);
      EXPECT_TRUE(!ops[1].forward && ops[1].microbatch == 0) << "p " << p << " m " << m;
    }
  }
}

TEST(PipelineSchedule, StagesRunTogetherWithoutDeadlock) {
  // Stage s's forward of j needs stage s-1's forward of j; its backward of j needs stage s+1's
  // backward of j. Each round every stage runs its next op if that op's input is there; a round
  // where no stage can move is a deadlock of blocking sends and receives.
  for (PipelineSchedule schedule : kSchedules) {
    for (int p = 1; p <= kMaxStages; ++p) {
      for (int m = 1; m <= kMaxMicrobatches; ++m) {
        std::vector<std::vector<PipelineOp>> ops;
        for (int s = 0; s < p; ++s) ops.push_back(pipeline_schedule(schedule, p, s, m));
        std::vector<size_t> next(size_t(p), 0);
        const std::vector<std::vector<bool>> none(size_t(p), std::vector<bool>(size_t(m), false));
        std::vector<std::vector<bool>> forward_done = none, backward_done = none;
        size_t remaining = 2 * size_t(p) * size_t(m);
        while (remaining > 0) {
          bool moved = false;
          for (size_t s = 0; s < size_t(p); ++s) {
            if (next[s] == ops[s].size()) continue;
            const PipelineOp op = ops[s][next[s]];
            const auto j = static_cast<size_t>(op.microbatch);
            const bool ready = op.forward ? (s == 0 || forward_done[s - 1][j])
                                          : (s + 1 == size_t(p) || backward_done[s + 1][j]);
            if (!ready) continue;
            (op.forward ? forward_done : backward_done)[s][j] = true;
            ++next[s];
            --remaining;
            moved = true;
          }
          ASSERT_TRUE(moved) << name(schedule) << " deadlocks at p " << p << " m " << m;
        }
      }
    }
  }
}

TEST(PipelineSchedule, BubbleFractionTheory) {
  // (p - 1) / (m + p - 1): 4 stages, 4 micro-batches idle 3 slots of 7.
  EXPECT_DOUBLE_EQ(bubble_fraction_theory(4, 4), 3.0 / 7.0);
  for (int m = 1; m <= kMaxMicrobatches; ++m) EXPECT_EQ(bubble_fraction_theory(1, m), 0.0);  // nothing to wait for
  // More micro-batches shrink the bubble.
  EXPECT_LT(bubble_fraction_theory(4, 16), bubble_fraction_theory(4, 4));
}

TEST(PipelineSchedule, BadArgumentsAreRefused) {
  for (PipelineSchedule schedule : kSchedules) {
    EXPECT_THROW(pipeline_schedule(schedule, 0, 0, 4), Error);   // no stages
    EXPECT_THROW(pipeline_schedule(schedule, 2, -1, 4), Error);  // stage before the first
    EXPECT_THROW(pipeline_schedule(schedule, 2, 2, 4), Error);   // stage past the last
    EXPECT_THROW(pipeline_schedule(schedule, 2, 0, 0), Error);   // no micro-batches
  }
}

}  // namespace
}  // namespace dts
