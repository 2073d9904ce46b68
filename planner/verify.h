// The planner's rows: a plan's (`dtsuite plan --csv`), and the planner checking itself, layouts
// it predicted timed on the stack and set against the prediction (the `plan` suite,
// planner/plan_suite.cpp, times them; this is the arithmetic and the rows, without MPI).
#pragma once
#include <string>
#include <vector>

#include "planner/cost_model.h"
#include "results/catalog.h"
#include "results/record.h"

namespace dts::planner {

// The goals README states for a verification: median |plan_error| at most 10%, none above 20%,
// the measured fastest among the predicted top 3, Spearman's rank correlation at least 0.8.
inline constexpr double kMedianErrorGoal = 0.10, kMaxErrorGoal = 0.20, kRankCorrelationGoal = 0.8;
inline constexpr int kBestAmongTop = 3;

// `base` with one measurement: its metric, unit, value and detail (the plan's and the
// verification's rows share everything else).
Record row_of(const Record& base, const char* metric, const char* unit, double value, std::string detail);

// What a plan was made for and from, as its rows say it.
struct PlanContext {
  StackIdentity stack;
  ClusterShape cluster;
  ModelSpec model;
  int64_t batch = 0;
  std::string optimizer;  // "sgd", "adamw"
  std::string sources;    // the measurement files
};
// The rows of a plan (results/SCHEMA.md, *plan*), in its order: per layout plan_step_time,
// plan_compute_time, a plan_exposed_comm_time per group it communicates in, plan_bubble_time and
// plan_memory.
std::vector<Record> plan_records(const std::vector<LayoutPrediction>& plan, const PlanContext& context);

// One layout of a plan, timed.
struct VerifiedLayout {
  LayoutPrediction predicted;
  int plan_rank = 0;             // its place in the plan (1: predicted fastest)
  double measured = 0;           // seconds: the median step (the slowest rank's)
  std::vector<double> samples;   // each timed step
};

// Spearman's rank correlation of two series of one length: Pearson's r of their ranks (ties take
// their mean rank). NaN for fewer than two pairs, for series of different lengths, or when either
// series is constant (no order to compare).
double spearman(const std::vector<double>& a, const std::vector<double>& b);

struct VerificationSummary {
  double median_abs_error = 0, max_abs_error = 0;
  double rank_correlation = 0;  // NaN with fewer than 3 layouts: not judged
  int best_plan_rank = 0;       // the plan rank of the layout measured fastest
  int inside_noise = 0;         // layouts whose prediction lies within their steps' p05-p95
  bool held = false;            // every goal met (the correlation only where judged)
  std::string detail;           // each goal, met or missed, in words
};
// Error{invalid_argument} for no layouts or a measured time that is not finite and positive.
VerificationSummary summarize(const std::vector<VerifiedLayout>& verified);

// The rows of a verification (results/SCHEMA.md, *plan*): per layout plan_step_time (predicted),
// step_time (measured, with its spread and samples) and plan_error; then plan_error_median,
// plan_error_max, plan_rank_correlation, plan_best_rank and the `check` that judges the goals.
// `sources`: the measurement files, for the details; `case_labels`: the case's labels (config).
std::vector<Record> verification_records(const std::vector<VerifiedLayout>& verified, const std::string& sources,
                                         const Labels& case_labels);

// The plan suite's catalog: its metrics, and the report's section (measured against predicted,
// one point per layout, the diagonal where they agree).
std::vector<MetricInfo> verification_metrics();
SectionSpec verification_section();

}  // namespace dts::planner
