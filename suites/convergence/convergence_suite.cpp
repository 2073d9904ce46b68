// The convergence suite: does large-batch training still learn on this stack? The linear scaling
// rule with gradual warm-up (Goyal et al. 2017): a base run (batch B, lr eta, E epochs), a scaled
// run (kB, k eta, warm-up from eta over the first epochs) and a control run (kB, eta, no
// warm-up), all trained with DDP through the stack under test on the UCI handwritten digits
// (suites/convergence/data). PASS when the scaled run's final held-out accuracy and loss are no
// worse than the base run's by more than two standard errors of their difference (trainer.h,
// judge_rule), and every run kept its replicas alike and reported the losses it computed; a
// broken stack shows up as one of those failing. A run whose loss becomes non-finite diverged:
// its configuration's outcome (a `diverged` row), which fails the rule, not the stack. Scaled
// runs at more factors locate the largest k at which the rule still holds, reported beside the
// gradient noise scale B_simple (McCandlish et al. 2018) measured on the base run. The runs go at once on disjoint groups of ranks when
// there are ranks enough (--sweep runs the user's own (batch, lr) configurations the same way).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <cmath>
#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "comm/text.h"
#include "core/error.h"
#include "strategies/strategy_spec.h"
#include "suites/convergence/digits.h"
#include "suites/convergence/trainer.h"
#include "suites/flag_checks.h"
#include "suites/suite.h"
#include "suites/training_flags.h"

namespace dts {

namespace {

struct SweepPoint {
  int64_t batch = 0;
  double lr = 0;
};

class ConvergenceFlags final : public FlagGroup {
 public:
  static constexpr const char* kGroup = "convergence";
  // The largest learning rate a flag takes (--base-lr and each --sweep point's): past it nothing
  // is learned, and the run only shows how a float overflows.
  static constexpr double kMaxLearningRate = 1e6;
  std::string data = "digits";   // digits, or a digits-format CSV(.gz) path
  int epochs = 0;                // 0: the defaults' (digits_base_run)
  int64_t base_batch = 0;        // 0: the defaults'
  double base_lr = 0;            // 0: the defaults'
  int scale = kDefaultScale;     // k of the judged scaled run and of the control run
  std::vector<int> scan{2, 4, 16, 32};  // more scaled runs: where the rule stops holding (info)
  double warmup_epochs = kDefaultWarmupEpochs;
  bool scale_lr = true;          // false: the rule broken on purpose (lr not scaled)
  std::vector<SweepPoint> sweep; // --sweep: the user's own configurations instead of the rule
  int group_ranks = 0;           // ranks per concurrent run; 0: as many groups of >= 2 as the job holds
  double target_accuracy = kDefaultTargetAccuracy;  // time_to_target, samples_to_target

  void declare(CLI::App& g) override {
    g.add_option("--data", data, "convergence data: digits (shipped), teacher-student (synthetic), or a digits-format "
                                 "CSV or .csv.gz")
        ->capture_default_str();
    g.add_option("--epochs", epochs, "epochs of every convergence run; 0: the suite's default (10)")
        ->check(CLI::Range(0, 100000))->capture_default_str();
    g.add_option("--base-batch", base_batch, "the base run's global batch B; 0: the default (16)")
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 24))->capture_default_str();
    g.add_option("--base-lr", base_lr, "the base run's learning rate eta; 0: the default (0.02)")
        ->check(FiniteRange(0.0, kMaxLearningRate))->capture_default_str();
    g.add_option("--scale", scale, "k of the judged scaled run (kB, k eta) and of the control run (kB, eta)")
        ->check(CLI::Range(2, 1 << 16))->capture_default_str();
    g.add_option("--scan-scales", scan_text_, "more factors k for scaled runs, comma-separated (info: where the "
                                              "rule stops holding); none: no scan")
        ->capture_default_str();
    g.add_option("--warmup-epochs", warmup_epochs, "gradual warm-up of the scaled runs, in epochs; 0: none")
        ->check(FiniteRange(0.0, 1e6))->capture_default_str();
    g.add_option("--scaled-lr", scaled_lr_text_, "learning rate of the scaled runs: linear (k eta, the rule) or none "
                                                 "(eta: the rule broken on purpose)")
        ->check(CLI::IsMember({"linear", "none"}))->capture_default_str();
    g.add_option("--sweep", sweep_text_, "hyperparameter sweep: BATCH:LR configurations, comma-separated, trained at "
                                         "once on disjoint groups of ranks (instead of the scaling rule); none: no sweep")
        ->capture_default_str();
    g.add_option("--group-ranks", group_ranks, "ranks per concurrent convergence run, at most the job's; 0: groups of "
                                               "at least 2")
        ->check(CLI::Range(0, 1 << 20))->capture_default_str();
    g.add_option("--target-accuracy", target_accuracy, "held-out accuracy whose first epoch gives each run's "
                                                        "time_to_target and samples_to_target")
        ->check(FiniteRange(0.0, 1.0))->capture_default_str();
  }

  void finish(const RunOptions&) override {
    scale_lr = scaled_lr_text_ == "linear";
    scan.clear();
    if (scan_text_ != "none") {
      for (const std::string& item : items_of(scan_text_, "--scan-scales", "no scan")) {
        scan.push_back(integer_of(item, "--scan-scales", 2));
      }
    }
    sweep.clear();
    if (sweep_text_ != "none") {
      for (const std::string& item : items_of(sweep_text_, "--sweep", "no sweep (the scaling rule)")) {
        const size_t colon = item.find(':');
        if (colon == std::string::npos) {
          throw Error(Error::Kind::invalid_argument, "--sweep item '" + item + "' is not BATCH:LR (e.g. 64:0.08)");
        }
        // Both halves decimal, the whole text (decimal_of): std::stod read the lr "0x10" as 16.
        SweepPoint p;
        p.batch = integer_of(item.substr(0, colon), "--sweep batch", 1);
        const std::optional<double> lr = decimal_of<double>(std::string_view(item).substr(colon + 1));
        if (!lr || !(*lr > 0) || !(*lr <= kMaxLearningRate)) {
          throw Error(Error::Kind::invalid_argument, "--sweep item '" + item + "': the learning rate must be a decimal number in (0, " +
                                                         format_number(kMaxLearningRate, "%g") + "], as --base-lr's");
        }
        p.lr = *lr;
        sweep.push_back(p);
      }
    }
  }

  std::vector<NamedPath> input_files() const override {
    if (data == "digits" || data == "teacher-student") return {};
    return {{"--data", data}};
  }

  // Refused before anything runs (plan: the job's size is known there, not in finish): a group
  // larger than the job cannot be formed, and a smaller one in its place is not what was asked.
  void check_group_ranks(int world_size) const {
    if (group_ranks > world_size) {
      throw Error(Error::Kind::invalid_argument,
                  "--group-ranks " + std::to_string(group_ranks) + " exceeds the job's " + std::to_string(world_size) +
                      " ranks (at most " + std::to_string(world_size) + ", or 0 for groups of at least 2)");
    }
  }

  // Ranks of each concurrent run's group: --group-ranks, else groups of at least 2 (so every run
  // goes through the stack's collectives), as many as the runs can use.
  int group_size_of(int runs, int world_size) const {
    if (group_ranks > 0) return group_ranks;
    return world_size / std::max(1, std::min(runs, world_size / 2));
  }

  std::string describe() const override {
    if (!sweep.empty()) return "convergence: sweep of " + std::to_string(sweep.size()) + " configurations on " + data;
    return "convergence: linear scaling rule at k=" + std::to_string(scale) + " on " + data + ", warm-up " +
           format_number(warmup_epochs, "%g") + " epochs" + (scale_lr ? "" : ", lr NOT scaled (the rule broken on purpose)");
  }


 private:
  // A list flag's items; an empty value is refused, saying what to write for none (an empty
  // string from a script's unset variable must not pass as a choice).
  static std::vector<std::string> items_of(const std::string& text, const std::string& flag, const std::string& none) {
    if (text.find_first_not_of(" \t") == std::string::npos) {
      throw Error(Error::Kind::invalid_argument,
                  flag + " '" + text + "' is empty: write " + flag + " none for " + none);
    }
    try {
      return parse_list(text);
    } catch (const Error& e) {
      throw Error(Error::Kind::invalid_argument, flag + ": " + e.what());
    }
  }

  static int integer_of(const std::string& text, const std::string& what, int minimum) {
    const std::optional<int> value = decimal_of<int>(text);
    if (value && *value >= minimum && *value <= (1 << 24)) return *value;
    throw Error(Error::Kind::invalid_argument, what + " '" + text + "' is not a decimal whole number from " +
                                                   std::to_string(minimum) + " to " + std::to_string(1 << 24));
  }

  std::string scan_text_ = "2,4,16,32", scaled_lr_text_ = "linear", sweep_text_ = "none";
};
DTS_REGISTER_FLAGS(ConvergenceFlags, "Convergence suite");

// What one run is for, and so how its rows are judged.
enum class Role { base, judged, control, scan, sweep };

struct PlannedRun {
  RunConfig config;
  Role role = Role::base;
  int k = 1;
};

struct ConvergenceCase {
  StrategySpec strategy;  // what trains every run of the case (ddp unless --strategy names others)
  std::vector<PlannedRun> runs;
  bool noise_scale = false;  // measure B_simple on the base run (runs[0])
  // Read once at set-up on every rank (plan), so no rank can fail to read it inside the case.
  std::shared_ptr<const ConvergenceData> data;
  std::vector<std::string> left_out;  // scan factors whose batch the training set cannot fill
};

// Seconds a run may take: a floor for start-up and evaluation, and an allowance per training
// step and per epoch's evaluation far above what they take here (a step of this model is well
// under a millisecond on one core; 10 ms leaves room for 4 ranks sharing 2 cores and a slow stack).
constexpr double kBudgetFloorSeconds = 60, kBudgetPerStepSeconds = 0.01, kBudgetPerEpochSeconds = 0.5;

int64_t steps_of(const RunConfig& run, int64_t train_rows) {
  return run.batch > 0 ? static_cast<int64_t>(run.epochs) * (train_rows / run.batch) : 0;
}

// A run's result as text, for its group's leader to hand to rank 0: numbers exact and
// round-tripping inf and nan (std::to_chars / std::from_chars), one record per line.
std::string number(double value) {
  char text[64];
  const auto result = std::to_chars(text, text + sizeof(text), value);
  return std::string(text, result.ptr);
}

std::string serialize(const RunResult& r, const NoiseScale* noise) {
  std::string out;
  const auto line = [&](char tag, std::initializer_list<double> values) {
    out += tag;
    for (double v : values) out += ' ' + number(v);
    out += '\n';
  };
  for (const EpochResult& e : r.epochs) {
    line('E', {double(e.epoch), e.train_loss, e.held_out_loss, e.held_out_accuracy, e.lr_at_end, e.train_seconds,
               double(e.samples)});
  }
  line('F', {r.final_loss, r.final_accuracy, r.loss_stderr, r.accuracy_stderr, double(r.held_out_samples), r.seconds,
             double(r.steps), r.replicas_agree ? 1.0 : 0.0, r.losses_agree ? 1.0 : 0.0, r.diverged ? 1.0 : 0.0,
             double(r.replicated_states), double(r.loss_audited), r.one_process_model ? 1.0 : 0.0});
  if (noise) {
    line('G', {noise->b_simple, noise->g2, noise->trace_sigma, noise->g2_stderr, noise->trace_sigma_stderr,
               double(noise->b_small), double(noise->b_big), double(noise->samples)});
  }
  // Details last: free text, one line each.
  out += "R " + r.replica_detail + "\nL " + r.loss_detail + "\nD " + r.divergence_detail + "\n";
  return out;
}

// The numbers of one line ("E 1 0.5 inf ..."); Error when a field is not a number or the count
// differs (a garbled transfer must not turn into zeros).
std::vector<double> numbers_of(const std::string& line, size_t count) {
  std::vector<double> values;
  const char* at = line.data() + 1;
  const char* end = line.data() + line.size();
  while (at < end) {
    while (at < end && *at == ' ') ++at;
    if (at == end) break;
    double v = 0;
    const auto result = std::from_chars(at, end, v);
    if (result.ec != std::errc()) break;
    values.push_back(v);
    at = result.ptr;
  }
  if (values.size() != count) {
    throw Error(Error::Kind::backend, "convergence: a run's result came back garbled: '" + line.substr(0, 80) + "'");
  }
  return values;
}

void deserialize(const std::string& text, RunResult& r, NoiseScale& noise, bool& have_noise) {
  std::istringstream in(text);
  std::string line;
  r.epochs.clear();
  have_noise = false;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    switch (line[0]) {
      case 'E': {
        const auto v = numbers_of(line, 7);
        EpochResult e;
        e.epoch = static_cast<int>(v[0]);
        e.train_loss = v[1];
        e.held_out_loss = v[2];
        e.held_out_accuracy = v[3];
        e.lr_at_end = v[4];
        e.train_seconds = v[5];
        e.samples = static_cast<int64_t>(v[6]);
        r.epochs.push_back(e);
        break;
      }
      case 'F': {
        const auto v = numbers_of(line, 13);
        r.final_loss = v[0];
        r.final_accuracy = v[1];
        r.loss_stderr = v[2];
        r.accuracy_stderr = v[3];
        r.held_out_samples = static_cast<int64_t>(v[4]);
        r.seconds = v[5];
        r.steps = static_cast<int64_t>(v[6]);
        r.replicas_agree = v[7] != 0;
        r.losses_agree = v[8] != 0;
        r.diverged = v[9] != 0;
        r.replicated_states = static_cast<int>(v[10]);
        r.loss_audited = static_cast<int>(v[11]);
        r.one_process_model = v[12] != 0;
        break;
      }
      case 'G': {
        const auto v = numbers_of(line, 8);
        noise = {v[0], v[1], v[2], v[3], v[4], static_cast<int64_t>(v[5]), static_cast<int64_t>(v[6]), static_cast<int>(v[7])};
        have_noise = true;
        break;
      }
      case 'R': r.replica_detail = line.size() > 2 ? line.substr(2) : ""; break;
      case 'L': r.loss_detail = line.size() > 2 ? line.substr(2) : ""; break;
      case 'D': r.divergence_detail = line.size() > 2 ? line.substr(2) : ""; break;
      default: break;
    }
  }
}

// The synthetic set is sized like the digits (1,500 to train, 297 held out) and shaped for the
// same model (64 features, 10 classes), so every default applies to both.
ConvergenceData load_data(const std::string& data, const RunOptions& common) {
  if (data == "teacher-student") return teacher_student_data(digits_model(), 1500, kDigitsHeldOut);
  const std::string path = data == "digits" ? default_digits_path() : data;
  const std::string name = path == "-" ? "standard input" : path;
  return digits_data(parse_digits(common.read_shared_input(path, "--data file", digits_file_limits()), name), name);
}

// What layouts_of fills in for the digits model: its layers bound a pipeline, its width tp.
LayoutDefaults layout_defaults() {
  LayoutDefaults defaults;
  defaults.layers = digits_model().layers;
  defaults.width = digits_model().width;
  return defaults;
}

// "run=scaled-k8": what a row's series is called in the report and the CSV.
std::string run_label(const PlannedRun& p) {
  if (p.role == Role::base) return "base";
  if (p.role == Role::sweep) return "sweep-b" + std::to_string(p.config.batch) + "-lr" + format_number(p.config.lr, "%g");
  return (p.role == Role::control ? "control-k" : "scaled-k") + std::to_string(p.k);
}

class ConvergenceSuite final : public Suite {
 public:
  std::string_view name() const override { return "convergence"; }

  std::vector<Case> plan(const RunOptions& common) const override {
    const ConvergenceFlags& f = common.flags<ConvergenceFlags>();
    f.check_group_ranks(common.world_size);
    // The data is read here at set-up, once for the job (rank 0 reads, every rank parses the same
    // bytes), so a missing or damaged file stops the job with one line naming file and line
    // (exit 2) before anything runs.
    auto data = std::make_shared<const ConvergenceData>(load_data(f.data, common));
    const int64_t train_rows = data->train.size;
    RunConfig base = digits_base_run();
    if (f.epochs > 0) {
      // The step decay keeps its place in proportion (epoch 6 of 10).
      base.decay_epoch = std::max(1, static_cast<int>(std::lround(f.epochs * 0.6)));
      base.epochs = f.epochs;
    }
    if (f.base_batch > 0) base.batch = f.base_batch;
    if (f.base_lr > 0) base.lr = f.base_lr;
    base.shuffle_seed = common.seed * 7919 + 7;
    base.keep_parameters = true;

    ConvergenceCase c;
    const auto add = [&](RunConfig config, Role role, int k) {
      if (config.batch > train_rows) {
        throw Error(Error::Kind::invalid_argument, "convergence run " + config.name + ": a batch of " +
                                                       std::to_string(config.batch) + " rows exceeds the " +
                                                       std::to_string(train_rows) + " training samples of " + f.data);
      }
      if (role != Role::base) config.keep_parameters = false;
      c.runs.push_back({std::move(config), role, k});
    };
    if (!f.sweep.empty()) {
      for (const SweepPoint& p : f.sweep) {
        RunConfig run = base;
        run.batch = p.batch;
        run.lr = p.lr;
        run.keep_parameters = false;
        run.name = "sweep B=" + std::to_string(p.batch) + " lr=" + format_number(p.lr, "%g");
        add(run, Role::sweep, 1);
      }
    } else {
      add(base, Role::base, 1);
      const auto scaled = [&](int k) {
        RunConfig run = scaled_config(base, k, f.warmup_epochs);
        if (!f.scale_lr) {
          run.lr = base.lr;  // the rule broken on purpose: k B at eta
          run.warmup_start_lr = base.lr;
        }
        return run;
      };
      add(scaled(f.scale), Role::judged, f.scale);
      add(control_config(base, f.scale), Role::control, f.scale);
      for (int k : f.scan) {
        if (k == f.scale) continue;
        // A scan is info: a factor whose batch exceeds the training set is left out and said so.
        if (base.batch * k > train_rows) {
          c.left_out.push_back("k=" + std::to_string(k) + " (a batch of " + std::to_string(base.batch * k) +
                               " rows exceeds the " + std::to_string(train_rows) + " training samples)");
          continue;
        }
        add(scaled(k), Role::scan, k);
      }
      c.noise_scale = true;
    }
    int64_t steps = 0;
    for (const PlannedRun& p : c.runs) steps += steps_of(p.config, train_rows);
    c.data = data;
    // ddp unless --strategy names others: one case per strategy, each training every run. A
    // straggler lengthens each step by up to its factor.
    const TrainingFlags& t = common.flags<TrainingFlags>();
    std::vector<StrategySpec> strategies;
    for (const std::string& text : t.strategies) strategies.push_back(parse_strategy_spec(text));
    if (strategies.empty()) strategies.push_back(parse_strategy_spec("ddp"));
    // As the equivalence suite refuses them (TrainingFlags): a named strategy with no layout on
    // the groups' ranks, and a straggler outside them; here, before anything runs, not a SKIP.
    const int group_size = f.group_size_of(static_cast<int>(c.runs.size()), common.world_size);
    const std::string groups = "groups of " + std::to_string(group_size) + " ranks (--group-ranks)";
    for (const StrategySpec& strategy : strategies) {
      t.require_layout(strategy, layouts_of(strategy, group_size, layout_defaults()).size(), groups, group_size,
                       layout_defaults());
    }
    t.check_straggler(group_size, "the convergence groups'");
    const double slowdown = t.straggler_rank >= 0 ? t.straggler_factor : 1.0;
    std::vector<Case> cases;
    for (const StrategySpec& strategy : strategies) {
      Case the_case;
      the_case.id = f.sweep.empty() ? "rule/" + data->name + "/k" + std::to_string(f.scale) : "sweep/" + data->name;
      // ddp's ids as they were before strategies could be chosen, so that baselines still match.
      if (strategy.text != "ddp") the_case.id += "/" + strategy.text;
      c.strategy = strategy;
      the_case.labels.strategy = strategy.name;
      the_case.labels.dtype = "f32";
      the_case.time_budget_seconds = std::max(common.timeout_seconds, kBudgetFloorSeconds) +
                                     kBudgetPerStepSeconds * slowdown * static_cast<double>(steps) +
                                     kBudgetPerEpochSeconds * static_cast<double>(c.runs.size() * base.epochs);
      the_case.params = c;
      cases.push_back(std::move(the_case));
    }
    return cases;
  }

  void run(const Case& the_case, RunContext& ctx) override {
    const auto& c = std::any_cast<const ConvergenceCase&>(the_case.params);
    const RunOptions& common = ctx.options();
    const ConvergenceFlags& f = common.flags<ConvergenceFlags>();
    Communicator& comm = ctx.comm();
    Communicator& control = ctx.control();
    const int rank = control.rank(), world = control.size();
    const ConvergenceData& data = *c.data;
    const ModelSpec model = digits_model();

    // Disjoint groups of ranks, each training one run at a time: groups of at least 2 ranks (so
    // every run goes through the stack's collectives), as many as the runs can use.
    const int runs = static_cast<int>(c.runs.size());
    f.check_group_ranks(world);  // plan refused it already; a group of no ranks would never end
    const int group_size = f.group_size_of(runs, world);
    const int groups = world / group_size;
    const int my_group = rank / group_size < groups ? rank / group_size : -1;  // -1: the ranks left over wait
    std::unique_ptr<Communicator> group = comm.split(my_group < 0 ? groups : my_group, rank);
    std::unique_ptr<Communicator> group_control = control.split(my_group < 0 ? groups : my_group, rank);
    // Who took part, as the rows say it: the ranks of one run (group 0's; the groups are alike).
    const RunContext::Participants who = ctx.participants(my_group == 0);
    // The strategy's first layout of a group's ranks (pinned keys choose another), with the
    // straggler: SKIP, on every rank alike, where there is none.
    const TrainingFlags& t = common.flags<TrainingFlags>();
    const LayoutDefaults defaults = layout_defaults();
    const std::vector<ParallelConfig> layouts = layouts_of(c.strategy, group_size, defaults);
    if (layouts.empty()) {
      throw Error(Error::Kind::unsupported, "convergence with " + c.strategy.text + " on groups of " +
                                                std::to_string(group_size) + " ranks: " +
                                                why_no_layout(c.strategy, group_size, defaults));
    }
    ParallelConfig layout = layouts.front();
    layout.straggler_rank = t.straggler_rank;
    layout.straggler_factor = t.straggler_factor;

    std::vector<RunResult> results(c.runs.size());
    std::vector<NoiseScale> noise(c.runs.size());
    std::vector<bool> have_noise(c.runs.size(), false);
    for (int wave = 0; wave * groups < runs; ++wave) {
      std::string mine;  // this group's result, on its leader
      std::exception_ptr failure;
      const int index = wave * groups + my_group;
      if (my_group >= 0 && index < runs) try {
        const PlannedRun& p = c.runs[static_cast<size_t>(index)];
        RunConfig config = p.config;
        config.strategy = c.strategy.name;
        config.layout = layout;
        RunResult r = train_run(*group, *group_control, model, data, config);
        NoiseScale ns;
        // Two batch sizes are needed: a base batch of half the training set or more has no larger one.
        const bool measure = c.noise_scale && p.role == Role::base && group->rank() == 0 &&
                             std::min<int64_t>(p.config.batch * kNoiseScaleBigFactor, data.train.size) > p.config.batch;
        if (measure) ns = noise_scale_of(model, data, p.config, r);
        if (group->rank() == 0) mine = serialize(r, measure ? &ns : nullptr);
      } catch (...) {
        failure = std::current_exception();
      }
      leave_together(control, failure);
      // Each group's leader hands its result to rank 0.
      for (int g = 0; g < groups && wave * groups + g < runs; ++g) {
        const std::string text = text_to_root(control, g * group_size, mine);
        if (rank != 0) continue;
        const size_t i = static_cast<size_t>(wave * groups + g);
        bool noisy = false;
        deserialize(text, results[i], noise[i], noisy);
        results[i].config = c.runs[i].config;
        have_noise[i] = noisy;
      }
    }
    if (rank != 0) return;
    emit_rows(the_case, c, results, noise, have_noise, who, group_size, groups, layout, ctx);
  }

 private:
  // B_simple on the base run at the end of its constant-lr phase (the decay epoch, else the last):
  // the largest batch the rule can be expected to hold is set by the noise there (after the decay
  // |G|^2 falls within its own standard error; trainer.h).
  static NoiseScale noise_scale_of(const ModelSpec& model, const ConvergenceData& data, const RunConfig& base,
                                   const RunResult& r) {
    const int at = base.decay_epoch > 0 ? std::min(base.decay_epoch, base.epochs) : base.epochs;
    const std::vector<double>* params = nullptr;
    for (const EpochResult& e : r.epochs) {
      if (e.epoch == at && !e.parameters.empty()) params = &e.parameters;
    }
    if (!params) params = &r.final_parameters;
    const int64_t big = std::min<int64_t>(base.batch * kNoiseScaleBigFactor, data.train.size);
    return estimate_noise_scale(model, data.train, *params, base.batch, big, kNoiseScaleSamples, base.shuffle_seed + 1);
  }

  // time_to_target and samples_to_target: the run's training seconds and samples up to the end of
  // the first epoch whose held-out accuracy reached the target (resolution: one epoch), set
  // against the base run's; a SKIP row where it never did.
  template <class Row>
  static void emit_target(const PlannedRun& p, const RunResult& r, const RunResult* base, double target,
                          const Row& row, RunContext& ctx) {
    const auto reached = [target](const RunResult& run) -> const EpochResult* {
      for (const EpochResult& e : run.epochs) {
        if (e.held_out_accuracy >= target) return &e;
      }
      return nullptr;
    };
    const std::string goal = "held-out accuracy " + format_number(target, "%g");
    const EpochResult* at = reached(r);
    if (!at) {
      double best = 0;
      for (const EpochResult& e : r.epochs) best = std::max(best, e.held_out_accuracy);
      for (const char* metric : {"time_to_target", "samples_to_target"}) {
        Record skip = row(p, metric, metric[0] == 't' ? "seconds" : "samples", 0);
        skip.verdict = Verdict::skip;
        skip.detail = goal + " not reached in " + std::to_string(r.epochs.size()) + " epochs (best " +
                      format_number(best, "%.4f") + "; --target-accuracy)";
        ctx.emit(skip);
      }
      return;
    }
    const EpochResult* base_at = base ? reached(*base) : nullptr;
    const auto versus = [&](double mine, double theirs) {
      if (!base_at || base == &r) return std::string();
      return "; x" + format_number(mine / theirs, "%.3g") + " the base run's (" + format_number(theirs, "%g") + ")";
    };
    const std::string where = goal + " first reached after epoch " + std::to_string(at->epoch) + " (accuracy " +
                              format_number(at->held_out_accuracy, "%.4f") + "; resolution one epoch)";
    Record time = row(p, "time_to_target", "seconds", at->train_seconds);
    time.detail = where + ": seconds of training steps, the slowest rank's, evaluation left out" +
                  versus(at->train_seconds, base_at ? base_at->train_seconds : 0);
    ctx.emit(time);
    Record samples = row(p, "samples_to_target", "samples", static_cast<double>(at->samples));
    samples.detail = where + ": samples of the global batches stepped" +
                     versus(static_cast<double>(at->samples), base_at ? static_cast<double>(base_at->samples) : 0);
    ctx.emit(samples);
  }

  static void emit_rows(const Case& the_case, const ConvergenceCase& c, const std::vector<RunResult>& results,
                        const std::vector<NoiseScale>& noise, const std::vector<bool>& have_noise,
                        const RunContext::Participants& who, int group_size, int groups, const ParallelConfig& layout,
                        RunContext& ctx) {
    const RunOptions& common = ctx.options();
    const ConvergenceFlags& f = common.flags<ConvergenceFlags>();
    // ddp's rows as they were before strategies could be chosen (dp= names its layout); another
    // strategy's name its layout, and a straggler is named where the layout has it.
    std::string job = ";job=" + std::to_string(common.world_size);
    if (c.strategy.name != "ddp") job += ";layout=" + layout_id(c.strategy, layout);
    if (layout.has_straggler()) {
      job += ";straggler=" + std::to_string(layout.straggler_rank) + ":" + format_number(layout.straggler_factor, "%g");
    }
    const std::string budget = format_number(the_case.time_budget_seconds, "%g");
    const auto row = [&](const PlannedRun& p, const std::string& metric, const std::string& unit, double value) {
      Record r;
      r.suite = "convergence";
      r.case_id = the_case.id;
      r.labels = the_case.labels;
      r.labels.world_size = who.world_size;  // the ranks each run trained on
      r.labels.nodes = who.nodes;
      r.labels.ranks_per_node = who.ranks_per_node;
      r.labels.config = "run=" + run_label(p) + ";batch=" + std::to_string(p.config.batch) +
                        ";lr=" + format_number(p.config.lr, "%g") +
                        ";warmup_epochs=" + format_number(p.config.warmup_epochs, "%g") +
                        ";epochs=" + std::to_string(p.config.epochs) + ";dp=" + std::to_string(group_size) +
                        ";groups=" + std::to_string(groups) + job + ";budget=" + budget + "s";
      r.metric = metric;
      r.unit = unit;
      r.value = value;
      r.verdict = Verdict::info;
      return r;
    };

    const RunResult* base = nullptr;
    for (size_t i = 0; i < c.runs.size(); ++i) {
      if (c.runs[i].role == Role::base) base = &results[i];
    }
    int largest_k_held = base ? 1 : 0;
    std::vector<std::pair<int, bool>> held;  // (k, rule held) of every scaled run
    for (size_t i = 0; i < c.runs.size(); ++i) {
      const PlannedRun& p = c.runs[i];
      const RunResult& r = results[i];
      for (const EpochResult& e : r.epochs) {
        for (const auto& [metric, unit, value] :
             {std::tuple<const char*, const char*, double>{"loss", "", e.held_out_loss},
              {"accuracy", "ratio", e.held_out_accuracy}, {"train_loss", "", e.train_loss}}) {
          Record rec = row(p, metric, unit, value);
          rec.labels.config += ";epoch=" + std::to_string(e.epoch);
          rec.detail = std::string(metric == std::string("train_loss") ? "mean loss of the epoch's steps" : "held-out") +
                       ", lr at the epoch's end " + format_number(e.lr_at_end, "%g");
          ctx.emit(rec);
        }
      }
      Record acc = row(p, "final_accuracy", "ratio", r.final_accuracy);
      acc.detail = "held-out accuracy after " + std::to_string(p.config.epochs) + " epochs, " +
                   std::to_string(r.held_out_samples) + " samples, standard error " +
                   format_number(r.accuracy_stderr, "%g") + "; " + std::to_string(r.steps) + " steps in " +
                   format_number(r.seconds, "%g") + " s";
      ctx.emit(acc);
      Record loss = row(p, "final_loss", "", r.final_loss);
      loss.detail = "held-out loss, standard error " + format_number(r.loss_stderr, "%g");
      ctx.emit(loss);
      // A diverged run is an outcome of its configuration, not of the stack: info here, and the
      // judged scaled run's rule_held fails on it below.
      if (r.diverged) {
        Record diverged = row(p, "diverged", "", 1);
        diverged.detail = r.config.name + " " + r.divergence_detail;
        ctx.emit(diverged);
      }

      // The stack kept the run sound: replicas alike, losses as computed. Every run, every role.
      const RuleVerdict sound = judge_integrity(r);
      Record integrity = row(p, "check", "", sound.pass ? 1 : 0);
      integrity.verdict = !sound.pass ? Verdict::fail : sound.judged ? Verdict::pass : Verdict::info;
      integrity.detail = "replicas alike and losses as computed: " + sound.detail +
                         (sound.judged ? "" : " (nothing to compare: " + std::string(c.strategy.name) +
                                                  " holds no state on two ranks and no rank reports the batch's "
                                                  "loss; the equivalence suite's replay audit judges it)");
      ctx.emit(integrity);
      emit_target(p, r, base, f.target_accuracy, row, ctx);

      if (!base || p.role == Role::base || p.role == Role::sweep) continue;
      const RuleVerdict rule = judge_rule(*base, r);
      Record verdict = row(p, "rule_held", "", rule.pass ? 1 : 0);
      verdict.threshold = 1;
      if (p.role == Role::judged && !r.one_process_model) {
        // The rule is a statement about synchronous SGD: an asynchronous server applies each
        // worker's gradient as its own update, gossip trains a model per rank. Measured, not judged.
        verdict.detail = "not judged: " + std::string(c.strategy.name) +
                         " does not train the model one process would, and the rule is a statement about "
                         "synchronous SGD; at k=" + std::to_string(p.k) + ": " + rule.detail;
      } else if (p.role == Role::judged) {
        verdict.verdict = rule.pass ? Verdict::pass : Verdict::fail;
        verdict.detail = "linear scaling rule at k=" + std::to_string(p.k) + " (batch " + std::to_string(p.config.batch) +
                         ", lr " + format_number(p.config.lr, "%g") + ", warm-up " +
                         format_number(p.config.warmup_epochs, "%g") + " epochs): " + rule.detail;
      } else if (p.role == Role::control) {
        // The control is expected to miss: that it does shows the rule (and warm-up) mattered at k.
        verdict.detail = std::string(base->diverged ? "the control was not judged: "
                                     : rule.pass    ? "the rule was not needed at this k (the control held too): "
                                                    : "the rule was needed at this k (the control missed): ") +
                         rule.detail;
      } else {
        verdict.detail = "scan at k=" + std::to_string(p.k) + ": " + rule.detail;
      }
      ctx.emit(verdict);
      if (p.role != Role::control) held.emplace_back(p.k, rule.pass);
    }
    // The largest k below which every scaled run held: where large-batch training stops paying
    // (none when the base run itself diverged).
    if (base && base->diverged) largest_k_held = 0;
    std::sort(held.begin(), held.end());
    for (const auto& [k, ok] : held) {
      if (!ok) break;
      largest_k_held = k;
    }
    // What was asked for and not measured, said in a skip row rather than left out silently.
    const auto skipped = [&](const PlannedRun& p, const std::string& metric, const std::string& why) {
      Record r = row(p, metric, "", 0);
      r.verdict = Verdict::skip;
      r.detail = why;
      ctx.emit(r);
    };
    for (const std::string& why : c.left_out) {
      skipped(c.runs.front(), "rule_held", "scan left out: " + why);
    }
    for (size_t i = 0; i < c.runs.size(); ++i) {
      if (c.noise_scale && c.runs[i].role == Role::base && !have_noise[i]) {
        skipped(c.runs[i], "gradient_noise_scale",
                "not measured: a base batch of " + std::to_string(c.runs[i].config.batch) +
                    " rows leaves no larger batch in the training set to set against it");
      }
      if (!have_noise[i]) continue;
      const NoiseScale& ns = noise[i];
      Record g = row(c.runs[i], "gradient_noise_scale", "samples", ns.b_simple);
      g.labels.config += ";largest_k_held=" + std::to_string(largest_k_held) +
                         ";largest_batch_held=" + std::to_string(largest_k_held * c.runs[i].config.batch);
      g.detail = "B_simple = tr(Sigma)/|G|^2 (McCandlish et al. 2018) on the base run's parameters, from " +
                 std::to_string(ns.samples) + " pairs of batches of " + std::to_string(ns.b_small) + " and " +
                 std::to_string(ns.b_big) + " rows; " +
                 (results[i].diverged ? std::string("the base run diverged, so the rule held at no k")
                                      : std::string(results[i].one_process_model ? "the rule held"
                                                                                 : "the rule (measured, not judged: " +
                                                                                       std::string(c.strategy.name) +
                                                                                       " does not train one process's "
                                                                                       "model) held") +
                                            " up to k=" + std::to_string(largest_k_held) + " (batch " +
                                            std::to_string(largest_k_held * c.runs[i].config.batch) + ")");
      ctx.emit(g);
    }
  }
};

SuiteInfo convergence_info() {
  SuiteInfo info;
  info.name = "convergence";
  info.summary = "the linear scaling rule with warm-up (Goyal et al.) through DDP on the stack: base, scaled and "
                 "control runs on the digits, gradient noise scale";
  info.metrics = {
      {"loss", "", "held-out loss after an epoch (epoch= in config)"},
      {"accuracy", "ratio", "held-out accuracy after an epoch (epoch= in config)"},
      {"train_loss", "", "mean loss of an epoch's steps"},
      {"final_loss", "", "held-out loss after the last epoch"},
      {"final_accuracy", "ratio", "held-out accuracy after the last epoch"},
      {"rule_held", "", "1 when a scaled run is within tolerance of the base run"},
      {"diverged", "", "1: the run's loss or parameters became non-finite (where, in the detail)"},
      {"gradient_noise_scale", "samples", "B_simple = tr(Sigma)/|G|^2 on the base run"},
      {"time_to_target", "seconds", "training seconds until held-out accuracy first reached --target-accuracy"},
      {"samples_to_target", "samples", "samples trained until held-out accuracy first reached --target-accuracy"},
  };
  PlotSpec loss;
  loss.metric = "loss";
  loss.x = PlotSpec::X::config;
  loss.x_key = "epoch";
  loss.series = {"strategy", "layout", "run"};  // ddp/base, ps-sync/s1-w3/base, ps-sync/s2-w2/base, ...
  loss.id = "convergence-loss";
  loss.title = "Held-out loss per epoch";
  loss.x_label = "epoch";
  loss.y_label = "loss";
  PlotSpec accuracy = loss;
  accuracy.metric = "accuracy";
  accuracy.id = "convergence-accuracy";
  accuracy.title = "Held-out accuracy per epoch";
  accuracy.y_label = "accuracy (ratio)";
  info.sections = {{50, "convergence", "Convergence",
                    "Held-out loss and accuracy per epoch of the base run (B, eta), the scaled runs (kB, k eta, "
                    "gradual warm-up) and the control (kB, eta, no warm-up), trained on the stack by each strategy "
                    "(ddp unless --strategy named others).",
                    "No loss or accuracy rows per epoch in these results (the convergence suite did not run).",
                    {loss, accuracy}}};
  return info;
}

}  // namespace

DTS_REGISTER_SUITE(ConvergenceSuite, convergence_info());

}  // namespace dts
