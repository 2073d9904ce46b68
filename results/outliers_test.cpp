// The outlier rule (results/outliers.h) against cases worked by hand.
#include "results/outliers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

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


// A one-way matrix of 4 ranks of one node: every cell 4000 but those with `slow` ranks at either
// end (30: a rank delayed on every call) and the extra `cells` given.
std::vector<PartnerFigure> matrix(const std::set<int>& slow, const std::map<std::pair<int, int>, double>& cells,
                                  double floor) {
  std::vector<PartnerFigure> figures(2);  // send (subject: source), receive (subject: destination)
  for (int src = 0; src < 4; ++src) {
    for (int dst = 0; dst < 4; ++dst) {
      if (src == dst) continue;
      double v = slow.count(src) || slow.count(dst) ? 30 : 4000;
      if (const auto it = cells.find({src, dst}); it != cells.end()) v = it->second;
      figures[0].cells.push_back({src, dst, {v, 0}});
      figures[1].cells.push_back({dst, src, {v, 0}});
    }
  }
  for (PartnerFigure& f : figures) f.min_shortfall.assign(4, floor);
  return figures;
}

std::set<std::string> named(const std::vector<std::vector<PartnerVerdict>>& judged) {
  std::set<std::string> out;
  for (size_t f = 0; f < judged.size(); ++f) {
    for (size_t s = 0; s < judged[f].size(); ++s) {
      if (judged[f][s].verdict.named) out.insert(std::string(f == 0 ? "send " : "receive ") + std::to_string(s));
    }
  }
  return out;
}

// What a CI machine saw: rank 2 delayed, and the cell 3 -> 1 slowed 5x by chance. Each of ranks
// 3 (as sender) and 1 (as receiver) then has two slow cells of three: the plain rule names them
// with rank 2 (the factor-of-4 floor of a crowded machine is 1000 under peers at 4000).
TEST(Outliers, APartnerNamedFirstIsExplainedAway) {
  const auto figures = matrix({2}, {{{3, 1}, 800}}, 0.75);
  // The plain rule, by hand: rank 3's cells as sender {4000, 800, 30}, median 800, against ranks
  // 0, 1 and 2 at 4000, 4000 and 30: named.
  EXPECT_TRUE(judge_outliers(values({4000, 4000, 30, 800}), true, 0.75)[3].named);
  const auto judged = judge_with_partners({0, 0, 0, 0}, figures);
  EXPECT_EQ(named(judged), (std::set<std::string>{"send 2", "receive 2"}));
  // Rank 3 as sender by its cells with 0 and 1, median (4000 + 800) / 2, rank 2's left out.
  const PartnerVerdict& three = judged[0][3];
  EXPECT_EQ(three.cells, 2);
  EXPECT_DOUBLE_EQ(three.value.value, 2400);
  EXPECT_EQ(three.left_out, std::vector<int>{2});
  EXPECT_TRUE(three.verdict.judged);
  EXPECT_EQ(three.verdict.peers, 3);  // rank 2 is still a peer, at what it was named by
  // Rank 2 was judged by all its cells, before anyone was left out.
  EXPECT_EQ(judged[0][2].cells, 3);
  EXPECT_TRUE(judged[0][2].left_out.empty());
  EXPECT_DOUBLE_EQ(judged[0][2].value.value, 30);
}

TEST(Outliers, TwoBadRanksAreBothNamedTheSecondWithoutTheFirstsCells) {
  // Ranks 1 and 2 delayed, rank 2 the worse (its cells with healthy ranks at 20).
  const auto judged = judge_with_partners({0, 0, 0, 0}, matrix({1, 2}, {{{2, 0}, 20}, {{2, 3}, 20}, {{0, 2}, 20}, {{3, 2}, 20}}, 0.2));
  EXPECT_EQ(named(judged), (std::set<std::string>{"send 1", "receive 1", "send 2", "receive 2"}));
  EXPECT_TRUE(judged[0][2].left_out.empty());
  EXPECT_EQ(judged[0][1].left_out, std::vector<int>{2});
  EXPECT_EQ(judged[0][0].left_out, (std::vector<int>{2, 1}));  // in the order they were named
  EXPECT_EQ(judged[0][0].cells, 1);
}

TEST(Outliers, ASlowLinkNamesNeitherEndAndGroupsAreApart) {
  // Only the path 0 <-> 3 slow: each end has one slow cell of three, its median healthy (the pair
  // is the pair level's to name).
  const std::map<std::pair<int, int>, double> link{{{0, 3}, 30}, {{3, 0}, 30}};
  EXPECT_TRUE(named(judge_with_partners({0, 0, 0, 0}, matrix({}, link, 0.2))).empty());
  // Two groups of two: one peer each, so none judged, though rank 2 is slow.
  for (const auto& figure : judge_with_partners({0, 0, 1, 1}, matrix({2}, {}, 0.2))) {
    for (const PartnerVerdict& v : figure) {
      EXPECT_FALSE(v.verdict.judged);
      EXPECT_EQ(v.verdict.peers, 1);
    }
  }
  // A time: the longer is worse; no cells, no value.
  PartnerFigure latency;
  latency.higher_is_better = false;
  for (const auto& [a, b] : std::vector<std::pair<int, int>>{{0, 1}, {0, 2}, {1, 2}, {0, 3}, {1, 3}, {2, 3}}) {
    const double t = a == 1 || b == 1 ? 1e-3 : 1e-5;
    latency.cells.push_back({a, b, {t, 0}});
    latency.cells.push_back({b, a, {t, 0}});
  }
  const auto judged = judge_with_partners({0, 0, 0, 0, 0}, {latency});
  for (int s = 0; s < 4; ++s) EXPECT_EQ(judged[0][static_cast<size_t>(s)].verdict.named, s == 1) << s;
  EXPECT_EQ(judged[0][4].cells, 0);
  EXPECT_FALSE(std::isfinite(judged[0][4].value.value));
  EXPECT_FALSE(judged[0][4].verdict.judged);
}

}  // namespace
}  // namespace dts
