// Between-run noise: how far a run's value may move from the values of earlier runs of the same
// stack before `dtsuite compare` calls it a change. Values are judged in log space (relative
// change), each row's spread over the baseline runs moderated towards the spread of like rows
// (Smyth's moderated t, 2004: a few runs give a poor variance of their own), with a floor from
// the runs' own iteration noise, and a one-sided Student t test at the gate's false-alarm rate
// shared over the rows it judges (Bonferroni). Depends on nothing but the standard library.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace dts {

// Student's t distribution with `df` > 0 degrees of freedom: P(T <= t), and the t with
// P(T <= t) = p for 0 < p < 1. Through the regularized incomplete beta function (continued
// fraction, Lentz's method); accurate to ~1e-12 relative.
double student_t_cdf(double t, double df);
double student_t_quantile(double p, double df);

// The regularized incomplete beta function I_x(a, b), 0 <= x <= 1, a, b > 0.
double incomplete_beta(double a, double b, double x);

// A row's noise over the baseline runs, in natural-log units (0.05 ~ 5%).
struct RowNoise {
  double variance = 0;      // sample variance of the logs around their median (K - 1 in the divisor)
  double df = 0;            // K - 1
  double floor = 0;         // variance of a run's median from its own iterations (0: unknown)
};

// The prior a row's variance is moderated towards: the spread of the rows like it.
struct NoisePrior {
  double variance = 0;  // pooled: the median of the like rows' variances, corrected to a mean
  double df = 0;        // weight, in degrees of freedom (0: no prior)
};

// Pools `rows` (the variances of like rows, each with df > 0) into a prior. The median of the
// row variances, divided by the median of chi2(df)/df, estimates the common variance while one
// very noisy row cannot drag it; its weight is the rows' degrees of freedom, capped at
// kMaxPriorDf so that a row's own spread always counts.
NoisePrior pool_noise(const std::vector<RowNoise>& rows);
inline constexpr double kMaxPriorDf = 20;

struct NoiseJudgement {
  double change = 0;        // exp(median current log - median baseline log) - 1, signed towards worse
  double sd = 0;            // the moderated between-run standard deviation (log units)
  double df = 0;            // its degrees of freedom
  double t = 0;             // the change over its standard error, towards worse
  double p = 1;             // one-sided: P(T >= t) if nothing changed
  double limit = 0;         // the relative worsening the noise allows at `alpha` (0.12: +12%)
  // The smallest worsening flagged in kDetectPower of runs at `alpha`: (t_{1-alpha} + t_{power})
  // standard errors (the usual approximation of the noncentral t's power). What the row can see.
  double detectable = 0;
  bool outside = false;     // p < alpha
};

// The power `detectable` is stated at: a change of that size is flagged in 9 runs of 10.
inline constexpr double kDetectPower = 0.9;

// The least number of baseline runs for a timing verdict at the false-alarm rate `false_alarm`
// (0 < false_alarm < 1). A stack whose runs fall into discrete states (measured here: Open MPI's
// collectives 2-5x apart from run to run, whole runs 30-200% slower while the machine is busy
// elsewhere) fails the gate when the current run is in a state that none of the K baseline runs
// showed: no spread of theirs holds it. For one such state of probability q that chance is
// q (1 - q)^K, largest at q = 1 / (K + 1): K^K / (K + 1)^(K + 1), about 1 / (e (K + 1)). The least
// K that keeps it at or below `false_alarm`: 7 for 5%, 4 for 10%, 37 for 1%. (Several unseen
// states add up; continuous noise is the t test's to judge.)
size_t min_baseline_runs(double false_alarm);

// Judges the current runs' values against the baseline runs' (all > 0, finite; K >= 2 baseline
// values). `worse_is_up`: larger values are worse (times). `alpha`: the one-sided false-alarm
// rate of this row.
NoiseJudgement judge_between_runs(const std::vector<double>& baseline, const std::vector<double>& current,
                                  bool worse_is_up, const RowNoise& row, const NoisePrior& prior, double alpha);

// The row's own noise from its baseline values (K >= 2, all > 0) and per-run floors.
RowNoise row_noise(const std::vector<double>& baseline, const std::vector<double>& floors);

// The variance (log units) of a run's median from its own iterations: n samples whose p05..p95
// spans [p05, p95]; sigma ~ (ln p95 - ln p05) / 3.29 (the width of a normal's middle 90%) and the
// median's standard error 1.2533 sigma / sqrt(n). 0 when not computable.
double median_log_variance(double p05, double p95, long n);

double median_of(std::vector<double> values);

}  // namespace dts
