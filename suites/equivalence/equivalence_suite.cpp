// The equivalence suite: does training on this stack give the model one process would? Each
// strategy runs S steps at every layout of every world size 1..N (sub-worlds split from the job;
// layouts from strategies/strategy_spec.h) in f32, f64 and bf16 compute with f32 master weights,
// with SGD and AdamW, and its full parameters are compared with the single-process reference in
// the same precision: every parameter must be within its own bound (tolerance.h), reported as
// max_abs_error and error_bound_ratio, with max_rel_error and max_ulp beside them. Also checked:
// a second run with the same config gives the same bits (reproducible), state that ranks must
// hold alike is alike (replica digests), a layout that sums nothing in another order matches the
// same-order one-process run bit for bit (bit_exact), traffic matches the strategy's own theory,
// and a pipeline holds no more micro-batches than its schedule allows. Step time, communication,
// bytes, memory and the pipeline bubble are reported per case.
// -d narrows the precisions to those of them it names (precisions_of).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "comm/text.h"
#include "core/error.h"
#include "strategies/pipeline/schedule.h"
#include "strategies/single/single_trainer.h"
#include "strategies/strategy.h"
#include "strategies/strategy_spec.h"
#include "strategies/tensor/parallel_mlp.h"
#include "suites/collectives/check.h"
#include "suites/collectives/datatype_flag.h"
#include "suites/equivalence/tolerance.h"
#include "suites/memory_fit.h"
#include "suites/suite.h"
#include "suites/training_flags.h"

namespace dts {

namespace {

struct EquivalenceCase {
  StrategySpec spec;
  ParallelConfig layout;  // train filled at run time
  Precision precision;
  OptimizerKind optimizer;
};

// Optimizer settings of the equivalence runs: steps large enough that a wrong gradient shows,
// small enough that training stays stable for the default model.
constexpr double kLearningRate = 0.05, kMomentum = 0.9;  // SGD
constexpr double kAdamWLearningRate = 0.01;              // AdamW (PyTorch's betas, eps, weight decay)

TrainConfig train_config(OptimizerKind optimizer) {
  TrainConfig train;
  train.optimizer = optimizer;
  train.sgd.lr = kLearningRate;
  train.sgd.momentum = kMomentum;
  train.adamw.lr = kAdamWLearningRate;
  return train;
}

const char* optimizer_name(OptimizerKind optimizer) { return optimizer == OptimizerKind::sgd ? "sgd" : "adamw"; }

// "layer1.weight[17]": where element i of the reference layout lives.
std::string element_name(const ModelSpec& spec, int64_t i) {
  for (const ParameterInfo& p : parameter_layout(spec)) {
    if (i >= p.offset && i < p.offset + p.size()) return p.name + "[" + std::to_string(i - p.offset) + "]";
  }
  return "element " + std::to_string(i);
}

std::string config_of(const EquivalenceCase& c, const RunOptions& common, const TrainingFlags& o) {
  return c.layout.describe() + ";job=" + std::to_string(common.world_size) + ";steps=" + std::to_string(o.steps) +
         ";batch=" + std::to_string(o.batch) + ";optimizer=" + optimizer_name(c.optimizer);
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

Stats stats_of(const std::vector<StepReport>& reports, double StepReport::*field) {
  std::vector<double> values;
  for (const auto& r : reports) values.push_back(r.*field);
  return compute_stats(values);
}

// What one rank saw of the step traffic, gathered to rank 0 over the control communicator.
struct TrafficSeen {
  double measured = 0, theory = 0, slack = 0, opaque = 0, modelled = 0;
  double received = 0, received_theory = 0;  // the same per step at the stack's receives
};

// Bytes per step per rank, measured where the stack's traffic is visible (an algorithm over
// point-to-point sends, such as ring(mpi), where every byte passes the leaf backend's counter),
// and checked on every rank against the strategy's own theory (Strategy::expected_traffic: per
// group, with the slack it derives) plus the step's one-element loss all_reduce (at most 2 x 8
// bytes). Where the library's collectives are opaque, the strategy's ring-model figure is
// reported instead, as info. The row carries rank 0's numbers; a failure names the worst rank.
// `received`: the bytes_received row (what arrived at the stack's receives) instead of bytes_sent.
template <class Emit>
void emit_traffic(const std::vector<TrafficSeen>& ranks, int world, const std::string& formula, bool received,
                  const Emit& emit) {
  const char* metric = received ? "bytes_received" : "bytes_sent";
  const auto measured = [&](const TrafficSeen& t) { return received ? t.received : t.measured; };
  const auto theory = [&](const TrafficSeen& t) { return received ? t.received_theory : t.theory; };
  bool opaque = false;
  int worst = 0;
  double worst_excess = -INFINITY;
  for (int r = 0; r < world; ++r) {
    const TrafficSeen& t = ranks[static_cast<size_t>(r)];
    opaque = opaque || t.opaque > 0;
    const double excess = std::fabs(measured(t) - theory(t)) - t.slack;
    if (excess > worst_excess) worst_excess = excess, worst = r;
  }
  const TrafficSeen& mine = ranks[0];
  if (opaque) {
    emit(metric, "bytes", received ? mine.received_theory : mine.modelled, Verdict::info, theory(mine),
         std::string(received ? "theory" : "ring model") +
             " per step (the stack's collectives are opaque to dtsuite; run over ring(...) to measure); theory " + formula);
    return;
  }
  const TrafficSeen& w = ranks[static_cast<size_t>(worst)];
  char detail[600];
  std::snprintf(detail, sizeof(detail),
                "measured at the stack's %s; rank 0 theory %.0f +- %.0f (%s); worst rank %d: %.0f vs %.0f +- %.0f",
                received ? "receives" : "sends", theory(mine), mine.slack, formula.c_str(), worst, measured(w),
                theory(w), w.slack);
  emit(metric, "bytes", measured(mine), worst_excess <= 0 ? Verdict::pass : Verdict::fail, theory(mine), detail);
}

// The load of each rank of the layout, bytes sent plus received per step (measured; the theory's
// where the stack's collectives are opaque): the row's value is the busiest rank's, its stats
// over the ranks. A central server's grows with the workers W; a ring's or gossip's does not.
template <class Emit>
void emit_rank_load(const std::vector<TrafficSeen>& ranks, int world, const std::string& roles, const Emit& emit) {
  bool opaque = false;
  for (int r = 0; r < world; ++r) opaque = opaque || ranks[static_cast<size_t>(r)].opaque > 0;
  std::vector<double> loads;
  int busiest = 0;
  std::string each;
  for (int r = 0; r < world; ++r) {
    const TrafficSeen& t = ranks[static_cast<size_t>(r)];
    loads.push_back(opaque ? t.theory + t.received_theory : t.measured + t.received);
    if (loads.back() > loads[static_cast<size_t>(busiest)]) busiest = r;
    if (r < 16) each += (each.empty() ? "" : ", ") + format_number(loads.back(), "%.0f");
  }
  if (world > 16) each += ", ...";
  const std::string detail = std::string(opaque ? "theory (collectives opaque)" : "measured") +
                             ", bytes sent + received per step; busiest rank " + std::to_string(busiest) + " of " +
                             std::to_string(world) + roles + "; by rank: " + each;
  emit("rank_load", "bytes", loads[static_cast<size_t>(busiest)], Verdict::info, NAN, detail, compute_stats(loads));
}

// The control communicator's view of a per-rank record: every rank of the job contributes `mine`
// (zeros off the case's sub-world); rank 0 gets all of them in rank order.
template <class Value>
std::vector<Value> gather_to_all(Communicator& control, const Value& mine) {
  static_assert(sizeof(Value) % sizeof(double) == 0);
  std::vector<Value> all(static_cast<size_t>(control.size()));
  control.all_gather(&mine, all.data(), sizeof(Value) / sizeof(double), DType::f64);
  return all;
}

// The precisions the suite trains in: f32, f64 and bf16, or those -d names (in its order). A -d
// that names none of them is refused, and so is a dtype that no suite of the run takes (the
// collectives suite takes every one): nothing asked for is dropped in silence.
std::vector<Precision> precisions_of(const RunOptions& common) {
  const std::optional<std::vector<DType>>& requested = common.flags<DatatypeSelection>().requested;
  if (!requested) return {Precision::f32, Precision::f64, Precision::bf16};
  std::vector<Precision> precisions;
  std::string others;
  for (DType d : *requested) {
    if (d == DType::f32) precisions.push_back(Precision::f32);
    else if (d == DType::f64) precisions.push_back(Precision::f64);
    else if (d == DType::bf16) precisions.push_back(Precision::bf16);
    else others += (others.empty() ? "" : ",") + std::string(name(d));
  }
  if (precisions.empty()) {
    throw Error(Error::Kind::invalid_argument,
                "-d " + others + " names no precision the equivalence suite trains in (f32, f64, bf16)");
  }
  const bool collectives = std::find(common.suites.begin(), common.suites.end(), "collectives") != common.suites.end();
  if (!others.empty() && !collectives) {
    throw Error(Error::Kind::invalid_argument, "-d names " + others +
                                                   ", which no suite of this run takes (equivalence trains in f32, "
                                                   "f64, bf16; the collectives suite takes every dtype)");
  }
  return precisions;
}

// A strategy's replay audit (Strategy::audit): the replay must reach its parameters bit for bit;
// the staleness of what it applied; ps-ssp's lead within its bound; ps-backup's drops, b per update.
template <class Emit>
void emit_audit(const ReplayAudit& audit, const ParallelConfig& config, const Emit& emit) {
  char detail[300];
  emit("replay_audit", "", audit.problem.empty() ? 1 : 0, audit.problem.empty() ? Verdict::pass : Verdict::fail, NAN,
       audit.problem.empty() ? audit.replayed + ": bit for bit" : audit.problem);
  if (!audit.staleness.empty()) {
    const Stats s = compute_stats(audit.staleness);
    const double mean = std::accumulate(audit.staleness.begin(), audit.staleness.end(), 0.0) /
                        static_cast<double>(audit.staleness.size());
    std::snprintf(detail, sizeof(detail),
                  "updates applied between a gradient's version and its use, over %lld applied gradients (every "
                  "server's): mean %.3g, p95 %.3g, max %.3g",
                  static_cast<long long>(s.n), mean, s.p95, s.max);
    emit("staleness", "updates", s.median, Verdict::info, NAN, detail, s);
  }
  if (config.staleness > 0 || !audit.lead.empty()) {
    const double most = audit.lead.empty() ? 0 : *std::max_element(audit.lead.begin(), audit.lead.end());
    emit("ssp_lead", "steps", most, most <= config.staleness ? Verdict::pass : Verdict::fail, config.staleness,
         "most steps a worker was ahead of the slowest when its server let it go on (bound: staleness=" +
             std::to_string(config.staleness) + ")");
  }
  if (!audit.spread.empty()) {
    const Stats s = compute_stats(audit.spread);
    emit("consensus_spread", "", audit.spread.back(), Verdict::info, NAN,
         "largest spread of a parameter across the ranks (max - min) after the last step; the distribution over "
         "the steps in n .. max (" + std::to_string(audit.spread.size()) + " steps, replayed)",
         s);
  }
  if (config.backup > 0) {
    int off = 0;
    for (double d : audit.dropped_per_update) off += d != config.backup;
    emit("dropped_per_update", "gradients",
         audit.dropped_per_update.empty() ? 0 : audit.dropped_per_update.front(), off == 0 ? Verdict::pass : Verdict::fail,
         config.backup,
         off == 0 ? "every update dropped exactly backup=" + std::to_string(config.backup) + " late gradients"
                  : std::to_string(off) + " updates dropped another count than backup=" + std::to_string(config.backup));
  }
}

class EquivalenceSuite final : public Suite {
 public:
  std::string_view name() const override { return "equivalence"; }
  std::vector<Case> plan(const RunOptions& common) const override {
    const TrainingFlags& o = common.flags<TrainingFlags>();
    std::vector<StrategySpec> specs;
    if (o.strategies.empty()) {
      for (const auto& name : registered_strategies()) specs.push_back(parse_strategy_spec(name));
    } else {
      for (const auto& text : o.strategies) specs.push_back(parse_strategy_spec(text));
    }
    const LayoutDefaults defaults{o.accumulation, o.microbatches, o.layers, o.width};
    // Before anything is allocated: a model the ranks cannot hold is a set-up error. Rank 0 keeps
    // four full f64 copies of the parameters (the run's twice, the reference's and its bound) and
    // the reference trains in f32 (weights and gradients): 40 bytes a parameter at least; the
    // one-rank layouts hold the whole batch and its activations.
    const ModelSpec model = o.model(common);
    check_fits("equivalence: " + describe_model(model) + " on batches of " + std::to_string(o.batch) + " rows",
               training_bytes_at_least(model, o.batch, 40),
               "40 bytes a parameter: four f64 copies to compare and the reference's f32 weights and gradients, "
               "plus the batch",
               common.memory_per_rank());
    const std::vector<Precision> precisions = precisions_of(common);
    std::vector<Case> cases;
    for (const auto& spec : specs) {
      size_t layouts = 0;
      for (OptimizerKind optimizer : o.optimizers) {
        for (int w = 1; w <= common.world_size; ++w) {
          for (const ParallelConfig& layout : layouts_of(spec, w, defaults)) {
            ++layouts;
            // Refused here, on every rank at set-up (exit 2), not by the members of one case; under
            // "all", a layout the batch cannot fill is left out like one the ranks cannot hold.
            if (o.batch < static_cast<int64_t>(layout.dp) * layout.microbatches) {
              if (o.strategies.empty()) {
                --layouts;
                continue;
              }
              throw Error(Error::Kind::invalid_argument,
                          spec.name + " " + layout.describe() + ": a global batch of " + std::to_string(o.batch) +
                              " rows leaves some of its dp x mb = " + std::to_string(layout.dp * layout.microbatches) +
                              " micro-batches without a row (raise --batch, or lower --microbatches/--accumulation)");
            }
            for (Precision p : precisions) {
              EquivalenceCase c{spec, layout, p, optimizer};
              // Job rank R is rank R of the layout (ranks 0..world-1): the config column says so.
              c.layout.straggler_rank = o.straggler_rank;
              c.layout.straggler_factor = o.straggler_factor;
              Labels labels;
              labels.strategy = spec.name;
              labels.dtype = precision_model(p).name;
              labels.config = config_of(c, common, o);
              cases.push_back({spec.name + "/" + labels.dtype + "/" + optimizer_name(optimizer) + "/" +
                                   layout_id(spec, layout),
                               labels, c});
            }
          }
        }
      }
      // Asked for by name, a strategy with no layout here is a usage error; "all" skips it.
      o.require_layout(spec, layouts, "1.." + std::to_string(common.world_size) + " ranks", common.world_size, defaults);
    }
    o.check_straggler(common.world_size, "the job's");
    return cases;
  }

  void run(const Case& the_case, RunContext& ctx) override {
    const auto& c = std::any_cast<const EquivalenceCase&>(the_case.params);
    const TrainingFlags& o = ctx.options().flags<TrainingFlags>();
    Communicator& comm = ctx.comm();
    Communicator& control = ctx.control();
    const int rank = control.rank();
    const ModelSpec spec = o.model(ctx.options());
    ParallelConfig config = c.layout;
    config.train = train_config(c.optimizer);
    const int world = config.world();
    const bool member = rank < world;
    // What the strategy refuses from its name, layout, memory and precision alone is refused
    // before any communicator is made (every rank decides alike): a SKIP over nccl costs no
    // ncclCommSplit.
    check_strategy(c.spec.name, config, comm.memory(), c.precision);
    // Every rank takes part in the split; ranks outside the sub-world only help verify.
    std::unique_ptr<Communicator> group = comm.split(member ? 0 : 1, rank);
    // The members' own untampered communicator: they agree on building the strategy over it, so
    // a rank that fails alone there cannot leave the others waiting in its first collective.
    std::unique_ptr<Communicator> members = control.split(member ? 0 : 1, rank);
    const RunContext::Participants who = ctx.participants(member);

    std::vector<double> params, again, same_order;
    std::vector<StepReport> reports;
    RunContext::Traffic traffic;  // this rank's traffic during the first run's steps
    MemoryReport memory;
    std::vector<ReplicaDigest> digests;
    std::vector<TrafficTheory> theory;
    int bit_exact_microbatches = 0;
    bool order_dependent = false, same_model = true;
    std::optional<ReplayAudit> audit;  // rank 0: the strategy's own log replayed (parameter servers)
    // A member that throws (a layout the strategy refuses) must not leave the other ranks waiting
    // in the gathers below: every rank learns of it through `control`, then all leave together.
    std::exception_ptr failure;
    if (member) try {
      ProcessGroups groups = ProcessGroups::split(*group, config);
      const auto train = [&](bool keep) {
        std::unique_ptr<Strategy> strategy;
        std::exception_ptr not_built;
        try {
          strategy = make_strategy(c.spec.name, spec, config, groups, c.precision);
        } catch (...) {
          not_built = std::current_exception();
        }
        leave_together(*members, not_built);
        // Traffic of the steps alone: gathering the parameters afterwards is the suite's, not the step's.
        const RunContext::Traffic before = ctx.traffic();
        for (int s = 0; s < o.steps; ++s) {
          const StepReport r = strategy->step(make_batch(spec, static_cast<int64_t>(s) * o.batch, o.batch));
          if (keep) reports.push_back(r);
        }
        const RunContext::Traffic after = ctx.traffic();
        if (keep) {
          traffic = {after.bytes_sent - before.bytes_sent, after.opaque_collectives - before.opaque_collectives,
                     after.bytes_received - before.bytes_received};
          memory = strategy->memory();
          digests = strategy->replica_digests();
          theory = strategy->expected_traffic();
          bit_exact_microbatches = strategy->same_order_microbatches();
          order_dependent = strategy->order_dependent();
          same_model = strategy->same_model_as_one_process();
          audit = strategy->audit();
        }
        return strategy->full_parameters();
      };
      params = train(true);
      again = train(false);
    } catch (...) {
      failure = std::current_exception();
    }
    // A failure during the steps on some members only is the watchdog's to report (they wait in
    // a collective of the stack); everything that fails alike on the members is agreed here.
    leave_together(control, failure);

    // Replicas and reproducibility, judged on every member: ranks that report the same digest key
    // must report the same digest.
    const ReplicaComparison replica_check = compare_replicas(control, digests);
    const int irreproducible = member && !same_bits(params, again) ? 1 : 0;
    int any_irreproducible = 0;
    control.all_reduce(&irreproducible, &any_irreproducible, 1, DType::i32, ReduceOp::max);

    // Per rank: traffic against the strategy's theory, and pipeline figures.
    double theory_bytes = 0, theory_received = 0, theory_slack = 16;  // 16: the loss all_reduce of one f64
    std::string formula, received_formula;
    for (const TrafficTheory& t : theory) {
      theory_bytes += t.bytes;
      theory_received += t.received.value_or(t.bytes);
      theory_slack += t.slack;
      formula += (formula.empty() ? "" : " + ") + t.group + ": " + t.formula;
      received_formula += (received_formula.empty() ? "" : " + ") + t.group + ": " +
                          (t.received ? t.received_formula : "as sent (" + t.formula + ")");
    }
    if (formula.empty()) formula = received_formula = "no training traffic on one rank";
    const TrafficSeen seen{member ? static_cast<double>(traffic.bytes_sent) / o.steps : 0,
                           theory_bytes,
                           theory_slack,
                           static_cast<double>(traffic.opaque_collectives),
                           reports.empty() ? 0.0 : static_cast<double>(reports.back().bytes_sent),
                           member ? static_cast<double>(traffic.bytes_received) / o.steps : 0,
                           theory_received};
    const std::vector<TrafficSeen> all_traffic = gather_to_all(control, seen);
    struct PipelineSeen {
      double stage = -1, in_flight = 0, in_flight_theory = 0, activation_bytes = 0, per_microbatch = 0;
      double steps = 0, bubble_min = 0, bubble_p05 = 0, bubble_median = 0, bubble_p95 = 0, bubble_max = 0;
    } pipeline_mine;
    if (member && config.pp > 1) {
      std::vector<double> bubbles;
      for (const StepReport& r : reports) bubbles.push_back(r.pipeline_time > 0 ? r.idle_time / r.pipeline_time : 0);
      const int stage = rank / (config.dp * config.tp);
      const Stats b = compute_stats(bubbles);
      pipeline_mine = {static_cast<double>(stage),
                       static_cast<double>(memory.microbatches_in_flight_peak),
                       static_cast<double>(microbatches_in_flight_theory(config.schedule, config.pp, stage,
                                                                         config.microbatches)),
                       static_cast<double>(memory.activations_peak),
                       static_cast<double>(memory.activation_bytes_per_microbatch),
                       static_cast<double>(b.n), b.min, b.p05, b.median, b.p95, b.max};
    }
    const std::vector<PipelineSeen> all_pipeline = gather_to_all(control, pipeline_mine);
    // Per rank: the part of each step it did not compute (step_time - compute_time: waiting on
    // the others, exposed communication), and its own step time.
    struct IdleSeen {
      double n = 0, min = 0, p05 = 0, median = 0, p95 = 0, max = 0, mean = 0, step_median = 0, compute_median = 0;
    } idle_mine;
    if (member && !reports.empty()) {
      std::vector<double> idle;
      double sum = 0;
      for (const StepReport& r : reports) {
        idle.push_back(std::max(0.0, r.step_time - r.compute_time));
        sum += idle.back();
      }
      const Stats s = compute_stats(idle);
      idle_mine = {static_cast<double>(s.n), s.min, s.p05, s.median, s.p95, s.max,
                   sum / static_cast<double>(idle.size()), stats_of(reports, &StepReport::step_time).median,
                   stats_of(reports, &StepReport::compute_time).median};
    }
    const std::vector<IdleSeen> all_idle = gather_to_all(control, idle_mine);
    if (rank != 0) return;

    const bool f64 = c.precision == Precision::f64;
    const auto count = static_cast<size_t>(parameter_count(spec));
    const ReferenceWithBound reference =
        reference_with_bound(spec, config.train, c.precision, o.steps, o.batch,
                             tensor_parallel_reordered_terms(spec, config.tp) +
                                 (comm.memory() == Memory::device ? device_kernel_terms(spec) : 0));
    const std::vector<double>& want = reference.parameters;
    double max_rel = 0, max_ulp = 0;
    for (size_t i = 0; i < count; ++i) {
      const double diff = std::fabs(params[i] - want[i]);
      if (want[i] != 0) max_rel = std::max(max_rel, diff / std::fabs(want[i]));
      // ulps of the master weights (f32 for bf16 compute)
      max_ulp = std::max(max_ulp, diff / ulp_of(f64 ? DType::f64 : DType::f32, want[i]));
    }
    const BoundCheck bound = check_against_bound(params, want, reference.bound);
    const double largest_bound = *std::max_element(reference.bound.begin(), reference.bound.end());
    std::string where = "every parameter within its bound";
    if (bound.worst >= 0) {
      char text[200];
      std::snprintf(text, sizeof(text), "%lld of %zu parameters past their bound; largest error/bound %.3g at %s",
                    static_cast<long long>(bound.violations), count, bound.max_ratio,
                    element_name(spec, bound.worst).c_str());
      where = text;
    }
    // A layout whose result depends on arrival order is held to its replay audit instead (below).
    const Verdict within = !same_model ? Verdict::info : bound.violations == 0 ? Verdict::pass : Verdict::fail;
    if (order_dependent) {
      where = "order-dependent updates: judged by the replay audit, not the reference; " + where;
    } else if (!same_model) {
      where = "another model than one process's by design: judged by the replay audit; " + where;
    }

    Record base;
    base.suite = "equivalence";
    base.case_id = the_case.id;
    base.labels = the_case.labels;
    base.labels.world_size = who.world_size;
    base.labels.nodes = who.nodes;
    base.labels.ranks_per_node = who.ranks_per_node;
    const auto emit = [&](const char* metric, const char* unit, double value, Verdict verdict, double threshold,
                          std::string detail, Stats stats = {}, const std::string& config_suffix = "") {
      Record r = base;
      r.metric = metric;
      r.unit = unit;
      r.value = value;
      r.verdict = verdict;
      r.threshold = threshold;
      r.detail = std::move(detail);
      r.stats = stats;
      r.labels.config += config_suffix;
      ctx.emit(std::move(r));
    };
    emit("max_abs_error", "", bound.max_abs_error, within, largest_bound, where + "; " + reference.description);
    emit("error_bound_ratio", "ratio", bound.max_ratio, within, 1.0,
         "largest |strategy - reference| / bound over the parameters");
    emit("max_rel_error", "ratio", max_rel, Verdict::info, NAN, "");
    emit("max_ulp", "ulp", max_ulp, Verdict::info, NAN, "");
    emit("reproducible", "", any_irreproducible ? 0 : 1,
         order_dependent ? Verdict::info : any_irreproducible ? Verdict::fail : Verdict::pass, NAN,
         order_dependent ? "a second run with the same config; its updates depend on arrival order, so its bits may differ"
                         : "a second run with the same config gives identical bits on every rank");
    if (audit && audit->ran) emit_audit(*audit, config, emit);

    std::string replicas = "replicas identical: " + std::to_string(replica_check.compared) +
                           " replicated states compared by digest (dp replicas: parameters, and without ZeRO "
                           "gradients and optimizer state; tensors replicated across tp; both ends of each "
                           "pipeline link)";
    const int mismatches = replica_check.mismatches;
    if (mismatches > 0) replicas = std::to_string(mismatches) + " replicated states differ; first: " + replica_check.first;
    emit("check", "", mismatches ? 0 : 1, mismatches ? Verdict::fail : Verdict::pass, NAN, replicas);

    if (bit_exact_microbatches > 0) {
      // Nothing is summed in another order: the same-order one-process run must match bit for bit.
      std::vector<double> exact = same_order_run(spec, config.train, c.precision, o.steps, o.batch, bit_exact_microbatches);
      std::vector<double> got = params;
      for (const StepReport& r : reports) got.push_back(r.loss);
      size_t differing = 0;
      for (size_t i = 0; i < exact.size() && i < got.size(); ++i) {
        differing += std::memcmp(&exact[i], &got[i], sizeof(double)) != 0;
      }
      if (exact.size() != got.size()) differing = exact.size();
      emit("bit_exact", "", differing ? 0 : 1, differing ? Verdict::fail : Verdict::pass, NAN,
           std::to_string(differing) + " of " + std::to_string(exact.size()) +
               " values (parameters, then each step's loss) differ from one process accumulating over " +
               std::to_string(bit_exact_microbatches) + " micro-batches in the same order");
    }

    const auto timing = [&](const char* metric, double StepReport::*field) {
      const Stats s = stats_of(reports, field);
      emit(metric, "seconds", s.median, Verdict::info, NAN, "per step on rank 0", s);
    };
    timing("step_time", &StepReport::step_time);
    timing("compute_time", &StepReport::compute_time);
    timing("comm_time", &StepReport::comm_time);
    timing("exposed_comm_time", &StepReport::exposed_comm_time);
    if (world > 1) {
      for (int r = 0; r < world; ++r) {
        const IdleSeen& s = all_idle[static_cast<size_t>(r)];
        std::string role = r < config.servers ? "server" : config.servers > 0 ? "worker" : "rank";
        if (config.has_straggler() && r == config.straggler_rank) role += ", the straggler";
        char detail[300];
        std::snprintf(detail, sizeof(detail),
                      "rank %d (%s): step_time - compute_time per step (waiting on the others); mean %.3g s, "
                      "its step_time median %.3g s",
                      r, role.c_str(), s.mean, s.step_median);
        emit("idle_time", "seconds", s.median, Verdict::info, NAN, detail,
             Stats{static_cast<int64_t>(s.n), s.min, s.p05, s.median, s.p95, s.max}, ";rank=" + std::to_string(r));
      }
    }
    if (world > 1 && config.has_straggler()) {
      // What --straggler did: the straggler's compute per step over the median of its peers' (the
      // ranks of its role: workers beside workers). Its optimizer is not slowed, so a little under
      // the factor is what was asked; info, as every timing is on a shared machine.
      std::vector<double> peers;
      const bool straggler_serves = config.straggler_rank < config.servers;
      for (int r = 0; r < world; ++r) {
        if (r != config.straggler_rank && (r < config.servers) == straggler_serves) {
          peers.push_back(all_idle[static_cast<size_t>(r)].compute_median);
        }
      }
      const double slowed = all_idle[static_cast<size_t>(config.straggler_rank)].compute_median;
      const double peer = peers.empty() ? NAN : compute_stats(peers).median;
      char detail[300];
      std::snprintf(detail, sizeof(detail),
                    "rank %d's compute per step (median %.3g s) over its %zu peers' median (%.3g s); asked %g",
                    config.straggler_rank, slowed, peers.size(), peer, config.straggler_factor);
      emit("straggler_slowdown", "ratio", peer > 0 ? slowed / peer : NAN, Verdict::info, NAN, detail);
    }
    emit_traffic(all_traffic, world, formula, false, emit);
    emit_traffic(all_traffic, world, received_formula, true, emit);
    emit_rank_load(all_traffic, world,
                   config.servers > 0 ? " (ranks 0.." + std::to_string(config.servers - 1) + " servers, the " +
                                            std::to_string(config.dp) + " others workers)"
                                      : "",
                   emit);
    emit("memory_params", "bytes", static_cast<double>(memory.params), Verdict::info, NAN, "rank 0");
    emit("memory_grads", "bytes", static_cast<double>(memory.grads), Verdict::info, NAN, "rank 0");
    emit("memory_optimizer", "bytes", static_cast<double>(memory.optimizer), Verdict::info, NAN, "rank 0");
    if (config.pp > 1) {
      // The schedule's promise: GPipe holds all m micro-batches' activations, 1F1B at most p - s.
      int over = -1;
      for (int r = 0; r < world; ++r) {
        const PipelineSeen& p = all_pipeline[static_cast<size_t>(r)];
        if (p.in_flight > p.in_flight_theory && over < 0) over = r;
      }
      const PipelineSeen& p0 = all_pipeline[0];
      char detail[300];
      std::snprintf(detail, sizeof(detail),
                    "rank 0 (stage 0) held %.0f micro-batches at once, %.0f bytes each at most; %s allows %.0f%s",
                    p0.in_flight, p0.per_microbatch, std::string(dts::name(config.schedule)).c_str(), p0.in_flight_theory,
                    over < 0 ? "; every stage within its schedule's bound"
                             : ("; rank " + std::to_string(over) + " held more than its stage allows").c_str());
      emit("memory_activations_peak", "bytes", p0.activation_bytes, over < 0 ? Verdict::pass : Verdict::fail,
           p0.in_flight_theory * p0.per_microbatch, detail);
      for (int stage = 0; stage < config.pp; ++stage) {
        const PipelineSeen& p = all_pipeline[static_cast<size_t>(stage * config.dp * config.tp)];
        const Stats over_steps{static_cast<int64_t>(p.steps), p.bubble_min, p.bubble_p05, p.bubble_median, p.bubble_p95,
                               p.bubble_max};
        emit("bubble_fraction", "ratio", p.bubble_median, Verdict::info, NAN,
             "this stage's idle time (blocked receiving activations or gradients, or waiting for its last "
             "sends) / its schedule's time; median and distribution over steps",
             over_steps, ";stage=" + std::to_string(stage));
      }
      emit("bubble_fraction_theory", "ratio", bubble_fraction_theory(config.pp, config.microbatches), Verdict::info,
           NAN, "(p-1)/(m+p-1), equal stage times and free communication");
    } else {
      emit("memory_activations_peak", "bytes", static_cast<double>(memory.activations_peak), Verdict::info, NAN,
           "rank 0");
    }
  }
};

}  // namespace

namespace {
SuiteInfo equivalence_info() {
  SuiteInfo info;
  info.name = "equivalence";
  info.summary = "each strategy at world sizes 1..N, f32/f64/bf16 compute, sgd and adamw, against the single-process "
                 "reference";
  info.metrics = {
      {"max_abs_error", "", "largest |p - p_reference| over the parameters after the compared steps"},
      {"error_bound_ratio", "ratio", "largest error / derived bound over the parameters"},
      {"max_rel_error", "ratio", "largest relative parameter error"},
      {"max_ulp", "ulp", "largest parameter error in ulps of the master weights"},
      {"reproducible", "", "1 when two runs of the case gave the same bits"},
      {"bit_exact", "", "1 when a same-order layout equals one process's accumulation bit for bit"},
      {"step_time", "seconds", "wall time of a training step"},
      {"compute_time", "seconds", "forward, backward and optimizer time of a step"},
      {"comm_time", "seconds", "communication time of a step"},
      {"exposed_comm_time", "seconds", "communication time not hidden by compute"},
      {"idle_time", "seconds", "per rank (rank=R in config): step time not spent computing, waiting on the others"},
      {"bytes_sent", "bytes", "training traffic a rank sends per step"},
      {"bytes_received", "bytes", "training traffic a rank receives per step"},
      {"rank_load", "bytes", "bytes sent + received per step by the layout's busiest rank (stats over its ranks)"},
      {"memory_params", "bytes", "parameter bytes rank 0 holds"},
      {"memory_grads", "bytes", "gradient bytes rank 0 holds"},
      {"memory_optimizer", "bytes", "optimizer-state bytes rank 0 holds"},
      {"memory_activations_peak", "bytes", "most activation bytes held at once"},
      {"bubble_fraction", "ratio", "a pipeline stage's idle time over its schedule's time"},
      {"bubble_fraction_theory", "ratio", "(p - 1)/(m + p - 1)"},
      {"replay_audit", "", "1 when the servers' logs, replayed in one process, give their parameters bit for bit"},
      {"staleness", "updates", "updates applied between a gradient's version and its use (parameter servers)"},
      {"ssp_lead", "steps", "most steps a ps-ssp worker ran ahead of the slowest (bound: staleness)"},
      {"dropped_per_update", "gradients", "late gradients a ps-backup update dropped (must be backup)"},
      {"consensus_spread", "", "gossip: largest spread of a parameter across ranks after the last step"},
  };
  PlotSpec error;
  error.metric = "max_abs_error";
  error.x = PlotSpec::X::ranks;
  error.split = "dtype";
  error.series = {"strategy", "optimizer"};  // errors and bounds differ by orders between optimizers
  error.id = "equivalence-{split}";
  error.title = "Largest parameter error ({split})";
  error.x_label = "ranks of the layout";
  error.y_label = "max |p - p_reference|";
  error.log_y = true;
  error.draw_threshold = true;
  PlotSpec load;
  load.metric = "rank_load";
  load.x = PlotSpec::X::ranks;
  load.split = "dtype";
  load.series = {"strategy"};
  load.id = "rank-load-{split}";
  load.title = "Load of the busiest rank ({split})";
  load.x_label = "ranks of the layout (a parameter server's: S + W)";
  load.y_label = "bytes sent + received per step";
  info.sections = {{40, "equivalence", "Equivalence with the single-process reference",
                    "max_abs_error of the full parameters after the compared steps, per strategy, against the ranks "
                    "of its layout (dp x tp x pp); log scale.",
                    "No equivalence rows with max_abs_error in these results.", {error}},
                   {41, "rank-load", "Load per rank against the ranks of the layout",
                    "rank_load: the busiest rank's bytes sent + received per step, measured at the stack's "
                    "point-to-point calls (the theory's where the collectives are opaque). A central server's grows "
                    "with its workers W; a ring's (ddp, ZeRO) and gossip's stay flat.",
                    "No equivalence rows with rank_load in these results.", {load}}};
  return info;
}
}  // namespace

DTS_REGISTER_SUITE(EquivalenceSuite, equivalence_info());

}  // namespace dts
