// The equivalence suite: does training on this stack give the model one process would? Each
// strategy runs S steps at every world size 1..N (sub-worlds split from the job) in f32, f64 and
// bf16 compute with f32 master weights, with SGD and AdamW, and its full parameters are compared
// with the single-process reference in the same precision: every parameter must be within its
// own bound (tolerance.h), reported as max_abs_error and error_bound_ratio, with max_rel_error
// and max_ulp beside them. Also checked: a second
// run with the same config gives the same bits (reproducible), and every rank holds the same
// model (replicas identical). Step time, communication, bytes and memory are reported per case.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "strategies/single/single_trainer.h"
#include "strategies/strategy.h"
#include "suites/collectives/check.h"
#include "suites/equivalence/tolerance.h"
#include "suites/suite.h"

namespace dts {

namespace {

struct EquivalenceCase {
  std::string strategy;
  int world;
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

std::vector<OptimizerKind> optimizers_of(const std::string& list) {
  std::vector<OptimizerKind> kinds;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, end - start);
    if (item == "sgd") kinds.push_back(OptimizerKind::sgd);
    else if (item == "adamw") kinds.push_back(OptimizerKind::adamw);
    else throw Error(Error::Kind::invalid_argument, "unknown optimizer '" + item + "' (expected sgd or adamw)");
    start = end + 1;
  }
  return kinds;
}

// "layer1.weight[17]": where element i of the reference layout lives.
std::string element_name(const ModelSpec& spec, int64_t i) {
  for (const ParameterInfo& p : parameter_layout(spec)) {
    if (i >= p.offset && i < p.offset + p.size()) return p.name + "[" + std::to_string(i - p.offset) + "]";
  }
  return "element " + std::to_string(i);
}

ModelSpec model_of(const RunOptions& o) { return {o.layers, o.width, o.input, o.classes, o.seed, o.seed + 1}; }

int zero_stage(const std::string& strategy) {
  if (strategy.rfind("zero", 0) == 0 && strategy.size() == 5) return strategy[4] - '0';
  return 0;
}

std::string config_of(const EquivalenceCase& c, const RunOptions& o) {
  return "dp=" + std::to_string(c.world) + ";zero=" + std::to_string(zero_stage(c.strategy)) +
         ";mb=" + std::to_string(o.accumulation) + ";steps=" + std::to_string(o.steps) +
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

// Bytes per step per rank, measured where the stack's traffic is visible (an algorithm over
// point-to-point sends, such as ring(mpi), where every byte passes the leaf backend's counter),
// and checked against the theory: DDP, ZeRO-1/2 move 2 Psi (N-1)/N elements per rank (one
// all_reduce, or a reduce_scatter and an all_gather), ZeRO-3 3 Psi (N-1)/N (two all_gathers and a
// reduce_scatter; 2K+1 collectives with K micro-batches). Slack: a ring's segments, or ZeRO's
// padded shards, make each collective's share differ from (N-1)/N by at most N elements; plus the
// step's one-element loss all_reduce (at most 2 x 8 bytes). Where the library's collectives are
// opaque, the strategy's ring-model figure is reported instead, as info.
template <class Emit>
void emit_bytes_sent(const EquivalenceCase& c, const RunOptions& o, const ModelSpec& spec, int element_bytes,
                     const std::vector<StepReport>& reports, const RunContext::Traffic& traffic, const Emit& emit) {
  const double n = c.world;
  const double psi = static_cast<double>(parameter_count(spec));
  const double factor = zero_stage(c.strategy) == 3 ? 2.0 * o.accumulation + 1 : 2.0;
  const double theory = factor * psi * (n - 1) / n * element_bytes;
  const double collectives = reports.empty() ? 0 : static_cast<double>(reports.back().collectives);
  const double slack = collectives * n * element_bytes + 16;
  if (traffic.opaque_collectives == 0) {
    const double measured = static_cast<double>(traffic.bytes_sent) / o.steps;
    char detail[200];
    std::snprintf(detail, sizeof(detail), "measured at the stack's sends; theory %g*Psi*(N-1)/N*%d = %.0f +- %.0f",
                  factor, element_bytes, theory, slack);
    emit("bytes_sent", "bytes", measured, std::fabs(measured - theory) <= slack ? Verdict::pass : Verdict::fail,
         theory, detail);
  } else {
    emit("bytes_sent", "bytes", reports.empty() ? 0.0 : static_cast<double>(reports.back().bytes_sent), Verdict::info,
         theory, "ring model per step (the stack's collectives are opaque to dtsuite; run over ring(...) to measure)");
  }
}

class EquivalenceSuite final : public Suite {
 public:
  std::string_view name() const override { return "equivalence"; }
  std::string_view summary() const override {
    return "each strategy at world sizes 1..N, f32/f64/bf16 compute, sgd and adamw, against the single-process "
           "reference";
  }

  std::vector<Case> plan(const RunOptions& o) const override {
    std::vector<std::string> strategies = o.strategies.empty() ? registered_strategies() : o.strategies;
    std::vector<Case> cases;
    for (const auto& s : strategies) {
      for (OptimizerKind optimizer : optimizers_of(o.optimizer)) {
        for (int w = 1; w <= o.world_size; ++w) {
          for (Precision p : {Precision::f32, Precision::f64, Precision::bf16}) {
            EquivalenceCase c{s, w, p, optimizer};
            Labels labels;
            labels.strategy = s;
            labels.dtype = precision_model(p).name;
            labels.config = config_of(c, o);
            cases.push_back(
                {s + "/" + labels.dtype + "/" + optimizer_name(optimizer) + "/dp" + std::to_string(w), labels, c});
          }
        }
      }
    }
    return cases;
  }

  void run(const Case& the_case, RunContext& ctx) override {
    const auto& c = std::any_cast<const EquivalenceCase&>(the_case.params);
    const RunOptions& o = ctx.options();
    Communicator& comm = ctx.comm();
    Communicator& control = ctx.control();
    const int rank = control.rank();
    const ModelSpec spec = model_of(o);
    ParallelConfig config;
    config.train = train_config(c.optimizer);
    config.accumulation_steps = o.accumulation;
    const bool member = rank < c.world;
    // Every rank takes part in the split; ranks outside the sub-world only help verify.
    std::unique_ptr<Communicator> group = comm.split(member ? 0 : 1, rank);

    std::vector<double> params, again;
    std::vector<StepReport> reports;
    RunContext::Traffic traffic;  // this rank's traffic during the first run's steps
    MemoryReport memory;
    int64_t digest = 0;  // replicated_state_digest() of the first run, as bits
    if (member) {
      const auto train = [&](bool keep) {
        auto strategy = make_strategy(c.strategy, spec, config, *group, c.precision);
        // Traffic of the steps alone: gathering the parameters afterwards is the suite's, not the step's.
        const RunContext::Traffic before = ctx.traffic();
        for (int s = 0; s < o.steps; ++s) {
          const StepReport r = strategy->step(make_batch(spec, static_cast<int64_t>(s) * o.batch, o.batch));
          if (keep) reports.push_back(r);
        }
        const RunContext::Traffic after = ctx.traffic();
        if (keep) traffic = {after.bytes_sent - before.bytes_sent, after.opaque_collectives - before.opaque_collectives};
        if (keep) {
          memory = strategy->memory();
          const uint64_t d = strategy->replicated_state_digest();
          std::memcpy(&digest, &d, sizeof(d));
        }
        return strategy->full_parameters();
      };
      params = train(true);
      again = train(false);
    }

    // Replicas and reproducibility, judged on every member against rank 0 / its own first run.
    // Replicas compare digests of their replicated state (parameters, and for DDP gradients and
    // optimizer state too).
    const auto count = static_cast<size_t>(parameter_count(spec));
    int64_t root_digest = digest;
    control.broadcast(&root_digest, &root_digest, 1, DType::i64, 0);
    const int diverged = member && digest != root_digest ? 1 : 0;
    const int irreproducible = member && !same_bits(params, again) ? 1 : 0;
    int any_diverged = 0, any_irreproducible = 0;
    control.all_reduce(&diverged, &any_diverged, 1, DType::i32, ReduceOp::max);
    control.all_reduce(&irreproducible, &any_irreproducible, 1, DType::i32, ReduceOp::max);
    if (rank != 0) return;

    const bool f64 = c.precision == Precision::f64;
    const ReferenceWithBound reference = reference_with_bound(spec, config.train, c.precision, o.steps, o.batch);
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
    const Verdict within = bound.violations == 0 ? Verdict::pass : Verdict::fail;
    std::string where = "every parameter within its bound";
    if (bound.worst >= 0) {
      char text[200];
      std::snprintf(text, sizeof(text), "%lld of %zu parameters past their bound; largest error/bound %.3g at %s",
                    static_cast<long long>(bound.violations), count, bound.max_ratio,
                    element_name(spec, bound.worst).c_str());
      where = text;
    }

    Record base;
    base.suite = "equivalence";
    base.case_id = the_case.id;
    base.labels = the_case.labels;
    const auto emit = [&](const char* metric, const char* unit, double value, Verdict verdict, double threshold,
                          std::string detail, Stats stats = {}) {
      Record r = base;
      r.metric = metric;
      r.unit = unit;
      r.value = value;
      r.verdict = verdict;
      r.threshold = threshold;
      r.detail = std::move(detail);
      r.stats = stats;
      ctx.emit(std::move(r));
    };
    emit("max_abs_error", "", bound.max_abs_error, within, largest_bound, where + "; " + reference.description);
    emit("error_bound_ratio", "ratio", bound.max_ratio, within, 1.0,
         "largest |strategy - reference| / bound over the parameters");
    emit("max_rel_error", "ratio", max_rel, Verdict::info, NAN, "");
    emit("max_ulp", "ulp", max_ulp, Verdict::info, NAN, "");
    emit("reproducible", "", any_irreproducible ? 0 : 1, any_irreproducible ? Verdict::fail : Verdict::pass, NAN,
         "a second run with the same config gives identical bits on every rank");
    emit("check", "", any_diverged ? 0 : 1, any_diverged ? Verdict::fail : Verdict::pass, NAN,
         "replicas identical: every rank's replicated state (parameters; for ddp also gradients and optimizer "
         "state) hashes like rank 0's");
    const auto timing = [&](const char* metric, double StepReport::*field) {
      const Stats s = stats_of(reports, field);
      emit(metric, "seconds", s.median, Verdict::info, NAN, "per step on rank 0", s);
    };
    timing("step_time", &StepReport::step_time);
    timing("compute_time", &StepReport::compute_time);
    timing("comm_time", &StepReport::comm_time);
    timing("exposed_comm_time", &StepReport::exposed_comm_time);
    emit_bytes_sent(c, o, spec, f64 ? 8 : 4, reports, traffic, emit);
    emit("memory_params", "bytes", static_cast<double>(memory.params), Verdict::info, NAN, "rank 0");
    emit("memory_grads", "bytes", static_cast<double>(memory.grads), Verdict::info, NAN, "rank 0");
    emit("memory_optimizer", "bytes", static_cast<double>(memory.optimizer), Verdict::info, NAN, "rank 0");
    emit("memory_activations_peak", "bytes", static_cast<double>(memory.activations_peak), Verdict::info, NAN, "rank 0");
  }
};

}  // namespace

DTS_REGISTER_SUITE(EquivalenceSuite, "equivalence");

}  // namespace dts
