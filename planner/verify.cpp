// The planner's verification arithmetic and rows (verify.h).
#include "planner/verify.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace dts::planner {

namespace {

// Ranks 1..n of `values`, ties taking their mean rank.
std::vector<double> ranks_of(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double mean = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = mean;
    i = j + 1;
  }
  return ranks;
}

std::string ms(double seconds) { return format_number(seconds * 1e3, "%.4g") + " ms"; }

std::string layout_name(const VerifiedLayout& v) {
  return v.predicted.strategy + "/" + layout_text(v.predicted.strategy, v.predicted.layout);
}

double plan_error(const VerifiedLayout& v) { return v.measured / v.predicted.step_time - 1; }

}  // namespace

Record row_of(const Record& base, const char* metric, const char* unit, double value, std::string detail) {
  Record r = base;
  r.metric = metric;
  r.unit = unit;
  r.value = value;
  r.detail = std::move(detail);
  return r;
}

std::vector<Record> plan_records(const std::vector<LayoutPrediction>& plan, const PlanContext& context) {
  std::vector<Record> rows;
  const ClusterShape& cluster = context.cluster;
  for (size_t i = 0; i < plan.size(); ++i) {
    const LayoutPrediction& p = plan[i];
    Record base;
    base.suite = "plan";
    base.case_id = p.strategy + "/" + layout_text(p.strategy, p.layout);
    base.labels.backend = context.stack.backend;
    base.labels.backend_version = context.stack.backend_version;
    base.labels.mpi_version = context.stack.mpi_version;
    base.labels.mpi_config = context.stack.mpi_config;
    base.labels.device = context.stack.device;
    base.labels.world_size = cluster.ranks;
    base.labels.ranks_per_node = cluster.ranks_per_node;
    base.labels.nodes = cluster.ranks / cluster.ranks_per_node;
    base.labels.strategy = p.strategy;
    const ModelSpec& m = context.model;
    base.labels.config = p.layout.describe() + ";batch=" + std::to_string(context.batch) +
                         ";layers=" + std::to_string(m.layers) + ";width=" + std::to_string(m.width) +
                         ";input=" + std::to_string(m.input) + ";classes=" + std::to_string(m.classes) +
                         ";optimizer=" + context.optimizer + ";plan_rank=" + std::to_string(i + 1);
    base.verdict = Verdict::info;
    std::string detail = "predicted from " + context.sources;
    for (const std::string& e : p.extended) detail += "; not measured, " + e;
    for (const std::string& e : p.extrapolated) detail += "; extrapolated: " + e;
    rows.push_back(row_of(base, "plan_step_time", "seconds", p.step_time, detail));
    rows.push_back(row_of(base, "plan_compute_time", "seconds", p.compute,
                          "the slowest rank's compute (the slowest stage's)"));
    for (const auto& [group, seconds] : p.exposed) {
      Record r = row_of(base, "plan_exposed_comm_time", "seconds", seconds,
                        "communication of the " + group + " group not hidden by compute");
      r.labels.config += ";group=" + group;
      rows.push_back(r);
    }
    rows.push_back(row_of(base, "plan_bubble_time", "seconds", p.bubble, "the pipeline's (p-1) idle slots"));
    // A layout over the limit is the plan's answer, not the stack's failure: info either way.
    Record memory = row_of(base, "plan_memory", "bytes", p.memory,
                           std::string(p.over_memory ? "over --memory-per-rank: " : "") +
                               "parameters, gradients, optimizer state (the ZeRO model) and activations of the "
                               "fullest rank");
    memory.threshold = cluster.memory_per_rank > 0 ? cluster.memory_per_rank : NAN;
    rows.push_back(memory);
  }
  return rows;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (a.size() != b.size() || a.size() < 2) return nan;
  const std::vector<double> ra = ranks_of(a), rb = ranks_of(b);
  const double n = static_cast<double>(a.size()), mean = (n + 1) / 2;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (saa == 0 || sbb == 0) return nan;
  return sab / std::sqrt(saa * sbb);
}

VerificationSummary summarize(const std::vector<VerifiedLayout>& verified) {
  if (verified.empty()) throw Error(Error::Kind::invalid_argument, "summarize: no verified layouts");
  VerificationSummary s;
  std::vector<double> errors, predicted, measured;
  size_t fastest = 0;
  for (size_t i = 0; i < verified.size(); ++i) {
    const VerifiedLayout& v = verified[i];
    if (!(v.measured > 0) || !std::isfinite(v.measured) || !(v.predicted.step_time > 0)) {
      throw Error(Error::Kind::invalid_argument, "summarize: a step time that is not finite and positive");
    }
    errors.push_back(std::abs(plan_error(v)));
    predicted.push_back(v.predicted.step_time);
    measured.push_back(v.measured);
    if (v.measured < verified[fastest].measured) fastest = i;
    if (!v.samples.empty()) {
      const Stats st = compute_stats(v.samples);
      s.inside_noise += v.predicted.step_time >= st.p05 && v.predicted.step_time <= st.p95;
    }
  }
  const size_t n = errors.size();
  const Stats error_stats = compute_stats(errors);
  s.median_abs_error = error_stats.median;
  s.max_abs_error = error_stats.max;
  s.rank_correlation = n >= 3 ? spearman(predicted, measured) : std::numeric_limits<double>::quiet_NaN();
  s.best_plan_rank = verified[fastest].plan_rank;
  const bool median_ok = s.median_abs_error <= kMedianErrorGoal, max_ok = s.max_abs_error <= kMaxErrorGoal,
             best_ok = s.best_plan_rank <= kBestAmongTop;
  const bool judged_correlation = !std::isnan(s.rank_correlation);
  const bool correlation_ok = !judged_correlation || s.rank_correlation >= kRankCorrelationGoal;
  s.held = median_ok && max_ok && best_ok && correlation_ok;
  const auto goal = [](bool ok, const std::string& text) { return std::string(ok ? "met: " : "missed: ") + text; };
  s.detail = goal(median_ok, "median |plan_error| " + format_number(s.median_abs_error * 100, "%.3g") + "% <= 10%") +
             "; " + goal(max_ok, "largest " + format_number(s.max_abs_error * 100, "%.3g") + "% <= 20%") + "; " +
             goal(best_ok, "the measured fastest, " + layout_name(verified[fastest]) + ", was predicted #" +
                               std::to_string(s.best_plan_rank) + " (top 3 wanted)") +
             "; " +
             (judged_correlation ? goal(correlation_ok, "Spearman " + format_number(s.rank_correlation, "%.3g") + " >= 0.8")
                                 : std::string("Spearman not judged: fewer than 3 layouts")) +
             "; " + std::to_string(s.inside_noise) + " of " + std::to_string(n) +
             " predictions inside their measurement's p05-p95";
  return s;
}

std::vector<Record> verification_records(const std::vector<VerifiedLayout>& verified, const std::string& sources,
                                         const Labels& case_labels) {
  std::vector<Record> rows;
  for (const VerifiedLayout& v : verified) {
    Record base;
    base.suite = "plan";
    base.case_id = "verify/" + layout_name(v);
    base.labels.strategy = v.predicted.strategy;
    base.labels.config = v.predicted.layout.describe() + ";plan_rank=" + std::to_string(v.plan_rank) + ";" +
                         case_labels.config;
    base.verdict = Verdict::info;
    Record predicted = base;
    predicted.metric = "plan_step_time";
    predicted.unit = "seconds";
    predicted.value = v.predicted.step_time;
    predicted.detail = "predicted from " + sources + ": compute " + ms(v.predicted.compute) + ", bubble " +
                       ms(v.predicted.bubble);
    for (const auto& [group, seconds] : v.predicted.exposed) predicted.detail += ", " + group + " " + ms(seconds);
    rows.push_back(predicted);
    Record measured = base;
    measured.metric = "step_time";
    measured.unit = "seconds";
    measured.value = v.measured;
    measured.samples = v.samples;
    if (!v.samples.empty()) measured.stats = compute_stats(v.samples);
    measured.detail = "the slowest rank's median step, through the scaling suite's timing";
    rows.push_back(measured);
    Record error = base;
    error.metric = "plan_error";
    error.unit = "ratio";
    error.value = plan_error(v);
    const bool inside = !v.samples.empty() && v.predicted.step_time >= measured.stats.p05 &&
                        v.predicted.step_time <= measured.stats.p95;
    error.detail = "measured " + ms(v.measured) +
                   (v.samples.empty() ? "" : " (p05 " + ms(measured.stats.p05) + ", p95 " + ms(measured.stats.p95) + ")") +
                   " against " + ms(v.predicted.step_time) + " predicted: " + signed_percent(error.value) +
                   (inside ? ", inside the measurement's spread" : "");
    rows.push_back(error);
  }
  const VerificationSummary s = summarize(verified);
  Record base;
  base.suite = "plan";
  base.case_id = "verify";
  base.labels.config = case_labels.config;
  base.verdict = Verdict::info;
  const auto summary = [&](const char* metric, const char* unit, double value, const std::string& detail) {
    rows.push_back(row_of(base, metric, unit, value, detail));
  };
  summary("plan_error_median", "ratio", s.median_abs_error, "median |measured / predicted - 1| over the layouts verified");
  summary("plan_error_max", "ratio", s.max_abs_error, "largest |measured / predicted - 1|");
  summary("plan_rank_correlation", "ratio", s.rank_correlation,
          "Spearman's rank correlation of predicted and measured step times");
  summary("plan_best_rank", "", s.best_plan_rank, "the predicted place of the layout measured fastest");
  Record check = base;
  check.metric = "check";
  check.value = s.held ? 1 : 0;
  check.verdict = s.held ? Verdict::pass : Verdict::fail;
  check.detail = "the plan against the stack: " + s.detail;
  rows.push_back(check);
  return rows;
}

std::vector<MetricInfo> verification_metrics() {
  return {
      {"plan_step_time", "seconds", "a layout's step time as the planner predicted it"},
      {"step_time", "seconds", "a layout's step time measured on the stack (the slowest rank's median)"},
      {"plan_error", "ratio", "measured / predicted - 1 of one layout"},
      {"plan_error_median", "ratio", "median |plan_error| over the layouts verified"},
      {"plan_error_max", "ratio", "largest |plan_error| over the layouts verified"},
      {"plan_rank_correlation", "ratio", "Spearman's rank correlation of predicted and measured step times"},
      {"plan_best_rank", "", "the predicted place of the layout measured fastest"},
  };
}

SectionSpec verification_section() {
  PlotSpec scatter;
  scatter.metric = "step_time";
  scatter.x = PlotSpec::X::metric;
  scatter.x_metric = "plan_step_time";
  scatter.diagonal = true;
  scatter.series = {"strategy"};
  scatter.id = "plan-verify";
  scatter.title = "Step time: measured against predicted";
  scatter.x_label = "predicted (ms)";
  scatter.y_label = "measured (ms)";
  scatter.x_scale = 1e-3;
  scatter.y_scale = 1e-3;
  return {60, "plan", "The layout planner",
          "Each verified layout's measured step time against the planner's prediction (dtsuite plan --verify): on "
          "the dashed diagonal they agree; above it the layout ran slower than predicted.",
          "No verified layouts in these results (the plan suite did not run).",
          {scatter}};
}

}  // namespace dts::planner
