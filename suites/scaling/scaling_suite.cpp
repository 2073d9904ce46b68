// The scaling suite: how much faster does each strategy go with more ranks of this stack? Inside
// one job of W ranks, each strategy (every layout of n ranks it can run; see scaling.h) and an
// all_reduce of a fixed size are timed on sub-worlds of n = 1, 2, 4, ..., W ranks split from the
// job, and each n's time T(n) is set against T(1): weak scaling (per-rank batch fixed)
// E(n) = T(1)/T(n), strong scaling (global batch fixed) E(n) = T(1)/(n T(n)), with the throughput
// in samples per second. Efficiency is info unless a profile sets a threshold: it measures the
// machine as much as the stack, and the rows say how many cores the node has and whether its
// ranks were oversubscribed.
#include <CLI/CLI.hpp>

#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include "comm/text.h"
#include "core/error.h"
#include "strategies/strategy_spec.h"
#include "strategies/workload.h"
#include "suites/scaling/scaling.h"
#include "suites/memory_fit.h"
#include "suites/suite.h"
#include "suites/training_flags.h"

namespace dts {

namespace {

class ScalingFlags final : public FlagGroup {
 public:
  static constexpr const char* kGroup = "scaling";
  std::vector<ScalingMode> modes{ScalingMode::weak, ScalingMode::strong};
  // Weak scaling's per-rank batch; strong scaling's global batch is this times the job's ranks,
  // so both modes time the same batch at n = W (and any layout of W ranks has rows for every
  // replica's micro-batches when rank_batch >= the pipelines' micro-batches).
  int rank_batch = 32;
  int64_t all_reduce_bytes = int64_t{1} << 20;  // --scaling-bytes: the collective's fixed size

  void declare(CLI::App& g) override {
    g.add_option("--scaling-mode", modes_text_, "scaling modes, comma-separated: weak,strong")->capture_default_str();
    g.add_option("--rank-batch", rank_batch, "rows per rank: weak scaling's per-rank batch; strong scaling's global "
                                             "batch is this times the job's ranks")
        ->check(CLI::Range(1, 1 << 20))->capture_default_str();
    g.add_option("--scaling-bytes", bytes_text_, "size of the all_reduce timed beside the strategies (suffixes K, M, G)")
        ->capture_default_str();
  }
  void finish(const RunOptions&) override {
    modes.clear();
    for (const std::string& m : parse_list(modes_text_)) {
      if (m == "weak") modes.push_back(ScalingMode::weak);
      else if (m == "strong") modes.push_back(ScalingMode::strong);
      else throw Error(Error::Kind::invalid_argument, "unknown scaling mode '" + m + "' (expected weak or strong)");
    }
    all_reduce_bytes = parse_size(bytes_text_);
    if (all_reduce_bytes % 4 != 0) {
      throw Error(Error::Kind::invalid_argument, "--scaling-bytes " + bytes_text_ + " is not a whole number of f32 elements");
    }
  }
  std::string describe() const override {
    std::string text = "scaling:";
    for (ScalingMode m : modes) text += " " + std::string(name(m));
    return text + ", " + std::to_string(rank_batch) + " rows per rank, all_reduce of " +
           std::to_string(all_reduce_bytes) + " bytes";
  }

 private:
  std::string modes_text_ = "weak,strong", bytes_text_ = "1M";
};
DTS_REGISTER_FLAGS(ScalingFlags, "Scaling suite");

struct ScalingCase {
  std::string target;  // a strategy spec, or "all_reduce"
  ScalingMode mode;
};

constexpr const char* kAllReduce = "all_reduce";

class ScalingSuite final : public Suite {
 public:
  std::string_view name() const override { return "scaling"; }

  std::vector<Case> plan(const RunOptions& common) const override {
    const ScalingFlags& s = common.flags<ScalingFlags>();
    const TrainingFlags& t = common.flags<TrainingFlags>();
    t.check_straggler(common.world_size, "the job's");  // the largest sub-world is the job
    std::vector<std::string> targets = t.strategies;
    if (targets.empty()) targets = registered_strategies();
    // Before anything is allocated: the one-rank sub-world holds the whole model, in f32 with its
    // gradients and momentum (12 bytes a parameter at least), and strong scaling's whole batch.
    const ModelSpec model = t.model(common);
    const int64_t largest_batch = int64_t{s.rank_batch} * common.world_size;
    check_fits("scaling: " + describe_model(model) + " on batches of " + std::to_string(largest_batch) + " rows",
               training_bytes_at_least(model, largest_batch, 12),
               "12 bytes a parameter: f32 weights, gradients and momentum on one rank, plus the batch",
               common.memory_per_rank());
    // The all_reduce beside them (time_all_reduce): its buffer and the host ones copied into it,
    // and room for one more copy, the scratch a library's all_reduce may keep: 3 bytes a byte.
    check_fits("scaling: the all_reduce of " + format_bytes(static_cast<double>(s.all_reduce_bytes)),
               3.0 * static_cast<double>(s.all_reduce_bytes),
               "3 bytes a byte of message: the buffer, its host input, a library's scratch copy",
               common.memory_per_rank(), "lower --scaling-bytes");
    std::vector<Case> cases;
    for (ScalingMode mode : s.modes) {
      for (const std::string& target : targets) {
        const StrategySpec spec = parse_strategy_spec(target);
        Labels labels;
        labels.strategy = spec.name;
        // The model in the row, so that a reader of the CSV (the planner: compute per row from
        // a step's time) knows what was timed.
        labels.config = "mode=" + std::string(dts::name(mode)) + ";job=" + std::to_string(common.world_size) +
                        ";layers=" + std::to_string(model.layers) + ";width=" + std::to_string(model.width) +
                        ";input=" + std::to_string(model.input) + ";classes=" + std::to_string(model.classes);
        cases.push_back({spec.name + "/" + std::string(dts::name(mode)) + (spec.text == spec.name ? "" : "/" + spec.text),
                         labels, ScalingCase{spec.text, mode}});
      }
    }
    // The collective every strategy leans on, at a fixed size per rank: weak scaling only.
    Labels labels;
    labels.op = kAllReduce;
    labels.dtype = "f32";
    labels.bytes = s.all_reduce_bytes;
    labels.config = "mode=weak;job=" + std::to_string(common.world_size);
    cases.push_back({std::string(kAllReduce) + "/weak/" + std::to_string(s.all_reduce_bytes), labels,
                     ScalingCase{kAllReduce, ScalingMode::weak}});
    return cases;
  }

  void run(const Case& the_case, RunContext& ctx) override {
    const auto& c = std::any_cast<const ScalingCase&>(the_case.params);
    const RunOptions& common = ctx.options();
    const ScalingFlags& s = common.flags<ScalingFlags>();
    const TrainingFlags& t = common.flags<TrainingFlags>();
    Communicator& comm = ctx.comm();
    Communicator& control = ctx.control();
    const int rank = control.rank(), world = control.size();
    const ModelSpec model = t.model(common);
    const bool collective = c.target == kAllReduce;

    // The ranks on this host: their affinity masks together are the cores they share. By the host
    // name, not the run's node names: fixtures name several "nodes" on one host, whose ranks still
    // share its cores. (A hash collision would only merge two hosts' counts.)
    const std::string host = host_name();
    const int host_color = static_cast<int>(fnv1a(host.data(), host.size()) & 0x3fffffff);
    std::unique_ptr<Communicator> node = control.split(host_color, rank);
    const NodeCapacity capacity = node_capacity(*node);
    const std::string load = ";cores=" + std::to_string(capacity.cores) +
                             ";node_ranks=" + std::to_string(capacity.ranks_on_node) +
                             ";oversubscribed=" + (capacity.oversubscribed ? "1" : "0");

    // Every sub-world is timed first (collective on every rank); rank 0 writes the rows after the
    // loop, so nothing it does alone can leave the others waiting in the next split.
    std::vector<Row> measured;
    for (int n : scaling_world_sizes(world)) {
      const bool member = rank < n;
      std::unique_ptr<Communicator> group = comm.split(member ? 0 : 1, rank);
      std::unique_ptr<Communicator> members = control.split(member ? 0 : 1, rank);
      Row m;
      m.n = n;
      m.who = ctx.participants(member);
      m.batch = scaled_batch(c.mode, n, c.mode == ScalingMode::weak ? s.rank_batch : int64_t{s.rank_batch} * world);
      std::optional<ParallelConfig> layout;
      if (!collective) {
        layout = scaling_layout(parse_strategy_spec(c.target), n, model, m.batch, t.microbatches);
        if (layout) {
          layout->straggler_rank = t.straggler_rank;
          layout->straggler_factor = t.straggler_factor;
        }
        if (!layout) {  // no layout of n ranks (a pipeline deeper than the model): said in a skip row
          m.why_none = why_no_scaling_layout(parse_strategy_spec(c.target), n, model, m.batch, t.microbatches);
          measured.push_back(m);
          continue;
        }
      }
      std::exception_ptr failure;
      if (member) try {
        m.point = collective ? time_all_reduce(*group, *members, s.all_reduce_bytes, common.warmup, common.iters)
                             : time_strategy_steps(*group, *members, parse_strategy_spec(c.target).name, *layout,
                                                   model, m.batch, common.warmup, common.iters);
      } catch (...) {
        failure = std::current_exception();
      }
      leave_together(control, failure);  // the ranks off the sub-world must not wait in the next split
      if (!m.point) m.point = ScalingPoint{};  // off the sub-world: rank 0 holds the real one
      measured.push_back(m);
    }
    if (rank == 0) emit_rows(the_case, c, measured, capacity, load, ctx);
  }

 private:
  // One sub-world's measurement, as rank 0 holds it.
  struct Row {
    int n = 0;
    RunContext::Participants who;
    int64_t batch = 0;
    std::optional<ScalingPoint> point;  // nothing: no layout of n ranks
    std::string why_none;               // then: why (why_no_scaling_layout)
  };

  static void emit_rows(const Case& the_case, const ScalingCase& c, const std::vector<Row>& rows,
                        const NodeCapacity& capacity, const std::string& load, RunContext& ctx) {
    const bool collective = c.target == kAllReduce;
    // A strategy's reference is its one-rank step. all_reduce on one rank moves nothing (MPI
    // returns at once), so T(1) would make any n look hopeless: its reference is n = 2, and its
    // efficiency is the bus bandwidth kept, busbw(n)/busbw(2) (nccl-tests' busbw is built to stay
    // level as ranks grow on links that keep up).
    const int reference_n = collective ? 2 : 1;
    const ScalingPoint* reference = nullptr;
    for (const Row& r : rows) {
      if (r.n == reference_n && r.point) reference = &*r.point;
    }
    for (const Row& r : rows) {
      Record base;
      base.suite = "scaling";
      base.case_id = the_case.id;
      base.labels = the_case.labels;
      base.labels.world_size = r.who.world_size;
      base.labels.nodes = r.who.nodes;
      base.labels.ranks_per_node = r.who.ranks_per_node;
      if (!r.point) {
        Record skip = base;
        skip.metric = "check";
        skip.verdict = Verdict::skip;
        skip.labels.config = the_case.labels.config + ";batch=" + std::to_string(r.batch) + load;
        skip.detail = "no layout of " + std::to_string(r.n) + " ranks for " + c.target + ": " + r.why_none +
                      (r.n == reference_n ? "; no reference T(1), so no efficiency at any n" : "");
        ctx.emit(skip);
        continue;
      }
      const ScalingPoint& point = *r.point;
      base.labels.config = (collective ? "" : point.layout + ";") + the_case.labels.config +
                           (collective ? "" : ";batch=" + std::to_string(r.batch)) + load;

      Record time = base;
      time.metric = "step_time";
      time.unit = "seconds";
      time.value = point.seconds_per_step;
      time.stats = compute_stats(point.samples);
      time.samples = point.samples;
      time.verdict = Verdict::info;
      time.detail = collective ? "one all_reduce, the slowest rank's time" : "one training step, the slowest rank's time";
      ctx.emit(time);

      Record throughput = base;
      throughput.metric = collective ? "algbw" : "throughput";  // one unit per metric name
      throughput.unit = collective ? "bytes_per_second" : "samples_per_second";
      throughput.value = point.throughput;
      throughput.verdict = Verdict::info;
      throughput.detail = collective ? "bytes / time" : std::to_string(point.work_per_step) + " rows per step / time";
      ctx.emit(throughput);

      if (!reference || r.n < reference_n) continue;
      Record efficiency = base;
      efficiency.metric = "scaling_efficiency";
      efficiency.unit = "ratio";
      efficiency.verdict = Verdict::info;
      efficiency.detail = scaling_detail(c.mode, *reference, point, capacity);
      if (collective) {
        const double factor = 2.0 * (r.n - 1) / r.n;  // busbw / algbw of all_reduce; 1 at n = 2
        efficiency.value = reference->seconds_per_step / point.seconds_per_step * factor;
        const size_t cut = efficiency.detail.find(", T(1)");
        efficiency.detail = "weak: E = busbw(n)/busbw(2) = T(2)/T(n) x 2(n-1)/n" +
                            (cut == std::string::npos ? "" : ", T(2" + efficiency.detail.substr(cut + 5));
      } else {
        efficiency.value = scaling_efficiency(c.mode, reference->seconds_per_step, point.seconds_per_step, r.n);
      }
      ctx.emit(efficiency);
    }
  }
};

SuiteInfo scaling_info() {
  SuiteInfo info;
  info.name = "scaling";
  info.summary = "each strategy and all_reduce on sub-worlds of 1, 2, 4, ... W ranks: weak and strong scaling "
                 "efficiency, throughput";
  info.metrics = {
      {"scaling_efficiency", "ratio", "weak T(1)/T(n), strong T(1)/(n T(n)); all_reduce busbw(n)/busbw(2)"},
      {"throughput", "samples_per_second", "global batch rows per second"},
      {"algbw", "bytes_per_second", "all_reduce: bytes / time"},
      {"step_time", "seconds", "median time of a step, the slowest rank's"},
  };
  PlotSpec efficiency;
  efficiency.metric = "scaling_efficiency";
  efficiency.x = PlotSpec::X::ranks;
  efficiency.split = "mode";
  efficiency.series = {"strategy", "op"};
  efficiency.id = "scaling-{split}";
  efficiency.title = "Scaling efficiency, {split} scaling";
  efficiency.x_label = "ranks";
  efficiency.y_label = "efficiency (ratio)";
  PlotSpec throughput = efficiency;
  throughput.metric = "throughput";
  throughput.id = "throughput-{split}";
  throughput.title = "Throughput, {split} scaling";
  throughput.y_label = "samples per second";
  throughput.log_y = true;
  info.sections = {{30, "scaling", "Scaling efficiency",
                    "Weak scaling T(1)/T(n) (rows per rank fixed), strong scaling T(1)/(n T(n)) (global batch "
                    "fixed), per strategy, and for all_reduce of a fixed size the bus bandwidth kept, "
                    "busbw(n)/busbw(2), against the ranks of the sub-world; "
                    "then the strategies' throughput. Rows of an oversubscribed node (more ranks than cores: "
                    "oversubscribed=1 in config) measure the machine, not the stack.",
                    "No scaling_efficiency rows in these results (the scaling suite did not run).",
                    {efficiency, throughput}}};
  return info;
}

}  // namespace

DTS_REGISTER_SUITE(ScalingSuite, scaling_info());

}  // namespace dts
