// The verification's arithmetic (verify.h): Spearman against values worked by hand, the goals
// judged at their edges, and the rows a verification writes.
#include "planner/verify.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace dts::planner {
namespace {

TEST(Verify, SpearmanOfOrdersWorkedByHand) {
  // The same order: 1; reversed: -1.
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1);
  // One swap among 4 (ranks 1 2 4 3): 1 - 6 sum d^2 / (n (n^2 - 1)) = 1 - 6 x 2 / 60 = 0.8.
  EXPECT_NEAR(spearman({1, 2, 3, 4}, {1, 2, 4, 3}), 0.8, 1e-15);
  // Ties take their mean rank: b's ranks 1.5 1.5 3 4; Pearson of (1 2 3 4) and those: 0.9486833 =
  // 4.5 / sqrt(5 x 4.5).
  EXPECT_NEAR(spearman({1, 2, 3, 4}, {7, 7, 8, 9}), 4.5 / std::sqrt(5 * 4.5), 1e-15);
  EXPECT_TRUE(std::isnan(spearman({1}, {2})));
  EXPECT_TRUE(std::isnan(spearman({1, 2}, {3, 3})));
  EXPECT_TRUE(std::isnan(spearman({1, 2}, {3, 4, 5})));
}

VerifiedLayout layout(const std::string& strategy, int dp, int plan_rank, double predicted, double measured) {
  VerifiedLayout v;
  v.predicted.strategy = strategy;
  v.predicted.layout.dp = dp;
  v.predicted.step_time = predicted;
  v.plan_rank = plan_rank;
  v.measured = measured;
  return v;
}

TEST(Verify, TheGoalsAreJudged) {
  // Errors +3/32, -3/32, +3/16, 0 (exact in binary): median 9.4% (<= 10%), largest 18.75% (<=
  // 20%); the orders agree; the measured fastest was predicted #1.
  std::vector<VerifiedLayout> v{layout("ddp", 4, 1, 1.0, 1.09375), layout("zero1", 4, 2, 2.0, 1.8125),
                                layout("zero2", 4, 8, 4.0, 4.75), layout("zero3", 4, 9, 8.0, 8.0)};
  VerificationSummary s = summarize(v);
  EXPECT_EQ(s.median_abs_error, 0.09375);
  EXPECT_EQ(s.max_abs_error, 0.1875);
  EXPECT_DOUBLE_EQ(s.rank_correlation, 1);
  EXPECT_EQ(s.best_plan_rank, 1);
  EXPECT_TRUE(s.held) << s.detail;
  // Past the largest-error goal: 7/32 = 21.9%.
  v[2].measured = 4.875;
  s = summarize(v);
  EXPECT_FALSE(s.held);
  EXPECT_NE(s.detail.find("missed: largest 21.9%"), std::string::npos) << s.detail;
  // Past the median goal: two errors of 1/8.
  v[2].measured = 4.75;
  v[0].measured = 1.125;
  v[1].measured = 1.75;
  s = summarize(v);
  EXPECT_EQ(s.median_abs_error, 0.125);
  EXPECT_FALSE(s.held);
  EXPECT_NE(s.detail.find("missed: median |plan_error| 12.5%"), std::string::npos) << s.detail;
  v[0].measured = 1.09375;
  v[1].measured = 1.8125;
  // The layout predicted #8 measured fastest: outside the top 3, and the orders disagree.
  v[2].measured = 0.5;  // error -87.5%, and the order broken
  s = summarize(v);
  EXPECT_EQ(s.best_plan_rank, 8);
  EXPECT_FALSE(s.held);
  EXPECT_NE(s.detail.find("missed: the measured fastest, zero2/dp4, was predicted #8"), std::string::npos) << s.detail;
  // Two layouts: the correlation is not judged (NaN), the rest is.
  const VerificationSummary two = summarize({layout("ddp", 4, 1, 1.0, 1.0), layout("zero3", 4, 9, 2.0, 2.0)});
  EXPECT_TRUE(std::isnan(two.rank_correlation));
  EXPECT_TRUE(two.held) << two.detail;
  EXPECT_NE(two.detail.find("Spearman not judged"), std::string::npos);
  EXPECT_THROW(summarize({}), Error);
  EXPECT_THROW(summarize({layout("ddp", 4, 1, 1.0, 0)}), Error);
}

TEST(Verify, RowsPerLayoutAndTheCheck) {
  VerifiedLayout a = layout("ddp", 4, 1, 1.0e-3, 1.05e-3), b = layout("zero3", 4, 5, 2.0e-3, 3.0e-3);
  a.samples = {0.9e-3, 1.05e-3, 1.2e-3};  // the prediction (1 ms) lies within p05-p95
  Labels labels;
  labels.config = "verified=2;layouts=9;batch=64";
  const std::vector<Record> rows = verification_records({a, b}, "m.csv", labels);
  // 3 per layout, then 4 summaries and the check.
  ASSERT_EQ(rows.size(), 3u * 2 + 5);
  EXPECT_EQ(rows[0].metric, "plan_step_time");
  EXPECT_EQ(rows[0].case_id, "verify/ddp/dp4");
  EXPECT_EQ(config_value(rows[0].labels.config, "plan_rank").value_or(""), "1");
  EXPECT_EQ(rows[1].metric, "step_time");
  EXPECT_EQ(rows[1].stats.n, 3);
  EXPECT_EQ(rows[2].metric, "plan_error");
  EXPECT_NEAR(rows[2].value, 0.05, 1e-12);
  EXPECT_NE(rows[2].detail.find("inside the measurement's spread"), std::string::npos) << rows[2].detail;
  EXPECT_NEAR(rows[5].value, 0.5, 1e-12);  // zero3: 3 ms against 2
  EXPECT_EQ(rows[5].detail.find("inside"), std::string::npos);
  const Record& check = rows.back();
  EXPECT_EQ(check.metric, "check");
  EXPECT_EQ(check.verdict, Verdict::fail);  // 50% off
  EXPECT_EQ(check.case_id, "verify");
}

}  // namespace
}  // namespace dts::planner
