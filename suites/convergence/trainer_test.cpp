// The convergence trainer's arithmetic in one process (trainer.h): the warm-up schedule, the
// held-out statistics and the rule's verdict, the gradient noise scale estimator against values
// known exactly, and the data sets. Training itself runs under mpirun: trainer_mpi_test.cpp.
//   ctest -R trainer_test
#include "suites/convergence/trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace dts {
namespace {

// ---------------------------------------------------------------------------------------------
// Schedule.

TEST(LearningRate, WarmupRisesLinearlyFromBaseToScaledThenHolds) {
  RunConfig base;
  base.lr = 0.1;
  const RunConfig scaled = scaled_config(base, 8, 2);
  ASSERT_DOUBLE_EQ(scaled.lr, 0.8);
  ASSERT_DOUBLE_EQ(scaled.warmup_start_lr, 0.1);
  constexpr int64_t kStepsPerEpoch = 10;  // 2 epochs of warm-up: 20 steps
  EXPECT_DOUBLE_EQ(learning_rate_at(scaled, 0, kStepsPerEpoch), 0.1);   // starts at eta
  EXPECT_DOUBLE_EQ(learning_rate_at(scaled, 20, kStepsPerEpoch), 0.8);  // k eta after 2 epochs
  EXPECT_DOUBLE_EQ(learning_rate_at(scaled, 10, kStepsPerEpoch), 0.45);  // half way: (0.1 + 0.8) / 2
  // Per iteration, by a constant amount: (0.8 - 0.1) / 20 = 0.035 a step.
  for (int64_t s = 0; s < 20; ++s) {
    EXPECT_NEAR(learning_rate_at(scaled, s + 1, kStepsPerEpoch) - learning_rate_at(scaled, s, kStepsPerEpoch), 0.035,
                1e-15);
  }
  for (int64_t s : {21, 50, 1000}) EXPECT_DOUBLE_EQ(learning_rate_at(scaled, s, kStepsPerEpoch), 0.8);
  // Fractional epochs round to whole steps: 0.5 of 11 steps is 6 (5.5 rounded away from zero).
  RunConfig half = scaled_config(base, 8, 0.5);
  EXPECT_LT(learning_rate_at(half, 5, 11), 0.8);
  EXPECT_DOUBLE_EQ(learning_rate_at(half, 6, 11), 0.8);
}

TEST(LearningRate, ControlHasNoWarmupAndDecayAppliesToEveryRun) {
  RunConfig base;
  base.batch = 16;
  base.lr = 0.02;
  base.decay_epoch = 6;
  base.decay_factor = 0.1;
  const RunConfig control = control_config(base, 8);
  EXPECT_EQ(control.batch, 128);
  EXPECT_DOUBLE_EQ(learning_rate_at(control, 0, 11), 0.02);  // eta from the first step
  const RunConfig scaled = scaled_config(base, 8, 2);
  EXPECT_EQ(scaled.batch, 128);
  // Epoch 6 starts at step 6 x 11 = 66: the lr drops tenfold there, the warm-up long over.
  EXPECT_DOUBLE_EQ(learning_rate_at(scaled, 65, 11), 0.16);
  EXPECT_DOUBLE_EQ(learning_rate_at(scaled, 66, 11), 0.016);
  EXPECT_DOUBLE_EQ(learning_rate_at(base, 6 * 93, 93), 0.002);
  EXPECT_THROW(learning_rate_at(base, 0, 0), Error);
}

// A strategy that keeps Strategy's default set_learning_rate.
class NoScheduleStrategy final : public Strategy {
 public:
  std::string_view name() const override { return "fixed"; }
  StepReport step(const Batch&) override { return {}; }
  std::vector<double> full_parameters() override { return {}; }
  MemoryReport memory() const override { return {}; }
  std::string config() const override { return ""; }
  std::vector<TrafficTheory> expected_traffic() const override { return {}; }
};

TEST(LearningRate, AStrategyWithoutASchedulePolitelyRefuses) {
  NoScheduleStrategy strategy;
  try {
    strategy.set_learning_rate(0.1);
    ADD_FAILURE() << "set_learning_rate did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::unsupported);  // a suite reports SKIP
    EXPECT_NE(std::string(e.what()).find("fixed"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// Held-out statistics and the verdict.

TEST(Evaluate, MatchesMlpLossAndCountsArgmaxHits) {
  const ModelSpec spec{2, 9, 7, 5, 21, 22};  // odd widths
  const Batch data = make_batch(spec, 0, 41);
  const std::vector<double> params = init_parameters(spec);
  const Evaluation e = evaluate(spec, params, data);
  // The same kernels as Mlp's forward; only the sum of the 41 row losses is in another order.
  EXPECT_NEAR(e.loss, Mlp<double>(spec).loss(params.data(), data), 1e-13);
  EXPECT_EQ(e.samples, 41);
  const double hits = e.accuracy * 41;
  EXPECT_DOUBLE_EQ(hits, std::round(hits));  // a whole number of right answers
  EXPECT_DOUBLE_EQ(e.accuracy_stderr, std::sqrt(e.accuracy * (1 - e.accuracy) / 41));
  EXPECT_GT(e.loss_stderr, 0);
  // One row: its loss is the mean, and the sample standard deviation is undefined (reported 0).
  const Evaluation one = evaluate(spec, params, make_batch(spec, 0, 1));
  EXPECT_EQ(one.loss_stderr, 0);
  EXPECT_TRUE(one.accuracy == 0 || one.accuracy == 1);
  EXPECT_THROW(evaluate(spec, std::vector<double>(3), data), Error);
}

RunResult result_of(const char* name, double accuracy, double loss, double accuracy_se, double loss_se) {
  RunResult r;
  r.config.name = name;
  r.config.epochs = 10;
  r.final_accuracy = accuracy;
  r.final_loss = loss;
  r.accuracy_stderr = accuracy_se;
  r.loss_stderr = loss_se;
  return r;
}

TEST(JudgeRule, OneSidedWithinTwoStandardErrorsOfTheDifference) {
  // 0.3 and 0.4: tolerance 2 sqrt(0.09 + 0.16) = 1.
  EXPECT_DOUBLE_EQ(agreement_tolerance(0.3, 0.4), 1.0);
  EXPECT_DOUBLE_EQ(agreement_tolerance(0.3, 0.4, 3), 1.5);
  // Accuracy SEs 0.03 and 0.04: tolerance 0.1; loss SEs 0.06 and 0.08: tolerance 0.2.
  const RunResult base = result_of("base", 0.90, 0.30, 0.03, 0.06);
  EXPECT_TRUE(judge_rule(base, result_of("scaled", 0.81, 0.49, 0.04, 0.08)).pass);   // both just inside
  EXPECT_TRUE(judge_rule(base, result_of("scaled", 0.99, 0.01, 0.04, 0.08)).pass);   // better is fine
  EXPECT_FALSE(judge_rule(base, result_of("scaled", 0.79, 0.30, 0.04, 0.08)).pass);  // accuracy 0.11 worse
  const RuleVerdict loss = judge_rule(base, result_of("scaled", 0.90, 0.51, 0.04, 0.08));  // loss 0.21 worse
  EXPECT_FALSE(loss.pass);
  EXPECT_NE(loss.detail.find("rise +0.2100, tolerance 0.2000"), std::string::npos) << loss.detail;
  EXPECT_NE(loss.detail.find("beyond"), std::string::npos) << loss.detail;
}

TEST(JudgeIntegrity, NamesWhatFailed) {
  RunResult r = result_of("base", 0.9, 0.3, 0.01, 0.01);
  EXPECT_TRUE(judge_integrity(r).pass);
  r.losses_agree = false;
  r.loss_detail = "epoch 1, rank 1: lost";
  const RuleVerdict v = judge_integrity(r);
  EXPECT_FALSE(v.pass);
  EXPECT_NE(v.detail.find("epoch 1, rank 1: lost"), std::string::npos) << v.detail;
}

TEST(LossAudit, NonFiniteMatchesNonFiniteWhateverItsSignOrPayloadButNeverANumber) {
  constexpr double kTolerance = 1e-3;  // f32's (trainer.cpp)
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(reported_loss_matches(nan, nan, kTolerance));  // NaN != NaN, yet the same outcome
  EXPECT_TRUE(reported_loss_matches(-nan, nan, kTolerance));  // sign bit: "-nan" as printf shows it
  double payload = 0;
  const uint64_t bits = 0x7ff8000000000123;  // a quiet NaN with another payload
  std::memcpy(&payload, &bits, sizeof payload);
  ASSERT_TRUE(std::isnan(payload));
  EXPECT_TRUE(reported_loss_matches(payload, nan, kTolerance));
  EXPECT_TRUE(reported_loss_matches(inf, inf, kTolerance));
  EXPECT_TRUE(reported_loss_matches(nan, inf, kTolerance));  // which one depends on overflowing sums' order
  // A number against a non-finite value, either way round: a stack's fault.
  for (double number : {0.0, 2.3, 1e300}) {
    EXPECT_FALSE(reported_loss_matches(nan, number, kTolerance)) << number;
    EXPECT_FALSE(reported_loss_matches(number, nan, kTolerance)) << number;
    EXPECT_FALSE(reported_loss_matches(inf, number, kTolerance)) << number;
    EXPECT_FALSE(reported_loss_matches(number, inf, kTolerance)) << number;  // |x - inf| <= tol x inf held
  }
  // Numbers: within the tolerance relative to max(1, |computed|).
  EXPECT_TRUE(reported_loss_matches(2.3 + 2.2e-3, 2.3, kTolerance));   // 2.3e-3 allowed
  EXPECT_FALSE(reported_loss_matches(2.3 + 2.4e-3, 2.3, kTolerance));
  EXPECT_TRUE(reported_loss_matches(0.5e-3, 0, kTolerance));          // max(1, 0): 1e-3 allowed
}

TEST(JudgeIntegrity, ADivergedRunIsSoundAndSaysSo) {
  RunResult r = result_of("sweep", 0.1, std::numeric_limits<double>::quiet_NaN(), 0.01, 0.01);
  r.diverged = true;
  r.divergence_detail = "diverged at epoch 1, step 3 of 93 (lr 1e+08): the reported loss became NaN";
  const RuleVerdict v = judge_integrity(r);
  EXPECT_TRUE(v.pass) << v.detail;
  EXPECT_NE(v.detail.find("non-finite alike on every rank"), std::string::npos) << v.detail;
}

TEST(JudgeRule, ADivergedRunDoesNotHoldTheRule) {
  const RunResult base = result_of("base", 0.90, 0.30, 0.03, 0.06);
  RunResult diverged = result_of("scaled k=8", 0.10, std::numeric_limits<double>::quiet_NaN(), 0.02, 0.0);
  diverged.diverged = true;
  diverged.divergence_detail = "diverged at epoch 1, step 3 of 11 (lr 8e+07): the reported loss became NaN";
  const RuleVerdict scaled = judge_rule(base, diverged);
  EXPECT_FALSE(scaled.pass);
  EXPECT_NE(scaled.detail.find("the scaled run diverged at epoch 1, step 3 of 11 (lr 8e+07)"), std::string::npos)
      << scaled.detail;
  // Its accuracy and loss must not be set against the base's tolerances: a NaN compares as false
  // either way, so a "within" could come out of it.
  EXPECT_EQ(scaled.detail.find("tolerance"), std::string::npos) << scaled.detail;
  RunResult base_diverged = diverged;
  base_diverged.config.name = "base";
  const RuleVerdict no_reference = judge_rule(base_diverged, result_of("scaled k=8", 0.9, 0.3, 0.03, 0.06));
  EXPECT_FALSE(no_reference.pass);
  EXPECT_NE(no_reference.detail.find("not judged, the base run diverged"), std::string::npos) << no_reference.detail;
}

// ---------------------------------------------------------------------------------------------
// Gradient noise scale.

TEST(NoiseScale, RecoversExactNormsExactly) {
  // |G|^2 = 0.5 and tr(Sigma) = 20: E|G_B|^2 = 0.5 + 20 / B, so B_simple = 40. Norms at their
  // expectations leave the formulas nothing but rounding (a few units of 2^-52 of 20 / 16).
  constexpr double kG2 = 0.5, kTrace = 20;
  const std::vector<double> small(5, kG2 + kTrace / 16), big(5, kG2 + kTrace / 128);
  const NoiseScale n = noise_scale_from_norms(small, big, 16, 128);
  EXPECT_NEAR(n.g2, kG2, 1e-13);
  EXPECT_NEAR(n.trace_sigma, kTrace, 1e-12);
  EXPECT_NEAR(n.b_simple, 40, 1e-11);
  EXPECT_EQ(n.g2_stderr, 0);  // five identical pairs
  EXPECT_EQ(n.samples, 5);
  // Noise swamping the gradient: 128 x 1 - 16 x 10 < 0, so |G|^2 estimates below zero and no
  // finite scale can be claimed.
  EXPECT_TRUE(std::isinf(noise_scale_from_norms({10.0}, {1.0}, 16, 128).b_simple));
  EXPECT_THROW(noise_scale_from_norms({1.0}, {1.0}, 16, 16), Error);
  EXPECT_THROW(noise_scale_from_norms({1.0}, {}, 16, 128), Error);
}

TEST(NoiseScale, EstimateMatchesTheTrueScaleOfASmallTrainingSet) {
  // 48 samples: |G|^2 and tr(Sigma) exactly, from every per-sample gradient (Sigma with 1/N, the
  // spread of a draw with replacement).
  const ModelSpec spec{2, 6, 5, 3, 41, 42};
  const Batch train = make_batch(spec, 0, 48);
  const std::vector<double> params = init_parameters(spec);
  SingleTrainer<double> trainer(spec, TrainConfig{});
  std::vector<std::vector<double>> per_sample;
  for (int64_t i = 0; i < train.size; ++i) per_sample.push_back(trainer.gradients(slice_batch(train, i, 1)));
  std::vector<double> mean(per_sample[0].size(), 0.0);
  for (const auto& g : per_sample) {
    for (size_t j = 0; j < g.size(); ++j) mean[j] += g[j] / static_cast<double>(train.size);
  }
  const double true_g2 = std::inner_product(mean.begin(), mean.end(), mean.begin(), 0.0);
  double true_trace = 0;
  for (const auto& g : per_sample) {
    for (size_t j = 0; j < g.size(); ++j) true_trace += (g[j] - mean[j]) * (g[j] - mean[j]) / static_cast<double>(train.size);
  }
  // 4000 pairs at 2 and 16 rows: each estimator's standard error comes from its own pairs'
  // spread (independent draws); 4 of them bound a correct estimator's miss with probability
  // 1 - 6e-5. A biased estimator (norms without the 1/B correction, or draws without
  // replacement: a factor (N - B) / (N - 1) = 0.68 on tr(Sigma) at B = 16) misses by far more.
  const NoiseScale n = estimate_noise_scale(spec, train, params, 2, 16, 4000, 5);
  EXPECT_NEAR(n.g2, true_g2, 4 * n.g2_stderr) << "true |G|^2 " << true_g2;
  EXPECT_NEAR(n.trace_sigma, true_trace, 4 * n.trace_sigma_stderr) << "true tr(Sigma) " << true_trace;
  EXPECT_LT(n.g2_stderr, 0.1 * true_g2);  // the bounds above are tight enough to mean something
  EXPECT_LT(n.trace_sigma_stderr, 0.1 * true_trace);
  const double true_scale = true_trace / true_g2;
  // The ratio within the ratio of the two 4-SE intervals' ends.
  EXPECT_GE(n.b_simple, (true_trace - 4 * n.trace_sigma_stderr) / (true_g2 + 4 * n.g2_stderr)) << true_scale;
  EXPECT_LE(n.b_simple, (true_trace + 4 * n.trace_sigma_stderr) / (true_g2 - 4 * n.g2_stderr)) << true_scale;
}

// ---------------------------------------------------------------------------------------------
// Data.

TEST(ConvergenceData, DigitsHoldOutTheLastSamples) {
  const ConvergenceData data = digits_data(default_digits_path());
  EXPECT_EQ(data.name, "digits");
  EXPECT_EQ(data.train.size, 1500);  // 1,797 - 297
  EXPECT_EQ(data.held_out.size, 297);
  EXPECT_EQ(data.features, 64);
  EXPECT_EQ(data.classes, 10);
  const LabeledData all = load_digits(default_digits_path());
  EXPECT_EQ(data.held_out.labels.front(), all.labels[1500]);
  EXPECT_EQ(data.held_out.x, batch_of(all, 1500, 297).x);  // scaled pixels, as batch_of makes them
  // Every digit is held out about equally (the file cycles through the digits): 27..33 of each.
  std::vector<int> per_class(10, 0);
  for (int32_t label : data.held_out.labels) ++per_class[static_cast<size_t>(label)];
  for (int count : per_class) EXPECT_GE(count, 27);
  EXPECT_THROW(digits_data(default_digits_path(), 0), Error);
  EXPECT_THROW(digits_data(default_digits_path(), 1797), Error);
}

TEST(ConvergenceData, AFileTooSmallToHoldOutIsNamed) {
  // kDigitsHeldOut samples exactly: all held out, none left to train on.
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("dts_trainer_test_" + std::to_string(getpid()) + "_small.csv");
  {
    std::ofstream out(path);
    for (int64_t i = 0; i < kDigitsHeldOut; ++i) {
      for (int p = 0; p < 64; ++p) out << p % 17 << ",";
      out << i % 10 << "\n";
    }
  }
  try {
    digits_data(path.string());
    ADD_FAILURE() << "a file with no sample to train on was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path.string() + ": ", 0), 0u) << what;  // the file first, as load_digits' errors
    EXPECT_NE(what.find("297 samples"), std::string::npos) << what;
    EXPECT_NE(what.find("at least 298"), std::string::npos) << what;  // what it takes
  }
  std::filesystem::remove(path);
}

TEST(ConvergenceData, TeacherStudentContinuesAfterTheTrainingRows) {
  const ModelSpec spec{2, 8, 6, 4, 3, 4};
  const ConvergenceData data = teacher_student_data(spec, 30, 7);
  EXPECT_EQ(data.train.size, 30);
  EXPECT_EQ(data.held_out.labels, make_batch(spec, 30, 7).labels);
  EXPECT_EQ(data.features, 6);
  EXPECT_THROW(teacher_student_data(spec, 0, 7), Error);
}

}  // namespace
}  // namespace dts
