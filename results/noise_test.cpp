#include "results/noise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace dts {
namespace {

TEST(Noise, IncompleteBetaMatchesClosedForms) {
  EXPECT_NEAR(incomplete_beta(1, 1, 0.3), 0.3, 1e-14);  // the uniform distribution's CDF
  // I_x(2, 3) = sum_{j=2}^{4} C(4, j) x^j (1 - x)^(4 - j): 0.3456 + 0.1536 + 0.0256 at x = 0.4.
  EXPECT_NEAR(incomplete_beta(2, 3, 0.4), 0.5248, 1e-13);
  EXPECT_NEAR(incomplete_beta(2, 3, 0.9), 1 - incomplete_beta(3, 2, 0.1), 1e-14);  // symmetry
  EXPECT_EQ(incomplete_beta(5, 7, 0), 0);
  EXPECT_EQ(incomplete_beta(5, 7, 1), 1);
}

TEST(Noise, StudentTMatchesTheTables) {
  EXPECT_NEAR(student_t_cdf(0, 3), 0.5, 1e-15);
  EXPECT_NEAR(student_t_cdf(1, 1), 0.75, 1e-13);  // Cauchy: 1/2 + atan(1)/pi
  EXPECT_NEAR(student_t_cdf(-1, 1), 0.25, 1e-13);
  // Two-sided 95% and 99% points as printed in every statistics table (3 decimals).
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.706, 5e-4);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.303, 5e-4);
  EXPECT_NEAR(student_t_quantile(0.995, 10), 3.169, 5e-4);
  EXPECT_NEAR(student_t_quantile(0.95, 30), 1.697, 5e-4);
  EXPECT_NEAR(student_t_quantile(0.975, 1e7), 1.95996, 1e-4);  // the normal's, as df grows
  EXPECT_NEAR(student_t_quantile(0.025, 2), -4.303, 5e-4);
  EXPECT_NEAR(student_t_cdf(student_t_quantile(0.9995, 6), 6), 0.9995, 1e-12);
  EXPECT_TRUE(std::isnan(student_t_quantile(1, 4)));
}

TEST(Noise, MedianLogVarianceFollowsTheInterval) {
  EXPECT_EQ(median_log_variance(1, 1, 10), 0);    // no spread
  EXPECT_EQ(median_log_variance(0, 1, 10), 0);    // no logarithm of 0
  EXPECT_EQ(median_log_variance(1, 2, 1), 0);     // one sample: no spread known
  // p05..p95 of e^-1.645..e^1.645 is a normal's middle 90% with sigma 1 in logs: se^2 = 1.2533^2 / n.
  EXPECT_NEAR(median_log_variance(std::exp(-1.645), std::exp(1.645), 25), 1.2533 * 1.2533 / 25, 1e-6);
}

TEST(Noise, ThreeRunsAloneCannotProveWhatLikeRowsCan) {
  // Runs at 1.00, 1.02, 0.98 (a 2% spread) and a current run 25% slower.
  const std::vector<double> baseline{1.00, 1.02, 0.98}, current{1.25};
  const RowNoise row = row_noise(baseline, {});
  EXPECT_NEAR(row.df, 2, 0);
  EXPECT_NEAR(std::sqrt(row.variance), 0.02, 0.001);
  // Alone (2 degrees of freedom), at 1 false alarm in 1000, the noise allows far more than 25%:
  // t(0.999, 2) = 22.3 standard errors of 0.023 in logs, +67%.
  const NoiseJudgement alone = judge_between_runs(baseline, current, true, row, {}, 0.001);
  EXPECT_FALSE(alone.outside);
  EXPECT_NEAR(alone.change, 0.25, 1e-12);
  EXPECT_GT(alone.limit, 0.6);
  // With 20 more degrees of freedom from like rows at the same spread, the limit is ~+8%.
  const NoiseJudgement pooled = judge_between_runs(baseline, current, true, row, {0.0004, 20}, 0.001);
  EXPECT_TRUE(pooled.outside);
  EXPECT_LT(pooled.limit, 0.1);
  // Higher is better (a bandwidth): the same fall of 20% is the same judgement.
  const NoiseJudgement bandwidth =
      judge_between_runs({1.00, 1 / 1.02, 1 / 0.98}, {0.8}, false, row_noise({1.00, 1 / 1.02, 1 / 0.98}, {}),
                         {0.0004, 20}, 0.001);
  EXPECT_TRUE(bandwidth.outside);
  EXPECT_NEAR(bandwidth.change, 0.25, 1e-12);
  // An improvement is never outside towards worse.
  EXPECT_FALSE(judge_between_runs(baseline, {0.8}, true, row, {0.0004, 20}, 0.001).outside);
}

TEST(Noise, ARunsOwnIterationsSetAFloor) {
  // Three identical runs would otherwise make any change significant.
  const std::vector<double> baseline{1, 1, 1};
  EXPECT_TRUE(judge_between_runs(baseline, {1.01}, true, row_noise(baseline, {}), {}, 0.01).outside);
  const RowNoise floored = row_noise(baseline, {0.01 * 0.01, 0.01 * 0.01, 0.01 * 0.01});  // 1% se each
  EXPECT_FALSE(judge_between_runs(baseline, {1.01}, true, floored, {}, 0.01).outside);
}

TEST(Noise, PoolingIgnoresOneWildRow) {
  std::vector<RowNoise> rows(8, RowNoise{0.0004, 2, 0});
  rows.push_back({1.0, 2, 0});  // one row 50x noisier
  const NoisePrior prior = pool_noise(rows);
  // The median of 9 variances, scaled by 1 / median(chi2(2) / 2) ~ 1 / 0.70 (the pool of rows
  // at one spread estimates it from their median, which sits below the mean of a chi-square).
  EXPECT_NEAR(prior.variance, 0.0004 / std::pow(1 - 2.0 / 18, 3), 1e-12);
  EXPECT_EQ(prior.df, 18);  // 9 rows of 2 degrees of freedom
  EXPECT_EQ(pool_noise(std::vector<RowNoise>(12, RowNoise{0.0004, 2, 0})).df, kMaxPriorDf);  // 24, capped
  EXPECT_EQ(pool_noise({RowNoise{0.0004, 2, 0}, RowNoise{0.0004, 2, 0}}).df, 0);  // 2 rows: no pool
}

// The stated false-alarm rate holds when nothing changed: simulated runs of rows that share one
// log-normal spread, three baseline runs and one current, the prior pooled from 9 like rows as
// compare pools it. Over 4000 judgements at alpha 0.05 the count of false alarms is Binomial(4000,
// 0.05) if the test is exact: mean 200, sd 14; the bound allows the approximations (median
// centres, the Wilson-Hilferty median) 25% more and fails a test that is anti-conservative by more.
TEST(Noise, FalseAlarmRateIsAtMostTheStatedOne) {
  std::mt19937_64 random(12345);
  std::normal_distribution<double> noise(0, 0.05);
  int alarms = 0;
  constexpr int kTrials = 4000;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::vector<std::vector<double>> baselines(9);
    std::vector<RowNoise> rows;
    for (auto& b : baselines) {
      for (int k = 0; k < 3; ++k) b.push_back(std::exp(noise(random)));
      rows.push_back(row_noise(b, {}));
    }
    const NoisePrior prior = pool_noise(rows);
    const NoiseJudgement j = judge_between_runs(baselines[0], {std::exp(noise(random))}, true, rows[0], prior, 0.05);
    alarms += j.outside ? 1 : 0;
  }
  EXPECT_LE(alarms, 250) << alarms;
  EXPECT_GE(alarms, 50) << alarms;  // and it is not blind: an exact test would give ~200
}

}  // namespace
}  // namespace dts
