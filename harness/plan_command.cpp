// `dtsuite plan --measurements A.csv ... --ranks N`: reads the measurement CSVs (planner/
// measurements.h), predicts every layout of the model on the cluster (planner/cost_model.h), and
// prints them ranked by step time, those over the memory limit last; --csv writes plan_* rows. No
// MPI. What the files lack is one line naming it and the command that measures it, exit 2.
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <memory>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "harness/commands.h"
#include "harness/runner.h"
#include "planner/cost_model.h"
#include "planner/measurements.h"
#include "planner/verify.h"
#include "results/csv_reader.h"
#include "results/csv_sink.h"
#include "results/output_paths.h"
#include "strategies/strategy_spec.h"
#include "suites/memory_fit.h"

namespace dts {

namespace {

// The width whose MLP of `layers` layers has about `parameters` parameters: the positive root of
// (L-2) w^2 + (input + classes + L - 1) w + classes = P (weights and biases of input -> w -> ... ->
// classes), rounded, at least 1.
int width_for(int64_t parameters, int layers, int input, int classes) {
  if (layers < 2) throw UsageError("plan: --parameters needs --layers 2 or more (one layer has no hidden width)");
  const double a = layers - 2, b = input + classes + layers - 1, c = classes - static_cast<double>(parameters);
  const double w = a == 0 ? -c / b : (-b + std::sqrt(b * b - 4 * a * c)) / (2 * a);
  if (!(w >= 0.5) || w > (1 << 20)) {
    throw UsageError("plan: no width of 1 to 1048576 gives " + std::to_string(parameters) + " parameters in " +
                     std::to_string(layers) + " layers");
  }
  return static_cast<int>(std::lround(w));
}


double exposed(const planner::LayoutPrediction& p, const char* group) {
  const auto it = p.exposed.find(group);
  return it == p.exposed.end() ? 0 : it->second;
}

}  // namespace

int run_plan(const PlanOptions& options) {
  // One process: under mpirun every rank would print and write the same plan. Refused, said once
  // (by the job's first rank).
  for (const auto& [size, rank] : {std::pair{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}, {"PMI_SIZE", "PMI_RANK"}}) {
    const char* value = std::getenv(size);
    if (value == nullptr || std::atoi(value) <= 1) continue;
    const char* me = std::getenv(rank);
    if (me == nullptr || std::atoi(me) == 0) {
      std::fprintf(stderr, "dtsuite: error: plan runs in one process; under mpirun it needs --verify K (the layouts "
                           "timed on the stack)\n");
    }
    return kExitUsage;
  }
  try {
    planner::refuse_repeated_files(options.measurements, "--measurements");
    std::vector<NamedPath> inputs;
    for (const std::string& path : options.measurements) inputs.push_back({"--measurements", path});
    check_outputs(inputs, {{"--csv", options.csv_path}});
    ModelSpec spec;
    spec.layers = options.layers;
    spec.input = options.input;
    spec.classes = options.classes;
    spec.width = options.parameters > 0 ? width_for(options.parameters, options.layers, options.input, options.classes)
                                        : options.width;
    planner::ClusterShape cluster{options.ranks, options.ranks_per_node, 0, options.extend};
    if (!options.memory_per_rank.empty()) {
      cluster.memory_per_rank = static_cast<double>(parse_size(options.memory_per_rank));
      if (cluster.memory_per_rank <= 0) throw UsageError("plan: --memory-per-rank must be positive (e.g. 16G)");
    }
    std::vector<std::string> strategies;
    if (options.strategies == "all") {
      strategies = planner::planned_strategies();
    } else {
      for (const StrategySpec& s : parse_strategy_list(options.strategies)) strategies.push_back(s.text);
    }
    TrainConfig train;
    train.optimizer = options.optimizer == "adamw" ? OptimizerKind::adamw : OptimizerKind::sgd;

    planner::Measurements measurements;
    for (const std::string& path : options.measurements) {
      measurements.add(read_results_csv(path, csv_read_options(options.timeout_seconds)), path);
    }
    if (measurements.empty()) {
      throw Error(Error::Kind::invalid_argument,
                  measurements.sources() + " hold no measurement the planner reads (collectives time, topology "
                                           "p2p, one rank's scaling step_time rows)");
    }
    const planner::Plan planned = planner::plan_layouts(spec, options.batch, cluster, strategies, measurements, train);
    const std::vector<planner::LayoutPrediction>& plan = planned.layouts;
    if (plan.empty()) {
      throw Error(Error::Kind::invalid_argument, "no layout of " + options.strategies + " on " +
                                                     std::to_string(options.ranks) + " ranks for a batch of " +
                                                     std::to_string(options.batch) + " rows" +
                                                     (planned.without_layout.empty() ? "" : ": " + planned.without_layout.front()));
    }

    std::printf("# dtsuite plan: %s on %d ranks (%d per node), global batch %lld, from %s\n",
                describe_model(spec).c_str(), options.ranks, options.ranks_per_node,
                static_cast<long long>(options.batch), measurements.sources().c_str());
    std::printf("# stack: %s; memory per rank: %s\n", measurements.stack().text().c_str(),
                cluster.memory_per_rank > 0 ? format_bytes(cluster.memory_per_rank).c_str() : "no limit");
    // p2p: a parameter server's pushes and replies, or gossip's exchange with its neighbours.
    std::printf("# %4s  %-9s %-28s %10s %10s %9s %9s %9s %9s %9s %9s %10s  %s\n", "rank", "strategy", "layout", "step ms",
                "compute", "dp ms", "tp ms", "pp ms", "p2p ms", "bubble", "loss ms", "memory", "note");
    const size_t shown = options.top > 0 ? std::min(plan.size(), static_cast<size_t>(options.top)) : plan.size();
    for (size_t i = 0; i < shown; ++i) {
      const planner::LayoutPrediction& p = plan[i];
      std::string note = p.over_memory ? "over the memory limit" : "";
      if (!p.extrapolated.empty()) note += std::string(note.empty() ? "" : "; ") + "extrapolated: " + p.extrapolated.front() +
                                           (p.extrapolated.size() > 1 ? " (+" + std::to_string(p.extrapolated.size() - 1) + " more)" : "");
      std::printf("  %4zu  %-9s %-28s %10.4g %10.4g %9.3g %9.3g %9.3g %9.3g %9.3g %9.3g %10s  %s\n", i + 1,
                  p.strategy.c_str(), planner::layout_text(p.strategy, p.layout).c_str(), p.step_time * 1e3, p.compute * 1e3,
                  exposed(p, "dp") * 1e3, exposed(p, "tp") * 1e3, exposed(p, "pp") * 1e3,
                  (exposed(p, "ps") + exposed(p, "ring")) * 1e3, p.bubble * 1e3,
                  exposed(p, "world") * 1e3, format_bytes(p.memory).c_str(), note.c_str());
    }
    if (shown < plan.size()) std::printf("# %zu more layouts (--top 0 prints every one)\n", plan.size() - shown);
    for (const std::string& none : planned.without_layout) std::printf("# no layout: %s\n", none.c_str());
    std::set<std::string> extended;
    for (const planner::LayoutPrediction& p : plan) extended.insert(p.extended.begin(), p.extended.end());
    for (const std::string& e : extended) std::printf("# not measured, %s\n", e.c_str());

    if (!options.csv_path.empty()) {
      CsvSink csv(options.csv_path);
      const std::string run_id = new_run_id(), timestamp = utc_timestamp();
      const planner::PlanContext context{measurements.stack(), cluster, spec, options.batch, options.optimizer,
                                         measurements.sources()};
      for (Record& r : planner::plan_records(plan, context)) {
        r.run_id = run_id;
        r.timestamp = timestamp;
        csv.write(r);
      }
      csv.close();
      std::printf("# %zu layouts written to %s\n", plan.size(), options.csv_path.c_str());
    }
    return kExitPass;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtsuite: error: %s\n", e.what());
    return exit_code_of(e);
  }
}

}  // namespace dts
