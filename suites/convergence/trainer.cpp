// The convergence suite's trainer (trainer.h): DDP epochs over shuffled data on the stack under
// test, with the per-epoch evaluation and soundness checks on an untampered communicator, and the
// statistics that judge the linear scaling rule and estimate the gradient noise scale.
#include "suites/convergence/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"
#include "kernels/cpu/cpu_kernels.h"
#include "strategies/mlp.h"

namespace dts {

namespace cpu = kernels::cpu;

namespace {

// Philox streams of the permutations and of the noise-scale draws: distinct, so one seed may key both.
constexpr uint64_t kShuffleStream = uint64_t{0x5348} << 32;     // + epoch
constexpr uint64_t kNoiseScaleStream = uint64_t{0x4e53} << 32;  // + pair

std::string formatted(const char* pattern, auto... values) {
  char line[512];
  std::snprintf(line, sizeof line, pattern, values...);
  return line;
}

// Rows order[first, first + count) of `data` as one batch, in that order.
Batch gather_rows(const Batch& data, const std::vector<int64_t>& order, int64_t first, int64_t count) {
  const int64_t features = static_cast<int64_t>(data.x.size()) / data.size;
  Batch batch;
  batch.size = count;
  batch.x.resize(static_cast<size_t>(count * features));
  batch.labels.resize(static_cast<size_t>(count));
  for (int64_t r = 0; r < count; ++r) {
    const int64_t row = order[static_cast<size_t>(first + r)];
    std::copy_n(data.x.begin() + row * features, features, batch.x.begin() + r * features);
    batch.labels[static_cast<size_t>(r)] = data.labels[static_cast<size_t>(row)];
  }
  return batch;
}

// Fisher-Yates on Philox: a pure function of (seed, epoch), so every rank cuts the same batches.
std::vector<int64_t> permutation(int64_t n, uint64_t seed, int epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  for (int64_t i = n - 1; i > 0; --i) {
    // Modulo bias of a 64-bit draw over at most 2^31 rows: below 2^-33, far under any statistic here.
    const auto j = static_cast<int64_t>(philox_bits(seed, kShuffleStream + static_cast<uint64_t>(epoch),
                                                    static_cast<uint64_t>(i)) %
                                        static_cast<uint64_t>(i + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

// The batch's mean loss at `parameters` as the strategy computes it (same element type and
// compute mode), in one piece rather than in the ranks' shards.
double loss_as_trained(const ModelSpec& spec, Precision precision, const std::vector<double>& parameters,
                       const Batch& batch) {
  if (precision == Precision::f64) return Mlp<double>(spec).loss(parameters.data(), batch);
  const std::vector<float> narrow(parameters.begin(), parameters.end());  // exact: the strategy's floats
  return Mlp<float>(spec, compute_of(precision)).loss(narrow.data(), batch);
}

// How far the stack's reported loss may be from loss_as_trained, relative to max(1, |loss|). Both
// are the same per-row losses (the stack sums shard means x rows, then divides): only where the
// GEMM library blocks rows differently may a logit's K = fan-in products be summed in another
// order, moving it by at most K u sum|w a| and a row's loss by twice that. At these models'
// widths (K <= 64, sum|w a| = O(10)): 2 * 64 * 10 * u, about 1e-13 in f64 (u = 2^-53) and 8e-5
// in f32 (u = 2^-24); in bf16 such a logit may round to another bf16 value, up to 2^-8 of a logit
// of O(10): 0.08. Each bound with a margin of ten or more; a rank whose loss is lost moves the mean
// by about 1/n of the loss (ln 10 / n at the start, 0.58 at n = 4).
double loss_audit_tolerance(Precision precision) {
  switch (precision) {
    case Precision::f64: return 1e-9;
    case Precision::f32: return 1e-3;
    case Precision::bf16: return 0.1;
  }
  return 0;
}

// What each rank reports after an epoch, gathered over the control communicator. The last three
// are this rank's first signs of divergence so far: the global step whose reported loss was not
// finite (-1: none) and that loss, and the first epoch after which its parameters were not (0: none).
// kAudits: 1 where the rank's strategy reports the batch's loss (the audit judges it); kSeconds:
// the rank's seconds of steps so far.
enum EpochField : size_t {
  kTrainLoss, kHeldOutLoss, kAccuracy, kLossStderr, kAccuracyStderr, kReportedLoss, kAuditedLoss,
  kNonFiniteStep, kNonFiniteLoss, kNonFiniteParametersEpoch, kAudits, kSeconds, kFieldCount
};

// A non-finite value by its kind only ("NaN" whatever its sign or payload, "+inf", "-inf").
const char* non_finite_name(double v) { return std::isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf"; }

}  // namespace

ConvergenceData digits_data(const std::string& path, int64_t held_out) {
  return digits_data(load_digits(path), path, held_out);
}

ConvergenceData digits_data(const LabeledData& all, const std::string& name, int64_t held_out) {
  if (held_out <= 0 || held_out >= all.samples) {
    throw Error(Error::Kind::invalid_argument,
                name + ": " + std::to_string(all.samples) + " samples; holding out the last " +
                    std::to_string(held_out) + " to judge on needs at least " + std::to_string(held_out + 1) +
                    " (one or more to train on)");
  }
  const int64_t train = all.samples - held_out;
  return {"digits", all.features, all.classes, batch_of(all, 0, train), batch_of(all, train, held_out)};
}

ConvergenceData teacher_student_data(const ModelSpec& spec, int64_t train, int64_t held_out) {
  if (train <= 0 || held_out <= 0) {
    throw Error(Error::Kind::invalid_argument, "teacher_student_data: train and held_out must be > 0");
  }
  return {"teacher-student", spec.input, spec.classes, make_batch(spec, 0, train), make_batch(spec, train, held_out)};
}

RunConfig scaled_config(const RunConfig& base, int k, double warmup_epochs) {
  RunConfig run = base;
  run.name = "scaled k=" + std::to_string(k);
  run.batch = base.batch * k;
  run.lr = base.lr * k;
  run.warmup_epochs = warmup_epochs;
  run.warmup_start_lr = base.lr;  // Goyal et al.: from eta to k eta
  return run;
}

RunConfig control_config(const RunConfig& base, int k) {
  RunConfig run = base;
  run.name = "control k=" + std::to_string(k);
  run.batch = base.batch * k;
  run.warmup_epochs = 0;
  return run;
}

double learning_rate_at(const RunConfig& run, int64_t step, int64_t steps_per_epoch) {
  if (steps_per_epoch < 1 || step < 0) {
    throw Error(Error::Kind::invalid_argument, "learning_rate_at: needs step >= 0 and steps_per_epoch >= 1");
  }
  const auto warmup_steps = std::llround(run.warmup_epochs * static_cast<double>(steps_per_epoch));
  double lr = run.lr;
  if (step < warmup_steps) {
    lr = run.warmup_start_lr +
         (run.lr - run.warmup_start_lr) * static_cast<double>(step) / static_cast<double>(warmup_steps);
  }
  if (run.decay_epoch > 0 && step / steps_per_epoch >= run.decay_epoch) lr *= run.decay_factor;
  return lr;
}

Evaluation evaluate(const ModelSpec& spec, const std::vector<double>& parameters, const Batch& data) {
  const std::vector<int64_t> dims = layer_dims(spec);
  const std::vector<ParameterInfo> layout = parameter_layout(spec);
  const int64_t rows = data.size, classes = dims.back();
  if (static_cast<int64_t>(parameters.size()) != parameter_count(spec)) {
    throw Error(Error::Kind::invalid_argument, "evaluate: parameters do not match the model");
  }
  if (rows < 1 || static_cast<int64_t>(data.x.size()) != rows * dims[0]) {
    throw Error(Error::Kind::invalid_argument, "evaluate: needs a non-empty set of the model's input size");
  }
  // Mlp's forward (strategies/mlp.cpp) with the same kernels, keeping each row's logits.
  std::vector<double> a = data.x;
  std::vector<double> z;
  for (int l = 0; l < spec.layers; ++l) {
    const auto ul = static_cast<size_t>(l);
    const int64_t in = dims[ul], out = dims[ul + 1];
    const double* w = parameters.data() + layout[2 * ul].offset;
    const double* b = parameters.data() + layout[2 * ul + 1].offset;
    z.assign(static_cast<size_t>(rows * out), 0.0);
    cpu::gemm<double>({false, true, rows, out, in, in, in, out}, 1.0, a.data(), w, 0.0, z.data());
    if (l + 1 < spec.layers) {
      std::vector<double> pre(z.size()), next(z.size());
      cpu::bias_gelu_forward<double>(z.data(), b, pre.data(), next.data(), rows, out);
      a.swap(next);
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < out; ++c) z[static_cast<size_t>(r * out + c)] += b[c];
      }
    }
  }
  std::vector<double> losses(static_cast<size_t>(rows)), scratch(static_cast<size_t>(classes));
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double* logits = z.data() + r * classes;
    const int32_t label = data.labels[static_cast<size_t>(r)];
    losses[static_cast<size_t>(r)] = cpu::softmax_cross_entropy<double>(logits, &label, scratch.data(), 1, classes);
    if (std::max_element(logits, logits + classes) - logits == label) ++correct;
  }
  Evaluation e;
  e.samples = rows;
  const auto n = static_cast<double>(rows);
  e.loss = std::accumulate(losses.begin(), losses.end(), 0.0) / n;
  e.accuracy = static_cast<double>(correct) / n;
  if (rows > 1) {
    double squares = 0;
    for (double v : losses) squares += (v - e.loss) * (v - e.loss);
    e.loss_stderr = std::sqrt(squares / (n - 1)) / std::sqrt(n);
  }
  e.accuracy_stderr = std::sqrt(e.accuracy * (1 - e.accuracy) / n);
  return e;
}

RunResult train_run(Communicator& comm, Communicator& control, const ModelSpec& spec, const ConvergenceData& data,
                    const RunConfig& run, Precision precision) {
  const auto start = std::chrono::steady_clock::now();
  const int n = comm.size(), rank = comm.rank();
  const auto refuse = [&](const std::string& why) {
    return Error(Error::Kind::invalid_argument, "convergence run '" + run.name + "': " + why);
  };
  if (control.size() != n || control.rank() != rank) throw refuse("control must hold the same ranks as the stack");
  if (data.features != spec.input || data.classes != spec.classes) {
    throw refuse("model " + std::to_string(spec.input) + " -> " + std::to_string(spec.classes) + " does not fit " +
                 data.name + " (" + std::to_string(data.features) + " features, " + std::to_string(data.classes) +
                 " classes)");
  }
  if (data.train.size < 1 || data.held_out.size < 1) throw refuse("empty training or held-out set");
  if (run.batch < n || run.batch > data.train.size) {
    throw refuse("batch " + std::to_string(run.batch) + " must give each of " + std::to_string(n) +
                 " ranks a row and fit in " + std::to_string(data.train.size) + " training rows");
  }
  if (run.epochs < 1 || run.warmup_epochs < 0 || !(run.lr >= 0)) throw refuse("needs epochs >= 1, warm-up >= 0, lr >= 0");
  ParallelConfig config;
  if (run.layout) {
    config = *run.layout;
  } else {
    config.dp = n;
  }
  config.train = run.train;
  if (config.world() != n) {
    throw refuse(run.strategy + "'s layout " + config.describe() + " holds " + std::to_string(config.world()) +
                 " ranks, not the run's " + std::to_string(n));
  }

  ProcessGroups groups = ProcessGroups::split(comm, config);
  const std::unique_ptr<Strategy> strategy = make_strategy(run.strategy, spec, config, groups, precision);
  // Refused here, on every rank alike, before a step: a strategy without a schedule throws unsupported.
  strategy->set_learning_rate(learning_rate_at(run, 0, std::max<int64_t>(1, data.train.size / run.batch)));
  const bool audits_loss = strategy->reports_batch_loss();

  RunResult result;
  result.config = run;
  result.one_process_model = strategy->same_model_as_one_process();
  const int64_t steps_per_epoch = data.train.size / run.batch;
  const double audit_tolerance = loss_audit_tolerance(precision);
  std::vector<double> mine(kFieldCount), all(kFieldCount * static_cast<size_t>(n));
  // The parameters every step of an epoch starts from: the last epoch's end (collective, on every
  // rank alike, for a strategy that shards them: read once, not again before the audit).
  std::vector<double> parameters = strategy->full_parameters();
  int64_t non_finite_step = -1;  // this rank's first step with a non-finite reported loss
  double non_finite_loss = 0;
  int non_finite_parameters_epoch = 0;
  double train_seconds = 0;  // this rank's, of steps only
  for (int epoch = 0; epoch < run.epochs; ++epoch) {
    const std::vector<int64_t> order = permutation(data.train.size, run.shuffle_seed, epoch);
    double loss_sum = 0, lr = 0, reported = 0, audited = 0;
    for (int64_t s = 0; s < steps_per_epoch; ++s) {
      const int64_t step = epoch * steps_per_epoch + s;
      lr = learning_rate_at(run, step, steps_per_epoch);
      strategy->set_learning_rate(lr);
      const Batch batch = gather_rows(data.train, order, s * run.batch, run.batch);
      // Once an epoch (a forward of one batch: cheap next to the epoch), the loss the stack will
      // report is computed here first, from this replica alone.
      if (s == 0 && audits_loss) audited = loss_as_trained(spec, precision, parameters, batch);
      const auto step_start = std::chrono::steady_clock::now();
      const StepReport report = strategy->step(batch);
      train_seconds += seconds_since(step_start);
      if (s == 0) reported = report.loss;
      if (non_finite_step < 0 && !std::isfinite(report.loss)) {
        non_finite_step = step;
        non_finite_loss = report.loss;
      }
      loss_sum += report.loss;
      ++result.steps;
    }
    parameters = strategy->full_parameters();
    if (non_finite_parameters_epoch == 0 &&
        !std::all_of(parameters.begin(), parameters.end(), [](double p) { return std::isfinite(p); })) {
      non_finite_parameters_epoch = epoch + 1;
    }
    const Evaluation e = evaluate(spec, parameters, data.held_out);
    mine = {loss_sum / static_cast<double>(steps_per_epoch), e.loss, e.accuracy, e.loss_stderr, e.accuracy_stderr,
            reported, audited, static_cast<double>(non_finite_step), non_finite_loss,
            static_cast<double>(non_finite_parameters_epoch), audits_loss ? 1.0 : 0.0, train_seconds};
    control.all_gather(mine.data(), all.data(), kFieldCount, DType::f64);
    const ReplicaComparison replicas = compare_replicas(control, strategy->replica_digests());
    result.replicated_states = std::max(result.replicated_states, replicas.compared);
    const auto field = [&](int r, EpochField f) { return all[static_cast<size_t>(r) * kFieldCount + f]; };

    EpochResult er;
    er.epoch = epoch + 1;
    er.train_loss = field(0, kTrainLoss);
    er.held_out_loss = field(0, kHeldOutLoss);
    er.held_out_accuracy = field(0, kAccuracy);
    er.lr_at_end = lr;
    er.samples = result.steps * run.batch;
    for (int r = 0; r < n; ++r) er.train_seconds = std::max(er.train_seconds, field(r, kSeconds));
    if (result.replicas_agree && replicas.mismatches > 0) {
      result.replicas_agree = false;
      result.replica_detail = formatted(
          "after epoch %d, %s (a replicated state: parameters, gradients, optimizer state, a server's range)",
          er.epoch, replicas.first.c_str());
    }
    if (epoch == 0) {
      for (int r = 0; r < n; ++r) result.loss_audited += field(r, kAudits) != 0;
    }
    for (int r = 0; r < n && result.losses_agree; ++r) {
      if (field(r, kAudits) == 0) continue;
      const double got = field(r, kReportedLoss), want = field(r, kAuditedLoss);
      if (reported_loss_matches(got, want, audit_tolerance)) continue;
      result.losses_agree = false;
      result.loss_detail = formatted(
          "epoch %d, rank %d: the stack reported a mean loss of %.6g for the epoch's first batch, whose loss at "
          "the replica's parameters is %.6g",
          er.epoch, r, got, want);
    }
    // Diverged once every rank shows it (on a sound stack all do at the same step): one rank's
    // non-finite loss alone is a stack's fault, which the audit above names.
    bool every_rank = true, every_loss = true;
    int64_t by_step = -1;
    double loss_there = 0;
    for (int r = 0; r < n; ++r) {
      const auto step = static_cast<int64_t>(field(r, kNonFiniteStep));
      every_loss = every_loss && step >= 0;
      every_rank = every_rank && (step >= 0 || field(r, kNonFiniteParametersEpoch) > 0);
      if (step > by_step) {
        by_step = step;
        loss_there = field(r, kNonFiniteLoss);
      }
    }
    if (!result.diverged && every_rank) {
      result.diverged = true;
      if (every_loss) {
        result.divergence_detail = formatted(
            "diverged at epoch %d, step %lld of %lld (lr %g): the reported loss became %s",
            static_cast<int>(by_step / steps_per_epoch) + 1, static_cast<long long>(by_step % steps_per_epoch + 1),
            static_cast<long long>(steps_per_epoch), learning_rate_at(run, by_step, steps_per_epoch),
            non_finite_name(loss_there));
      } else {
        result.divergence_detail = formatted(
            "diverged in epoch %d (lr %g at its end): the replica's parameters became non-finite", er.epoch, lr);
      }
    }
    const bool last = epoch + 1 == run.epochs;
    if (run.keep_parameters || last) {
      // Rank 0's, so that every rank returns the same result even when replicas differ (a copy:
      // the next epoch's loss audit starts from this rank's own).
      std::vector<double> rank0 = parameters;
      control.broadcast(rank0.data(), rank0.data(), rank0.size(), DType::f64, 0);
      if (run.keep_parameters) er.parameters = rank0;
      if (last) result.final_parameters = std::move(rank0);
    }
    if (last) {
      result.final_loss = field(0, kHeldOutLoss);
      result.final_accuracy = field(0, kAccuracy);
      result.loss_stderr = field(0, kLossStderr);
      result.accuracy_stderr = field(0, kAccuracyStderr);
      result.held_out_samples = data.held_out.size;
    }
    result.epochs.push_back(std::move(er));
  }
  result.seconds = seconds_since(start);
  control.broadcast(&result.seconds, &result.seconds, 1, DType::f64, 0);
  return result;
}

bool reported_loss_matches(double reported, double computed, double tolerance) {
  if (!std::isfinite(reported) || !std::isfinite(computed)) return !std::isfinite(reported) && !std::isfinite(computed);
  return std::fabs(reported - computed) <= tolerance * std::max(1.0, std::fabs(computed));
}

double agreement_tolerance(double se_a, double se_b, double z) { return z * std::sqrt(se_a * se_a + se_b * se_b); }

RuleVerdict judge_rule(const RunResult& base, const RunResult& scaled) {
  if (base.diverged || scaled.diverged) {
    // Standard errors of NaN say nothing: the divergence is the verdict's reason.
    RuleVerdict verdict;
    verdict.detail = base.diverged
                         ? scaled.config.name + " vs " + base.config.name + ": not judged, the base run " +
                               base.divergence_detail + " (the rule needs a base run that trains)"
                         : formatted("%s vs %s after %d epochs: the scaled run %s (the base run reached held-out "
                                     "accuracy %.4f, loss %.4f): beyond",
                                     scaled.config.name.c_str(), base.config.name.c_str(), scaled.config.epochs,
                                     scaled.divergence_detail.c_str(), base.final_accuracy, base.final_loss);
    return verdict;
  }
  const double accuracy_tolerance = agreement_tolerance(base.accuracy_stderr, scaled.accuracy_stderr);
  const double loss_tolerance = agreement_tolerance(base.loss_stderr, scaled.loss_stderr);
  const double accuracy_drop = base.final_accuracy - scaled.final_accuracy;
  const double loss_rise = scaled.final_loss - base.final_loss;
  RuleVerdict verdict;
  verdict.pass = accuracy_drop <= accuracy_tolerance && loss_rise <= loss_tolerance;
  verdict.detail = formatted(
      "%s vs %s after %d epochs: held-out accuracy %.4f vs %.4f (drop %+.4f, tolerance %.4f), loss %.4f vs %.4f "
      "(rise %+.4f, tolerance %.4f): %s",
      scaled.config.name.c_str(), base.config.name.c_str(), scaled.config.epochs, scaled.final_accuracy,
      base.final_accuracy, accuracy_drop, accuracy_tolerance, scaled.final_loss, base.final_loss, loss_rise,
      loss_tolerance, verdict.pass ? "within" : "beyond");
  return verdict;
}

RuleVerdict judge_integrity(const RunResult& run) {
  RuleVerdict verdict;
  verdict.pass = run.replicas_agree && run.losses_agree;
  verdict.judged = run.replicated_states > 0 || run.loss_audited > 0;
  if (verdict.pass) {
    verdict.detail = run.config.name + ": " + std::to_string(run.replicated_states) +
                     " replicated states agreed and the reported losses of " + std::to_string(run.loss_audited) +
                     " ranks matched after every epoch" +
                     (run.diverged ? " (non-finite alike on every rank once the run diverged)" : "");
  } else {
    verdict.detail = run.config.name + ": " + (run.replicas_agree ? "" : run.replica_detail) +
                     (run.replicas_agree || run.losses_agree ? "" : "; ") + (run.losses_agree ? "" : run.loss_detail);
  }
  return verdict;
}

NoiseScale noise_scale_from_norms(const std::vector<double>& small_norms2, const std::vector<double>& big_norms2,
                                  int64_t b_small, int64_t b_big) {
  if (small_norms2.size() != big_norms2.size() || small_norms2.empty() || b_small < 1 || b_big <= b_small) {
    throw Error(Error::Kind::invalid_argument,
                "noise scale: needs as many small as big norms (at least one) and 1 <= b_small < b_big");
  }
  const auto bs = static_cast<double>(b_small), bb = static_cast<double>(b_big);
  const size_t count = small_norms2.size();
  std::vector<double> g2(count), trace(count);
  for (size_t i = 0; i < count; ++i) {
    g2[i] = (bb * big_norms2[i] - bs * small_norms2[i]) / (bb - bs);
    trace[i] = (small_norms2[i] - big_norms2[i]) / (1 / bs - 1 / bb);
  }
  const auto mean_and_stderr = [count](const std::vector<double>& v) {
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(count);
    double squares = 0;
    for (double x : v) squares += (x - mean) * (x - mean);
    const double standard_error =
        count > 1 ? std::sqrt(squares / static_cast<double>(count - 1) / static_cast<double>(count)) : 0.0;
    return std::pair{mean, standard_error};
  };
  NoiseScale scale;
  std::tie(scale.g2, scale.g2_stderr) = mean_and_stderr(g2);
  std::tie(scale.trace_sigma, scale.trace_sigma_stderr) = mean_and_stderr(trace);
  // A mean |G|^2 at or below zero: the gradient is not resolved from the noise at these sizes.
  scale.b_simple = scale.g2 > 0 ? scale.trace_sigma / scale.g2 : std::numeric_limits<double>::infinity();
  scale.b_small = b_small;
  scale.b_big = b_big;
  scale.samples = static_cast<int>(count);
  return scale;
}

NoiseScale estimate_noise_scale(const ModelSpec& spec, const Batch& train, const std::vector<double>& parameters,
                                int64_t b_small, int64_t b_big, int samples, uint64_t seed) {
  if (samples < 1 || b_small < 1 || b_big <= b_small || train.size < 1) {
    throw Error(Error::Kind::invalid_argument,
                "estimate_noise_scale: needs samples >= 1, 1 <= b_small < b_big and training rows");
  }
  SingleTrainer<double> trainer(spec, TrainConfig{});
  trainer.set_parameters(parameters);
  const auto norm2 = [](const std::vector<double>& g) { return std::inner_product(g.begin(), g.end(), g.begin(), 0.0); };
  std::vector<double> small_norms2, big_norms2;
  std::vector<int64_t> rows(static_cast<size_t>(b_big));
  for (int i = 0; i < samples; ++i) {
    for (int64_t j = 0; j < b_big; ++j) {
      rows[static_cast<size_t>(j)] = static_cast<int64_t>(
          philox_bits(seed, kNoiseScaleStream + static_cast<uint64_t>(i), static_cast<uint64_t>(j)) %
          static_cast<uint64_t>(train.size));
    }
    const Batch big = gather_rows(train, rows, 0, b_big);
    big_norms2.push_back(norm2(trainer.gradients(big)));
    small_norms2.push_back(norm2(trainer.gradients(slice_batch(big, 0, b_small))));
  }
  return noise_scale_from_norms(small_norms2, big_norms2, b_small, b_big);
}

ModelSpec digits_model() {
  ModelSpec spec;
  spec.layers = 2;  // 64 -> 64 -> 10: one hidden layer
  spec.width = 64;
  spec.input = static_cast<int>(kDigitsFeatures);
  spec.classes = static_cast<int>(kDigitsClasses);
  spec.seed = 1;
  spec.data_seed = 2;  // unused: the data are the file's
  return spec;
}

RunConfig digits_base_run() {
  RunConfig run;
  run.name = "base";
  run.batch = 16;
  run.lr = 0.02;
  run.epochs = 10;
  run.decay_epoch = 6;
  run.decay_factor = 0.1;
  run.shuffle_seed = 7;
  return run;
}

}  // namespace dts
