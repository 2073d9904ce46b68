// The convergence trainer under mpirun (NP 1 2 3 4): a run at any rank count trains what one rank
// trains; at the suite's defaults the linear scaling rule holds for the scaled run and fails for
// the control that breaks it on purpose; and stacks that lose, reuse or corrupt a rank's data
// (faulty(drop|stale|bitflip,mpi)) fail the run's verdict, each through a named signal.
//   ctest -R trainer_mpi_test   (or mpirun -np 3 build/suites/convergence/trainer_mpi_test)
//
// Measured at the defaults (digits, 64 -> 64 -> 10, f32, B = 16, eta = 0.02, 10 epochs, decay at
// epoch 6, warm-up 2 epochs; the same to four digits at 1, 2 and 4 ranks; about 0.03 s a run on
// one core): held-out accuracy / loss (+- one standard error)
//   base            0.9057 +- 0.0170 / 0.371 +- 0.071
//   scaled k = 2    0.9125 / 0.375      k = 4   0.9125 / 0.383      k = 8   0.9024 / 0.443
//          k = 16   0.8855 / 0.529      k = 32  0.8586 / 0.544      k = 64  0.8620 / 0.887 (beyond: loss)
//   control k = 8   0.8182 / 1.266  (beyond: accuracy 0.088 worse, tolerance 0.056; loss 0.895, tolerance 0.155)
// Over ten shuffle and initialization seeds, k <= 16 always held (at most 0.72 of either
// tolerance used), k = 32 held once (this seed, by 0.006 of accuracy), k = 64 never, and the
// control failed every time (loss 5.2x-6.7x its tolerance). The base run's noise scale B_simple
// (B = 16 against 256, 200 pairs) grows from ~28 after epoch 1 to ~110 at the decay: the rule
// holds to kB = 256 (about twice that) and breaks at 512 (about 5x), as McCandlish et al. lead one
// to expect: past the noise scale a step of more samples buys little more progress, so a fixed
// number of epochs falls short.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "comm/communicator.h"
#include "comm/forwarding_communicator.h"
#include "core/error.h"
#include "strategies/ddp/ddp_strategy.h"
#include "suites/convergence/trainer.h"

namespace dts {
namespace {

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

const ConvergenceData& digits() {
  static const ConvergenceData data = digits_data(default_digits_path());
  return data;
}

// Rank 0 says it once (every rank computes the same line).
void report(const std::string& line) {
  if (world_rank() == 0) std::printf("  %s\n", line.c_str());
}

// The result must be the same on every rank: rank 0's numbers, bit for bit.
void expect_same_on_every_rank(const RunResult& r) {
  std::vector<double> mine = {r.final_loss, r.final_accuracy, r.loss_stderr, r.accuracy_stderr, r.seconds,
                              static_cast<double>(r.replicas_agree), static_cast<double>(r.losses_agree),
                              static_cast<double>(r.diverged), static_cast<double>(r.divergence_detail.size())};
  mine.insert(mine.end(), r.final_parameters.begin(), r.final_parameters.end());
  std::vector<double> root = mine;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  EXPECT_EQ(std::memcmp(root.data(), mine.data(), mine.size() * sizeof(double)), 0) << r.config.name;
}

TEST(TrainRun, EveryRankCountTrainsWhatOneRankTrains) {
  auto world = make_communicator("mpi");
  auto control = make_communicator("mpi");
  // Each rank alone, concurrently: the one-rank reference.
  auto alone = world->split(world_rank(), 0);
  auto alone_control = control->split(world_rank(), 0);
  const ModelSpec spec = digits_model();
  const RunConfig run = digits_base_run();
  const RunResult got = train_run(*world, *control, spec, digits(), run, Precision::f64);
  const RunResult want = train_run(*alone, *alone_control, spec, digits(), run, Precision::f64);
  EXPECT_EQ(got.steps, 10 * 93);  // 10 epochs of floor(1500 / 16) = 93 batches (the last 12 rows dropped)
  ASSERT_EQ(got.epochs.size(), 10u);
  EXPECT_TRUE(got.replicas_agree) << got.replica_detail;
  EXPECT_TRUE(got.losses_agree) << got.loss_detail;
  expect_same_on_every_rank(got);
  double worst = 0;
  for (size_t i = 0; i < want.final_parameters.size(); ++i) {
    worst = std::max(worst, std::fabs(got.final_parameters[i] - want.final_parameters[i]));
  }
  if (world_size() == 1) {
    EXPECT_EQ(worst, 0);  // the same computation
  }
  // Only the gradient's sum over ranks is in another order: ~2^-52 relative a step. 930 steps
  // of SGD carry that forward without much growth at this lr (measured: below 1e-15 at 2-4 ranks);
  // 1e-9 leaves a margin of 10^5 and still catches a lost or repeated batch row (~1e-4).
  EXPECT_LT(worst, 1e-9);
  // So the held-out numbers agree to within one sample's prediction and 1e-6 of the loss.
  EXPECT_LE(std::fabs(got.final_accuracy - want.final_accuracy), 1.0 / 297 + 1e-12);
  EXPECT_NEAR(got.final_loss, want.final_loss, 1e-6 * want.final_loss);
  for (size_t e = 0; e < got.epochs.size(); ++e) {
    EXPECT_NEAR(got.epochs[e].train_loss, want.epochs[e].train_loss, 1e-9) << "epoch " << e + 1;
    EXPECT_DOUBLE_EQ(got.epochs[e].lr_at_end, want.epochs[e].lr_at_end);
  }
  EXPECT_DOUBLE_EQ(got.epochs[5].lr_at_end, 0.02);   // epoch 6 ends the constant phase
  EXPECT_DOUBLE_EQ(got.epochs[6].lr_at_end, 0.002);  // then x 0.1
  char line[160];
  std::snprintf(line, sizeof line, "f64 at %d ranks against 1: largest parameter difference %.3g, loss %.17g vs %.17g",
                world_size(), worst, got.final_loss, want.final_loss);
  report(line);
}

TEST(TrainRun, LowerPrecisionsPassTheirOwnChecksOnACleanStack) {
  // The loss audit's tolerance is per precision (trainer.cpp): a sound stack must pass it in
  // f32 and bf16 too. Two epochs: the audit runs at each epoch's first step.
  auto world = make_communicator("mpi");
  auto control = make_communicator("mpi");
  RunConfig run = digits_base_run();
  run.epochs = 2;
  for (Precision precision : {Precision::f32, Precision::bf16}) {
    const RunResult r = train_run(*world, *control, digits_model(), digits(), run, precision);
    EXPECT_TRUE(r.replicas_agree) << r.replica_detail;
    EXPECT_TRUE(r.losses_agree) << r.loss_detail;
    // Two epochs of B = 16 from chance (0.1): well on the way (0.88 measured in f32).
    EXPECT_GT(r.final_accuracy, 0.5);
  }
}

TEST(TrainRun, RefusesWhatDoesNotFit) {
  auto world = make_communicator("mpi");
  auto control = make_communicator("mpi");
  const ModelSpec spec = digits_model();
  RunConfig run = digits_base_run();
  const auto kind_of = [&](Communicator& stack, Communicator& check, const ModelSpec& model, const RunConfig& r) {
    try {
      train_run(stack, check, model, digits(), r);
    } catch (const Error& e) {
      return e.kind();
    }
    return Error::Kind::io;  // not thrown
  };
  run.batch = 1501;  // more than the 1,500 training rows
  EXPECT_EQ(kind_of(*world, *control, spec, run), Error::Kind::invalid_argument);
  run.batch = 16;
  ModelSpec wrong = spec;
  wrong.input = 32;
  EXPECT_EQ(kind_of(*world, *control, wrong, run), Error::Kind::invalid_argument);
  if (world_size() > 1) {
    run.batch = 1;  // a rank without a row
    EXPECT_EQ(kind_of(*world, *control, spec, run), Error::Kind::invalid_argument);
    run.batch = 16;
    auto alone = control->split(world_rank(), 0);  // a control of other ranks
    EXPECT_EQ(kind_of(*world, *alone, spec, run), Error::Kind::invalid_argument);
  }
}

TEST(DdpLearningRate, TheNextStepUsesIt) {
  auto comm = make_communicator("mpi");
  const ModelSpec spec{2, 9, 7, 5, 21, 22};
  const Batch batch = make_batch(spec, 0, 23);
  ParallelConfig config;
  config.train.optimizer = OptimizerKind::sgd;
  config.train.sgd.lr = 0.05;
  DdpStrategy<double> fixed(spec, config, *comm);
  config.train.sgd.lr = 0.3;
  DdpStrategy<double> scheduled(spec, config, *comm);
  DdpStrategy<double> frozen(spec, config, *comm);
  for (int s = 0; s < 2; ++s) {
    fixed.step(batch);
    scheduled.set_learning_rate(0.05);
    scheduled.step(batch);
    frozen.set_learning_rate(0);
    frozen.step(batch);
  }
  EXPECT_EQ(scheduled.full_parameters(), fixed.full_parameters());  // 0.05 replaced 0.3, bit for bit
  EXPECT_EQ(frozen.full_parameters(), init_parameters(spec));       // p -= 0 v leaves p as it was
  EXPECT_THROW(frozen.set_learning_rate(-1), Error);
  EXPECT_THROW(frozen.set_learning_rate(std::nan("")), Error);
}

// ---------------------------------------------------------------------------------------------
// The rule at the defaults.

TEST(LinearScalingRule, HoldsScaledAndFailsTheControlAtTheDefaults) {
  auto world = make_communicator("mpi");
  auto control = make_communicator("mpi");
  const ModelSpec spec = digits_model();
  const RunConfig base_config = digits_base_run();
  const RunResult base = train_run(*world, *control, spec, digits(), base_config);
  const RunResult scaled =
      train_run(*world, *control, spec, digits(), scaled_config(base_config, kDefaultScale, kDefaultWarmupEpochs));
  const RunResult broken = train_run(*world, *control, spec, digits(), control_config(base_config, kDefaultScale));
  // The base run must have learned the digits, or the rule has nothing to hold against. Measured
  // 0.9057 (269 of 297); over ten seeds 0.899-0.923: the lowest less three of its standard errors
  // (sqrt(0.9 x 0.1 / 297) = 0.0174) is 0.847, so 0.85 fails a run that learned less than any seed
  // did, not an unlucky seed.
  EXPECT_GE(base.final_accuracy, 0.85);
  for (const RunResult* r : {&base, &scaled, &broken}) {
    const RuleVerdict integrity = judge_integrity(*r);
    EXPECT_TRUE(integrity.pass) << integrity.detail;
    expect_same_on_every_rank(*r);
  }
  const RuleVerdict holds = judge_rule(base, scaled);
  const RuleVerdict fails = judge_rule(base, broken);
  EXPECT_TRUE(holds.pass) << holds.detail;
  EXPECT_FALSE(fails.pass) << fails.detail;  // the rule broken on purpose must be seen broken
  report(holds.detail);
  report(fails.detail);
  report("base " + std::to_string(base.seconds) + " s, scaled " + std::to_string(scaled.seconds) + " s, control " +
         std::to_string(broken.seconds) + " s on " + std::to_string(world_size()) + " ranks");
}

TEST(LinearScalingRule, HoldsUpToSixteenAndBreaksPastTheNoiseScale) {
  auto world = make_communicator("mpi");
  auto control = make_communicator("mpi");
  const ModelSpec spec = digits_model();
  RunConfig base_config = digits_base_run();
  base_config.keep_parameters = true;
  const RunResult base = train_run(*world, *control, spec, digits(), base_config);
  for (int k : {2, 4, 8, 16, 32, 64}) {
    const RunResult scaled =
        train_run(*world, *control, spec, digits(), scaled_config(base_config, k, kDefaultWarmupEpochs));
    const RuleVerdict verdict = judge_rule(base, scaled);
    report(verdict.detail);
    // k <= 16 held at every seed tried (at most 0.72 of a tolerance used); k = 64 (one step an
    // epoch after warm-up) never did. k = 32 is the edge: reported, not asserted.
    if (k <= 16) {
      EXPECT_TRUE(verdict.pass) << verdict.detail;
    } else if (k == 64) {
      EXPECT_FALSE(verdict.pass) << verdict.detail;
    }
  }
  // The noise scale grows as training goes on (McCandlish et al., section 3): the early phase,
  // where a large batch must not take full steps yet, is what the warm-up covers.
  const int64_t b = base_config.batch;
  const NoiseScale early = estimate_noise_scale(spec, digits().train, base.epochs[0].parameters, b,
                                                kNoiseScaleBigFactor * b, kNoiseScaleSamples, 11);
  const NoiseScale later =
      estimate_noise_scale(spec, digits().train, base.epochs[static_cast<size_t>(base_config.decay_epoch - 1)].parameters,
                           b, kNoiseScaleBigFactor * b, kNoiseScaleSamples, 11);
  // Each |G|^2 resolved from its noise (measured: standard errors of 2% and 7%), or B_simple
  // means nothing.
  EXPECT_GT(early.g2, 4 * early.g2_stderr);
  EXPECT_GT(later.g2, 4 * later.g2_stderr);
  EXPECT_LT(early.b_simple, later.b_simple);  // measured ~28 and ~110
  report("noise scale B_simple after epoch 1: " + std::to_string(early.b_simple) + ", after epoch " +
         std::to_string(base_config.decay_epoch) + ": " + std::to_string(later.b_simple));
}

// ---------------------------------------------------------------------------------------------
// Divergence: a learning rate too large is not a broken stack.

TEST(Divergence, ALearningRateTooLargeDivergesAlikeOnEveryRankAndTheStackPasses) {
  auto world = make_communicator("mpi");
  auto control = make_communicator("mpi");
  RunConfig run = digits_base_run();
  run.name = "too large";
  // 5,000 times the default; the suite's flags stop at 1e6, where this model's loss grows to ~1e5
  // but stays finite (measured), while here the parameters overflow f32 within the first epoch.
  run.lr = 1e8;
  run.epochs = 2;  // the audit runs at each epoch's first step: epoch 2's sees the diverged replica
  const RunResult r = train_run(*world, *control, digits_model(), digits(), run);
  EXPECT_TRUE(std::isnan(r.final_loss)) << r.final_loss;  // it did diverge
  // Every rank computed the same non-finite numbers: replicas alike, and the reported loss is the
  // replica's own (NaN against NaN), so the stack did its job.
  EXPECT_TRUE(r.replicas_agree) << r.replica_detail;
  EXPECT_TRUE(r.losses_agree) << r.loss_detail;
  EXPECT_TRUE(judge_integrity(r).pass) << judge_integrity(r).detail;
  expect_same_on_every_rank(r);
  // Divergence is the run's own outcome, named where it began (a step of epoch 1, at the lr).
  EXPECT_TRUE(r.diverged);
  EXPECT_EQ(r.divergence_detail.rfind("diverged at epoch 1, step ", 0), 0u) << r.divergence_detail;
  EXPECT_NE(r.divergence_detail.find("(lr 1e+08)"), std::string::npos) << r.divergence_detail;
  report(r.divergence_detail);
  // As the base of the rule there is nothing to hold against; as the scaled run it did not hold.
  RunResult sound = r;
  sound.diverged = false;
  sound.config.name = "sound";
  EXPECT_FALSE(judge_rule(r, sound).pass);
  EXPECT_NE(judge_rule(r, sound).detail.find("not judged, the base run diverged"), std::string::npos);
  EXPECT_FALSE(judge_rule(sound, r).pass);
  EXPECT_NE(judge_rule(sound, r).detail.find("the scaled run diverged at epoch 1"), std::string::npos)
      << judge_rule(sound, r).detail;
}

// A stack whose all_reduce of one f64 (the mean loss, strategy.cpp's global_mean_loss; in f32 the
// strategy reduces nothing else of that shape) hands NaN to one rank: that rank reported a NaN
// where the replica's loss is a number, which the audit must see though the other ranks agree.
class NaNLossOnOneRank final : public ForwardingCommunicator {
 public:
  NaNLossOnOneRank(std::unique_ptr<Communicator> inner, int victim)
      : ForwardingCommunicator(std::move(inner), "nanloss"), victim_(victim) {}
  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override {
    inner_->all_reduce(in, out, count, dtype, op);
    if (dtype == DType::f64 && count == 1 && rank() == victim_) {
      *static_cast<double*>(out) = std::numeric_limits<double>::quiet_NaN();
    }
  }

 private:
  std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator> inner_group) override {
    return std::make_unique<NaNLossOnOneRank>(std::move(inner_group), victim_);
  }
  int victim_;
};

TEST(LossAudit, ANaNReportedOnOneRankAgainstANumberFails) {
  if (world_size() < 2) GTEST_SKIP() << "needs a victim and a peer";
  NaNLossOnOneRank stack(make_communicator("mpi"), 1);
  auto control = make_communicator("mpi");
  RunConfig run = digits_base_run();
  run.epochs = 1;
  const RunResult r = train_run(stack, *control, digits_model(), digits(), run);
  EXPECT_TRUE(r.replicas_agree) << r.replica_detail;  // the loss is reported, never trained on
  EXPECT_FALSE(r.losses_agree);
  EXPECT_NE(r.loss_detail.find("rank 1"), std::string::npos) << r.loss_detail;
  EXPECT_FALSE(judge_integrity(r).pass);
  EXPECT_FALSE(r.diverged) << "one rank's NaN is the stack's fault: " << r.divergence_detail;
  expect_same_on_every_rank(r);
}

// ---------------------------------------------------------------------------------------------
// Faulty stacks: the run's verdict (the rule, and each run's integrity) must fail.

struct FaultCase {
  const char* kind;
  // Which integrity signal must catch it. drop: the lost contribution reaches every replica
  // alike (all_reduce gives all ranks the same wrong sum), so replicas agree and only the loss
  // audit sees the rows that went missing. stale and bitflip: the victim alone holds other bits.
  bool replicas_catch, loss_audit_catches;
};

class FaultyStack : public ::testing::TestWithParam<FaultCase> {};

TEST_P(FaultyStack, FailsTheRunsVerdict) {
  if (world_size() < 2) GTEST_SKIP() << "a fault needs a victim and a peer";
  const FaultCase fault = GetParam();
  CommOptions options;
  options.fault_rank = 1;  // not rank 0, whose replica the held-out numbers come from
  const std::string spec_text = std::string("faulty(") + fault.kind + ",mpi)";
  auto stack = make_communicator(spec_text, options);
  auto control = make_communicator("mpi");
  const ModelSpec spec = digits_model();
  const RunConfig base_config = digits_base_run();
  const RunResult base = train_run(*stack, *control, spec, digits(), base_config);
  const RunResult scaled =
      train_run(*stack, *control, spec, digits(), scaled_config(base_config, kDefaultScale, kDefaultWarmupEpochs));
  const RuleVerdict rule = judge_rule(base, scaled);
  const RuleVerdict base_integrity = judge_integrity(base), scaled_integrity = judge_integrity(scaled);
  EXPECT_FALSE(rule.pass && base_integrity.pass && scaled_integrity.pass);
  for (const RunResult* r : {&base, &scaled}) {
    if (fault.replicas_catch) {
      EXPECT_FALSE(r->replicas_agree) << r->config.name;
    } else {
      EXPECT_TRUE(r->replicas_agree) << r->replica_detail;
    }
    if (fault.loss_audit_catches) {
      EXPECT_FALSE(r->losses_agree) << r->config.name;
    }
    expect_same_on_every_rank(*r);
  }
  report(spec_text + " at " + std::to_string(world_size()) + " ranks: rule " + (rule.pass ? "held" : "broken") +
         "; " + base_integrity.detail + "; " + scaled_integrity.detail);
}

INSTANTIATE_TEST_SUITE_P(DataFaults, FaultyStack,
                         ::testing::Values(FaultCase{"drop", false, true}, FaultCase{"stale", true, true},
                                           FaultCase{"bitflip", true, false}),
                         [](const ::testing::TestParamInfo<FaultCase>& fault) { return std::string(fault.param.kind); });

}  // namespace
}  // namespace dts
