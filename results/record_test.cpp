// Tests of results/record: order statistics (compute_stats) and verdict names.
// Quantiles use linear interpolation between closest ranks: with the sorted samples x[0..m-1],
// q lies at position pos = q * (m - 1) and is x[lo] + (x[lo+1] - x[lo]) * (pos - lo), lo = floor(pos).
#include "results/record.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace dts {
namespace {

TEST(ComputeStats, NoSamplesIsNoDistribution) {
  const Stats s = compute_stats({});
  EXPECT_EQ(s.n, 0);  // n == 0 is what sinks read as "no distribution"
  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.median, 0);
  EXPECT_EQ(s.max, 0);
}

TEST(ComputeStats, OneSampleIsEveryStatistic) {
  // m = 1: every position q * 0 is 0, so every quantile is the sample itself.
  const Stats s = compute_stats({2.5});
  EXPECT_EQ(s.n, 1);
  EXPECT_EQ(s.min, 2.5);
  EXPECT_EQ(s.p05, 2.5);
  EXPECT_EQ(s.median, 2.5);
  EXPECT_EQ(s.p95, 2.5);
  EXPECT_EQ(s.max, 2.5);
}

TEST(ComputeStats, TwoSamples) {
  // Sorted {1, 3}, m - 1 = 1: p05 at 0.05 -> 1 + 2 * 0.05 = 1.1; median at 0.5 -> 2;
  // p95 at 0.95 -> 1 + 2 * 0.95 = 2.9.
  const Stats s = compute_stats({3, 1});
  EXPECT_EQ(s.n, 2);
  EXPECT_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.p05, 1.1);
  EXPECT_DOUBLE_EQ(s.median, 2);
  EXPECT_DOUBLE_EQ(s.p95, 2.9);
  EXPECT_EQ(s.max, 3);
}

TEST(ComputeStats, OddCountUnsorted) {
  // Sorted {10, 20, 30, 40, 50}, m - 1 = 4: p05 at 0.2 -> 10 + 10 * 0.2 = 12;
  // median at 2 -> 30 exactly (the middle sample); p95 at 3.8 -> 40 + 10 * 0.8 = 48.
  const Stats s = compute_stats({30, 50, 10, 40, 20});
  EXPECT_EQ(s.n, 5);
  EXPECT_EQ(s.min, 10);
  EXPECT_DOUBLE_EQ(s.p05, 12);
  EXPECT_EQ(s.median, 30);
  EXPECT_DOUBLE_EQ(s.p95, 48);
  EXPECT_EQ(s.max, 50);
}

TEST(ComputeStats, EvenCountMedianIsMeanOfMiddlePair) {
  // Sorted {1, 2, 3, 4}, m - 1 = 3: median at 1.5 -> 2.5; p05 at 0.15 -> 1.15; p95 at 2.85 -> 3.85.
  const Stats s = compute_stats({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.p05, 1.15);
  EXPECT_DOUBLE_EQ(s.p95, 3.85);
}

TEST(ComputeStats, HundredAndOneSamplesHitRanksExactly) {
  // 0..100 shuffled, m - 1 = 100: positions 5, 50 and 95 are whole ranks, so the quantiles are
  // the samples 5, 50 and 95 themselves.
  std::vector<double> samples;
  for (int i = 0; i <= 100; ++i) samples.push_back(i);
  std::mt19937 shuffle_rng(7);  // any fixed seed: the result must not depend on input order
  std::shuffle(samples.begin(), samples.end(), shuffle_rng);
  const Stats s = compute_stats(samples);
  EXPECT_EQ(s.n, 101);
  EXPECT_EQ(s.min, 0);
  EXPECT_DOUBLE_EQ(s.p05, 5);
  EXPECT_DOUBLE_EQ(s.median, 50);
  EXPECT_DOUBLE_EQ(s.p95, 95);
  EXPECT_EQ(s.max, 100);
}

TEST(ComputeStats, NegativeAndRepeatedSamples) {
  // Sorted {-2, -2, 0, 7}, m - 1 = 3: p05 at 0.15 lies between -2 and -2 -> -2;
  // median at 1.5 -> -2 + 2 * 0.5 = -1; p95 at 2.85 -> 0 + 7 * 0.85 = 5.95.
  const Stats s = compute_stats({0, -2, 7, -2});
  EXPECT_EQ(s.min, -2);
  EXPECT_DOUBLE_EQ(s.p05, -2);
  EXPECT_DOUBLE_EQ(s.median, -1);
  EXPECT_DOUBLE_EQ(s.p95, 5.95);
  EXPECT_EQ(s.max, 7);
}

TEST(Verdict, NamesAreTheCsvSpellings) {
  // DESIGN.md, "verdict": pass, fail, skip, info, timeout.
  EXPECT_EQ(name(Verdict::pass), "pass");
  EXPECT_EQ(name(Verdict::fail), "fail");
  EXPECT_EQ(name(Verdict::skip), "skip");
  EXPECT_EQ(name(Verdict::info), "info");
  EXPECT_EQ(name(Verdict::timeout), "timeout");
}

TEST(Record, DefaultsMeanNotApplicable) {
  const Record r;
  EXPECT_EQ(r.labels.bytes, -1);
  EXPECT_TRUE(std::isnan(r.threshold));
  EXPECT_EQ(r.stats.n, 0);
  EXPECT_EQ(r.verdict, Verdict::info);
}

TEST(FormatSi, PrefixesForLargeAndSmallFigures) {
  EXPECT_EQ(format_si(4.1e10, "FLOP/s"), "41 GFLOP/s");
  EXPECT_EQ(format_si(1.23e-5, "s"), "12.3 us");
  EXPECT_EQ(format_si(999, "B/s"), "999 B/s");
  EXPECT_EQ(format_si(0.5, "s"), "500 ms");
  EXPECT_EQ(format_si(0, "s"), "0 s");
  EXPECT_EQ(format_si(-2.5e6, "B"), "-2.5 MB");
}

}  // namespace
}  // namespace dts
