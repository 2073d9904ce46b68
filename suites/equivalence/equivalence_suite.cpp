// The equivalence suite: does training on this stack give the model one process would? Each
// strategy runs S steps at every world size 1..N (sub-worlds split from the job) in f32 and f64,
// and its full parameters are compared with the single-process reference in the same precision
// (max_abs_error against tolerance.h's bound, max_rel_error, max_ulp). Also checked: a second
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
};

// SGD settings of the equivalence runs: large enough steps that a wrong gradient shows, small
// enough that training stays stable for the default model.
constexpr double kLearningRate = 0.05, kMomentum = 0.9;

ModelSpec model_of(const RunOptions& o) { return {o.layers, o.width, o.input, o.classes, o.seed, o.seed + 1}; }

int zero_stage(const std::string& strategy) {
  if (strategy.rfind("zero", 0) == 0 && strategy.size() == 5) return strategy[4] - '0';
  return 0;
}

std::string config_of(const EquivalenceCase& c, const RunOptions& o) {
  return "dp=" + std::to_string(c.world) + ";zero=" + std::to_string(zero_stage(c.strategy)) +
         ";mb=" + std::to_string(o.accumulation) + ";steps=" + std::to_string(o.steps) +
         ";batch=" + std::to_string(o.batch) + ";optimizer=" + o.optimizer;
}

template <class T>
std::vector<double> reference_parameters(const ModelSpec& spec, const TrainConfig& train, const RunOptions& o) {
  SingleTrainer<T> single(spec, train);
  for (int s = 0; s < o.steps; ++s) single.step(make_batch(spec, static_cast<int64_t>(s) * o.batch, o.batch));
  return single.parameters();
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
    return "each strategy at world sizes 1..N, f32 and f64, against the single-process reference";
  }

  std::vector<Case> plan(const RunOptions& o) const override {
    std::vector<std::string> strategies = o.strategies.empty() ? registered_strategies() : o.strategies;
    std::vector<Case> cases;
    for (const auto& s : strategies) {
      for (int w = 1; w <= o.world_size; ++w) {
        for (Precision p : {Precision::f32, Precision::f64}) {
          EquivalenceCase c{s, w, p};
          Labels labels;
          labels.strategy = s;
          labels.dtype = p == Precision::f32 ? "f32" : "f64";
          labels.config = config_of(c, o);
          cases.push_back({s + "/" + labels.dtype + "/dp" + std::to_string(w), labels, c});
        }
      }
    }
    return cases;
  }

  void run(const Case& the_case, RunContext& ctx) override {
    const auto& c = std::any_cast<const EquivalenceCase&>(the_case.params);
    const RunOptions& o = ctx.options();
    if (o.optimizer != "sgd") {
      throw Error(Error::Kind::unsupported,
                  "equivalence with " + o.optimizer + ": no tolerance model yet (AdamW normalizes each step; see "
                  "suites/equivalence/tolerance.h); run with --optimizer sgd");
    }
    Communicator& comm = ctx.comm();
    Communicator& control = ctx.control();
    const int rank = control.rank();
    const ModelSpec spec = model_of(o);
    ParallelConfig config;
    config.train.optimizer = OptimizerKind::sgd;
    config.train.sgd.lr = kLearningRate;
    config.train.sgd.momentum = kMomentum;
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

    const bool f32 = c.precision == Precision::f32;
    const std::vector<double> want =
        f32 ? reference_parameters<float>(spec, config.train, o) : reference_parameters<double>(spec, config.train, o);
    double max_abs = 0, max_rel = 0, max_ulp = 0;
    for (size_t i = 0; i < count; ++i) {
      const double diff = std::fabs(params[i] - want[i]);
      max_abs = std::max(max_abs, diff);
      if (want[i] != 0) max_rel = std::max(max_rel, diff / std::fabs(want[i]));
      max_ulp = std::max(max_ulp, diff / ulp_of(f32 ? DType::f32 : DType::f64, want[i]));
    }
    const EquivalenceTolerance tolerance =
        sgd_equivalence_tolerance(o.steps, kLearningRate, kMomentum, o.batch, f32 ? 0x1p-24 : 0x1p-53);

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
    emit("max_abs_error", "", max_abs, max_abs <= tolerance.max_abs_error ? Verdict::pass : Verdict::fail,
         tolerance.max_abs_error, "bound " + tolerance.formula);
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
    emit_bytes_sent(c, o, spec, f32 ? 4 : 8, reports, traffic, emit);
    emit("memory_params", "bytes", static_cast<double>(memory.params), Verdict::info, NAN, "rank 0");
    emit("memory_grads", "bytes", static_cast<double>(memory.grads), Verdict::info, NAN, "rank 0");
    emit("memory_optimizer", "bytes", static_cast<double>(memory.optimizer), Verdict::info, NAN, "rank 0");
    emit("memory_activations_peak", "bytes", static_cast<double>(memory.activations_peak), Verdict::info, NAN, "rank 0");
  }
};

}  // namespace

DTS_REGISTER_SUITE(EquivalenceSuite, "equivalence");

}  // namespace dts
