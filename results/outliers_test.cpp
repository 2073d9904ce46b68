// The outlier rule (results/outliers.h) against cases worked by hand.
#include "results/outliers.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dts {
namespace {

std::vector<PeerValue> values(std::initializer_list<double> xs, double spread = 0) {
  std::vector<PeerValue> out;
  for (double x : xs) out.push_back({x, spread});
  return out;
}

TEST(Outliers, AlikePeersNameNoneAndEveryOneIsJudged) {
  for (const auto& v : judge_outliers(values({100, 101, 99, 100}), true)) {
    EXPECT_TRUE(v.judged);
    EXPECT_FALSE(v.named);
    EXPECT_EQ(v.peers, 3);
  }
}

TEST(Outliers, OneAtHalfItsPeersIsNamedWithItsShortfall) {
  const auto v = judge_outliers(values({100, 102, 50, 98}), true);
  EXPECT_TRUE(v[2].named);
  EXPECT_DOUBLE_EQ(v[2].peer_median, 100);        // the median of 100, 102, 98: not pulled by 50
  EXPECT_DOUBLE_EQ(v[2].shortfall, 0.5);
  EXPECT_DOUBLE_EQ(v[2].noise, 1.4826 * 2);       // MAD of {100, 102, 98} around 100 is 2
  EXPECT_DOUBLE_EQ(v[2].bound, 100 - 20);  // 3.5 x noise (10.4) is inside the 20% floor
  EXPECT_EQ(describe_shortfall(v[2], true, "100 GFLOP/s"), "50% below the median of its 3 peers (100 GFLOP/s)");
  for (size_t i : {0u, 1u, 3u}) EXPECT_FALSE(v[i].named) << i;
}

TEST(Outliers, TheTenPercentFloorAndTheNoiseBand) {
  // Peers alike to the last digit: MAD 0, so only the floor stands between 81 and a verdict.
  EXPECT_FALSE(judge_outliers(values({100, 100, 81, 100}), true)[2].named);
  EXPECT_TRUE(judge_outliers(values({100, 100, 79, 100}), true)[2].named);
  // Iterations that spread by a standard deviation of 10: 3.5 x 10 = 35 below the median is the line.
  EXPECT_FALSE(judge_outliers(values({100, 100, 70, 100}, 10), true)[2].named);
  EXPECT_TRUE(judge_outliers(values({100, 100, 60, 100}, 10), true)[2].named);
  // A noisy subject widens its own band; the peers' spread counts by its median.
  auto mixed = values({100, 100, 60, 100});
  mixed[2].spread = 12;  // 3.5 x 12 = 42 > 40
  EXPECT_FALSE(judge_outliers(mixed, true)[2].named);
}

TEST(Outliers, ForATimeShortIsAbove) {
  const auto v = judge_outliers(values({1.0, 1.02, 2.0, 0.98}), false);
  EXPECT_TRUE(v[2].named);
  EXPECT_DOUBLE_EQ(v[2].shortfall, 1.0);
  EXPECT_GT(v[2].bound, 1.0);
  EXPECT_FALSE(v[3].named);  // faster than its peers is never a finding
  EXPECT_NE(describe_shortfall(v[2], false, "1 s").find("100% above"), std::string::npos);
}

TEST(Outliers, TooFewPeersOrNoValueIsNotJudged) {
  for (const auto& v : judge_outliers(values({}), true)) ADD_FAILURE() << v.peers;
  EXPECT_FALSE(judge_outliers(values({5}), true)[0].judged);
  const auto two = judge_outliers(values({100, 10}), true);
  EXPECT_FALSE(two[0].judged);
  EXPECT_FALSE(two[1].judged);  // one peer: no spread between peers to judge by
  // A subject without a value is neither judged nor anyone's peer.
  const auto holes = judge_outliers(values({100, std::nan(""), 50, 100, 101}), true);
  EXPECT_FALSE(holes[1].judged);
  EXPECT_EQ(holes[2].peers, 3);
  EXPECT_TRUE(holes[2].named);
}

TEST(Outliers, SpreadFromTheFifthToTheNinetyFifthPercentile) {
  Stats s;
  s.n = 20;
  s.p05 = 90;
  s.p95 = 90 + 3.29 * 4;
  EXPECT_DOUBLE_EQ(robust_spread(s), 4);
  EXPECT_EQ(robust_spread(Stats{}), 0);  // a single value has none
}

TEST(Outliers, ASubjectAgainstPeersGivenApart) {
  // A node's median of 50 against the other node's four cells around 100 (MAD 1): named, and
  // judge_against agrees with judge_outliers where the subjects are one list.
  const auto v = judge_against({50, 0}, values({99, 100, 101, 100}), true);
  EXPECT_TRUE(v.judged);
  EXPECT_TRUE(v.named);
  EXPECT_EQ(v.peers, 4);
  EXPECT_DOUBLE_EQ(v.peer_median, 100);
  EXPECT_DOUBLE_EQ(v.shortfall, 0.5);
  const auto list = judge_outliers(values({50, 99, 100, 101, 100}), true)[0];
  EXPECT_EQ(list.named, v.named);
  EXPECT_DOUBLE_EQ(list.bound, v.bound);
  // 81 against peers alike: inside the 20% floor; one peer: not judged; no value: not judged.
  EXPECT_FALSE(judge_against({81, 0}, values({100, 100}), true).named);
  EXPECT_FALSE(judge_against({50, 0}, values({100}), true).judged);
  EXPECT_FALSE(judge_against({std::nan(""), 0}, values({100, 100, 100}), true).judged);
}

TEST(Outliers, MadSpreadIsAStandardDeviationThatIgnoresAFewSlowCalls) {
  // {1, 2, 3, 4, 100}: median 3, absolute deviations {2, 1, 0, 1, 97}, their median 1.
  EXPECT_DOUBLE_EQ(mad_spread({1, 2, 3, 4, 100}), 1.4826);
  EXPECT_EQ(mad_spread({7}), 0);
  EXPECT_EQ(mad_spread({}), 0);
}

}  // namespace
}  // namespace dts
