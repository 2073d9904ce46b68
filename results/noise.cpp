// The between-run noise model of `dtsuite compare` (noise.h), argued where it is applied.
#include "results/noise.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dts {

namespace {

// The continued fraction of I_x(a, b) (modified Lentz), converging for x < (a + 1) / (a + b + 2).
double beta_continued_fraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEpsilon = 1e-15;
  const auto guard = [](double v) { return std::fabs(v) < kTiny ? kTiny : v; };
  double c = 1, d = 1 / guard(1 - (a + b) * x / (a + 1)), h = d;
  for (int m = 1; m <= 500; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a - 1 + m2) * (a + m2));  // even step
    d = 1 / guard(1 + aa * d);
    c = guard(1 + aa / c);
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1 + m2));  // odd step
    d = 1 / guard(1 + aa * d);
    c = guard(1 + aa / c);
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < kEpsilon) break;
  }
  return h;
}

// Median of chi2(df) / df by Wilson and Hilferty's cube-root normal approximation: within 4% at
// df 1, 1.3% at df 2, 0.3% from df 5 on.
double chi2_median_over_df(double df) { return std::pow(1 - 2 / (9 * df), 3); }

}  // namespace

double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) +
                                b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_continued_fraction(a, b, x) / a;
  return 1 - front * beta_continued_fraction(b, a, 1 - x) / b;  // I_x(a, b) = 1 - I_{1-x}(b, a)
}

double student_t_cdf(double t, double df) {
  if (std::isnan(t) || !(df > 0)) return std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(t)) return t > 0 ? 1 : 0;
  // P(|T| > |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2).
  const double tail = 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t));
  return t > 0 ? 1 - tail : tail;
}

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1) || !(df > 0)) return std::numeric_limits<double>::quiet_NaN();
  if (p == 0.5) return 0;
  if (p < 0.5) return -student_t_quantile(1 - p, df);
  double lo = 0, hi = 1;
  while (student_t_cdf(hi, df) < p && hi < 1e300) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (student_t_cdf(mid, df) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

double median_of(std::vector<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double median_log_variance(double p05, double p95, long n) {
  if (!(p05 > 0) || !(p95 >= p05) || !std::isfinite(p95) || n < 2) return 0;
  const double sigma = (std::log(p95) - std::log(p05)) / 3.29;
  const double se = 1.2533 * sigma / std::sqrt(static_cast<double>(n));
  return se * se;
}

RowNoise row_noise(const std::vector<double>& baseline, const std::vector<double>& floors) {
  RowNoise noise;
  if (baseline.size() < 2) return noise;
  std::vector<double> logs;
  for (double v : baseline) logs.push_back(std::log(v));
  // Around the median, not the mean: one run far off weighs once, and the spread is never
  // smaller than around the mean (the mean minimizes it), so the test errs on the quiet side.
  const double center = median_of(logs);
  double sum = 0;
  for (double y : logs) sum += (y - center) * (y - center);
  noise.df = static_cast<double>(logs.size() - 1);
  noise.variance = sum / noise.df;
  double floor_sum = 0;
  for (double f : floors) floor_sum += f;
  noise.floor = floors.empty() ? 0 : floor_sum / static_cast<double>(floors.size());
  return noise;
}

NoisePrior pool_noise(const std::vector<RowNoise>& rows) {
  std::vector<double> scaled;
  double df = 0;
  for (const RowNoise& r : rows) {
    if (!(r.df > 0)) continue;
    scaled.push_back(r.variance / chi2_median_over_df(r.df));
    df += r.df;
  }
  NoisePrior prior;
  if (scaled.size() < 3) return prior;  // fewer than 3 like rows: no pool worth the name
  prior.variance = median_of(scaled);
  prior.df = std::min(df, kMaxPriorDf);
  return prior;
}

size_t min_baseline_runs(double false_alarm) {
  for (size_t k = 1; k < 100000; ++k) {
    const double kd = static_cast<double>(k);
    // K^K / (K+1)^(K+1), in logs.
    if (kd * std::log(kd) - (kd + 1) * std::log(kd + 1) <= std::log(false_alarm)) return k;
  }
  return 100000;
}

NoiseJudgement judge_between_runs(const std::vector<double>& baseline, const std::vector<double>& current,
                                  bool worse_is_up, const RowNoise& row, const NoisePrior& prior, double alpha) {
  NoiseJudgement j;
  std::vector<double> lb, lc;
  for (double v : baseline) lb.push_back(std::log(v));
  for (double v : current) lc.push_back(std::log(v));
  const double towards_worse = (median_of(lc) - median_of(lb)) * (worse_is_up ? 1 : -1);
  j.change = std::expm1(towards_worse);
  // Smyth's moderated variance: the row's own, from K - 1 degrees of freedom, and the pooled one
  // of like rows as if it were prior.df more; then at least what each run's own iterations leave
  // in its median (a few runs that happen to agree must not make the gate hair-triggered).
  const double weight = prior.df + row.df;
  double variance = weight > 0 ? (prior.df * prior.variance + row.df * row.variance) / weight : 0;
  variance = std::max(variance, row.floor);
  j.df = std::max(weight, 1.0);
  j.sd = std::sqrt(variance);
  const double se = j.sd * std::sqrt(1.0 / static_cast<double>(lb.size()) + 1.0 / static_cast<double>(lc.size()));
  const double critical = student_t_quantile(1 - alpha, j.df);
  j.limit = std::expm1(critical * se);
  j.detectable = std::expm1((critical + student_t_quantile(kDetectPower, j.df)) * se);
  if (se == 0) {
    j.t = towards_worse > 0 ? std::numeric_limits<double>::infinity() : 0;
    j.p = towards_worse > 0 ? 0 : 1;
  } else {
    j.t = towards_worse / se;
    j.p = student_t_cdf(-j.t, j.df);  // P(T >= t), without the cancellation of 1 - cdf
  }
  j.outside = j.p < alpha;
  return j;
}

}  // namespace dts
