#include "results/noise.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// `detectable` is the change flagged in 9 runs of 10. Eight baseline runs and one current of
// log-normal noise (sd 5%), the prior pooled from 9 like rows as above, alpha 0.01: the median
// of the reported detectable over 2000 unchanged judgements is the row's detectable change; a
// current run worse by exactly that is flagged in a fraction of 4000 judgements that is
// Binomial(4000, 0.9) if the approximation (t_{1-alpha} + t_{0.9} standard errors) is exact: sd
// 0.005, so [0.85, 0.95] allows the approximations (median centres, the noncentral t taken as a
// shifted t) 10 sd and still fails a detectable that is off by a fifth (power then ~0.78 or
// ~0.97). Half the change is flagged far less often: the figure is no bound that everything meets.
TEST(Noise, DetectableIsTheChangeFlaggedInNineRunsOfTen) {
  std::mt19937_64 random(2468);
  std::normal_distribution<double> noise(0, 0.05);
  const auto judge = [&](double shift) {
    std::vector<std::vector<double>> baselines(9);
    std::vector<RowNoise> rows;
    for (auto& b : baselines) {
      for (int k = 0; k < 8; ++k) b.push_back(std::exp(noise(random)));
      rows.push_back(row_noise(b, {}));
    }
    return judge_between_runs(baselines[0], {std::exp(noise(random) + std::log1p(shift))}, true, rows[0],
                              pool_noise(rows), 0.01);
  };
  std::vector<double> reported;
  for (int trial = 0; trial < 2000; ++trial) reported.push_back(judge(0).detectable);
  const double detectable = median_of(reported);
  // The formula's own value at the true sd: (t_0.99 + t_0.9) * 0.05 * sqrt(1/8 + 1), df about 27.
  EXPECT_NEAR(detectable, std::expm1((2.47 + 1.31) * 0.05 * std::sqrt(1.0 / 8 + 1)), 0.02);
  const auto power = [&](double shift) {
    int flagged = 0;
    for (int trial = 0; trial < 4000; ++trial) flagged += judge(shift).outside ? 1 : 0;
    return flagged / 4000.0;
  };
  const double at_detectable = power(detectable);
  EXPECT_GE(at_detectable, 0.85) << detectable;
  EXPECT_LE(at_detectable, 0.95) << detectable;
  EXPECT_LT(power(detectable / 2), 0.5);
}

// The least baseline runs: against an independent reference, the worst chance over q (a grid of
// 100000 points) that the current run falls in a state of probability q that none of K runs
// showed, q (1 - q)^K, must be at most the false-alarm rate at K and above it at K - 1.
TEST(Noise, MinBaselineRunsKeepsAnUnseenStateUnderTheFalseAlarmRate) {
  const auto worst = [](size_t k) {
    double most = 0;
    for (int i = 1; i < 100000; ++i) {
      const double q = i / 100000.0;
      most = std::max(most, q * std::pow(1 - q, static_cast<double>(k)));
    }
    return most;
  };
  for (const double rate : {0.2, 0.1, 0.05, 0.01}) {
    const size_t k = min_baseline_runs(rate);
    EXPECT_LE(worst(k), rate + 1e-9) << rate;
    EXPECT_GT(worst(k - 1), rate) << rate;
  }
  EXPECT_EQ(min_baseline_runs(0.05), 7u);  // README's figure
  EXPECT_EQ(min_baseline_runs(0.1), 4u);
}

}  // namespace
}  // namespace dts
