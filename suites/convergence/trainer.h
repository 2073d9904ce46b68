// The training core of the convergence suite: epochs of shuffled minibatches through a strategy
// (ddp unless the run names another) on the stack under test, held-out evaluation, the checks that the stack kept
// its replicas alike, and the statistics of the linear scaling rule (Goyal et al. 2017) and of the
// gradient noise scale (McCandlish et al. 2018). A library of its own: the suite (dts_suites) calls
// it, and its tests run it without the harness.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "strategies/strategy.h"
#include "suites/convergence/digits.h"

namespace dts {

// A training set and the held-out set the runs are judged on, as model inputs (digits' pixels
// already scaled by batch_of).
struct ConvergenceData {
  std::string name;  // "digits" or "teacher-student"
  int64_t features = 0, classes = 0;
  Batch train, held_out;
};

// The digits file with its last `held_out` samples held out (the file's order, so every rank and
// every run holds out the same ones). Error{invalid_argument} naming the file unless
// 0 < held_out < samples.
inline constexpr int64_t kDigitsHeldOut = 297;  // of 1,797: 1,500 to train on, ~30 of each digit held out
ConvergenceData digits_data(const std::string& path, int64_t held_out = kDigitsHeldOut);
// The same from samples already read (parse_digits); `name` is the file's, for messages.
ConvergenceData digits_data(const LabeledData& all, const std::string& name, int64_t held_out = kDigitsHeldOut);
// Samples [0, train) and [train, train + held_out) of make_batch(spec, ...): the synthetic
// teacher-student set, for models other than digits'.
ConvergenceData teacher_student_data(const ModelSpec& spec, int64_t train, int64_t held_out);

// One training run. The learning rate: `lr` after a gradual warm-up that rises linearly, per
// iteration, from `warmup_start_lr` over the first `warmup_epochs` epochs (none when 0); from
// `decay_epoch` on (0: never), multiplied by `decay_factor`.
struct RunConfig {
  std::string name;  // "base", "scaled k=8", "control k=8"
  int64_t batch = 0;  // global batch: rows of one step, over all ranks
  double lr = 0;
  double warmup_epochs = 0;
  double warmup_start_lr = 0;
  int decay_epoch = 0;
  double decay_factor = 0.1;
  int epochs = 0;
  uint64_t shuffle_seed = 0;
  // Optimizer: SGD with momentum 0.9 (Goyal et al.'s); its lr field is replaced by the schedule's.
  TrainConfig train{OptimizerKind::sgd, {0, 0.9, 0}, {}};
  bool keep_parameters = false;  // EpochResult::parameters (for the noise scale at chosen epochs)
  // Who trains it: a registered strategy that takes a learning-rate schedule (ddp, ps-*, gossip;
  // another throws Error{unsupported}) on `layout` of the run's ranks, whose train field is
  // replaced by `train` above. No layout: dp over every rank.
  std::string strategy = "ddp";
  std::optional<ParallelConfig> layout;
};

// The linear scaling rule's two runs for a factor k, from the base run (batch B, lr eta): scaled
// is kB at k eta after a warm-up from eta; control is kB at eta, no warm-up (the rule broken).
RunConfig scaled_config(const RunConfig& base, int k, double warmup_epochs);
RunConfig control_config(const RunConfig& base, int k);

// The learning rate of global step `step` (0-based) with `steps_per_epoch` steps an epoch:
// warm-up from warmup_start_lr (at step 0) to lr (at step round(warmup_epochs x steps_per_epoch)),
// then lr, times decay_factor from decay_epoch on.
double learning_rate_at(const RunConfig& run, int64_t step, int64_t steps_per_epoch);

// Loss and accuracy of one parameter vector on a held-out set, with standard errors over its
// samples: loss_stderr = sample std of per-sample losses / sqrt(n); accuracy_stderr =
// sqrt(p (1 - p) / n) (a binomial proportion).
struct Evaluation {
  double loss = 0, accuracy = 0, loss_stderr = 0, accuracy_stderr = 0;
  int64_t samples = 0;
};
// In double, through the kernels Mlp uses; a prediction is the first largest logit.
Evaluation evaluate(const ModelSpec& spec, const std::vector<double>& parameters, const Batch& data);

struct EpochResult {
  int epoch = 0;            // 1-based: after this many epochs
  double train_loss = 0;    // mean of the steps' reported losses over the epoch
  double held_out_loss = 0, held_out_accuracy = 0;
  double lr_at_end = 0;     // of the epoch's last step
  // Training so far, to this epoch's end: seconds of steps (the slowest rank's, evaluation and
  // checks left out) and samples of the global batches stepped.
  double train_seconds = 0;
  int64_t samples = 0;
  std::vector<double> parameters;  // rank 0's, when RunConfig::keep_parameters
};

struct RunResult {
  RunConfig config;
  std::vector<EpochResult> epochs;
  // After the last epoch, on the held-out set.
  double final_loss = 0, final_accuracy = 0, loss_stderr = 0, accuracy_stderr = 0;
  int64_t held_out_samples = 0;
  std::vector<double> final_parameters;  // rank 0's
  // Every replicated state (replica_digests(), by key) was alike on every rank that reports it
  // after every epoch; else the first epoch, state and ranks that differed.
  bool replicas_agree = true;
  std::string replica_detail;
  int replicated_states = 0;  // compared after each epoch: states reported by two ranks or more
  // The loss the stack reported for each epoch's first step (its mean over the global batch,
  // all_reduced by the stack) matched that batch's loss at the replica's parameters computed on
  // each rank alone; else the first epoch and rank where it did not. A rank whose gradient
  // contribution is lost (drop) leaves replicas alike but not this. Judged on the ranks whose
  // strategy reports the batch's loss (Strategy::reports_batch_loss); loss_audited counts them.
  bool losses_agree = true;
  std::string loss_detail;
  int loss_audited = 0;
  // The run diverged: on every rank a step's reported loss, or the replica's parameters after an
  // epoch, were not finite (NaN or infinite); divergence_detail says where it began (epoch, step,
  // lr). A property of the configuration (a learning rate too large for its batch), not a fault
  // of the stack: the checks above still judge the stack, and a stack that keeps a diverged run's
  // replicas alike and reports its losses as computed passes them.
  bool diverged = false;
  std::string divergence_detail;
  // The strategy trains the model one process would (Strategy::same_model_as_one_process): the
  // linear scaling rule, a statement about synchronous SGD, applies to it.
  bool one_process_model = true;
  double seconds = 0;  // wall time of the run, evaluation included
  int64_t steps = 0;
};

// Trains `run` with its strategy (ddp over every rank of `comm` unless it names another) on the
// stack under test; collective over `comm` and over `control`, an untampered communicator of the same
// ranks (plain MPI) that carries the replica and loss checks, so a faulty stack cannot hide its
// own fault. Every rank returns the same RunResult: the held-out numbers are rank 0's replica's.
// Each epoch is a Philox permutation keyed by (shuffle_seed, epoch), the same on every rank, cut
// into floor(train / batch) global batches (the last partial one dropped, as drop_last).
// Error{invalid_argument}, on every rank alike and before any communication, for sizes that do
// not fit (batch < ranks, batch > training rows, a model that does not match the data, a layout
// of another number of ranks); Error{unsupported} for a strategy without a learning-rate schedule.
RunResult train_run(Communicator& comm, Communicator& control, const ModelSpec& spec, const ConvergenceData& data,
                    const RunConfig& run, Precision precision = Precision::f32);

// The loss audit's comparison: whether the mean loss the stack reported matches the one computed
// from the replica alone, within `tolerance` relative to max(1, |computed|). Two non-finite values
// match, whatever their sign or NaN payload: a diverged replica's loss is NaN or infinite on every
// rank alike, and which of the two it is depends on the order of overflowing sums, not on the
// stack. A number never matches a non-finite value.
bool reported_loss_matches(double reported, double computed, double tolerance);

// Whether scaled held the rule against base: one-sided (better is fine), on accuracy and on loss,
// each within agreement_tolerance of the two runs' standard errors. A diverged run does not hold
// it: the scaled run's divergence, or the base's (no reference to hold against), is the detail.
struct RuleVerdict {
  bool pass = false;
  // judge_integrity: false when the run had nothing to compare (no state held on two ranks, no
  // rank reporting the batch's loss: gossip, asynchronous servers), so its pass says nothing.
  bool judged = true;
  std::string detail;  // one line, with the differences and tolerances
};
// z sqrt(se_a^2 + se_b^2): the two held-out estimates as independent, z = 2 about a 95% two-sided
// interval. Both runs are scored on the same samples, whose errors correlate positively, so the
// true spread of the difference is smaller: the bound errs towards passing a sound stack.
double agreement_tolerance(double se_a, double se_b, double z = 2);
RuleVerdict judge_rule(const RunResult& base, const RunResult& scaled);
// The run's own soundness: replicas agree and the reported losses were the losses (a diverged run
// included: divergence is reported on its own, RunResult::diverged).
RuleVerdict judge_integrity(const RunResult& run);

// The simple gradient noise scale B_simple = tr(Sigma) / |G|^2 (McCandlish et al. 2018, appendix
// A.1): G the mean gradient over the training set, Sigma the per-sample gradients' covariance.
// From squared norms of minibatch gradients at two sizes, E|G_B|^2 = |G|^2 + tr(Sigma) / B gives
// the unbiased |G|^2 ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small) and
// tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big); each is averaged over
// `samples` pairs before the ratio is taken (a ratio of single noisy estimates is biased).
struct NoiseScale {
  double b_simple = 0, g2 = 0, trace_sigma = 0;
  double g2_stderr = 0, trace_sigma_stderr = 0;  // over the pairs
  int64_t b_small = 0, b_big = 0;
  int samples = 0;
};
// The estimator from each pair's squared norms (the arithmetic alone, for tests).
NoiseScale noise_scale_from_norms(const std::vector<double>& small_norms2, const std::vector<double>& big_norms2,
                                  int64_t b_small, int64_t b_big);
// At `parameters`, on `samples` pairs: a big batch of b_big rows drawn from `train` with
// replacement (so E|G_B|^2 is exactly |G|^2 + tr(Sigma) / B), and its first b_small rows as the
// small one (one data-parallel worker's share inside the global batch, as in the paper). One
// process, in double; Philox keyed by `seed`.
NoiseScale estimate_noise_scale(const ModelSpec& spec, const Batch& train, const std::vector<double>& parameters,
                                int64_t b_small, int64_t b_big, int samples, uint64_t seed);

// The suite's defaults on digits, chosen so that on one core the whole set (base, scaled at
// k = 2..16, control) trains in about 0.2 s, and measured over ten seeds (trainer_mpi_test.cpp
// has the numbers): base B = 16, eta = 0.02, SGD momentum 0.9, 10 epochs, lr x 0.1 from epoch 6
// (Goyal et al.'s step decay, applied alike to every run) reaches 0.90-0.92 held-out accuracy;
// scaled runs hold the rule up to k = 16 (kB = 256) and break it from k = 32 (20 steps in all);
// the control at k = 8 is beyond the tolerance on loss by 5x or more.
ModelSpec digits_model();    // 64 -> 64 -> 10: one hidden layer of 64
RunConfig digits_base_run();
inline constexpr int kDefaultScale = 8;
// The held-out accuracy whose first epoch gives time_to_target and samples_to_target: below what
// the base run ends at (0.90-0.92), reached by it before the decay, so a run that learns more
// slowly per sample (stale gradients) shows it in epochs.
inline constexpr double kDefaultTargetAccuracy = 0.85;
// Until the noise scale has grown to about kB = 128 (B_simple ~ 30 after epoch 1, ~100 after
// epoch 2 of the base run), a step of kB samples at k eta overshoots: the warm-up spans that phase.
inline constexpr double kDefaultWarmupEpochs = 2;
// The noise scale of the base run at B_small = B and B_big = 16 B over 200 pairs resolves |G|^2 to
// a few percent while the lr is constant; after the decay |G|^2 falls within its own standard
// error (B_simple > 1,000), so the suite measures at the decay epoch: the end of the constant-lr
// phase, whose scale bounds the batch the rule holds (after epoch 1 it reads ~30, which is what
// the warm-up spans).
inline constexpr int64_t kNoiseScaleBigFactor = 16;
inline constexpr int kNoiseScaleSamples = 200;

}  // namespace dts
