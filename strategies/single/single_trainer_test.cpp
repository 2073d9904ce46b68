// The reference trainer: its backward pass against central finite differences of its own loss
// (double), training on the teacher-student task really lowers the loss, and two runs give the
// same bits.
#include <gtest/gtest.h>

#include <cmath>

#include "strategies/single/single_trainer.h"

namespace dts {
namespace {

TEST(SingleTrainer, GradientsMatchFiniteDifferences) {
  const ModelSpec spec{3, 5, 4, 3, 11, 12};  // 3 layers, odd widths, every parameter checked
  const Batch batch = make_batch(spec, 0, 6);
  SingleTrainer<double> trainer(spec, {});
  const std::vector<double> grad = trainer.gradients(batch);
  const std::vector<double> p0 = trainer.parameters();
  // Central differences: truncation O(h^2 * |f'''|) ~ 1e-12 at h = 1e-6, rounding
  // O(eps * |f| / h) ~ 2e-16 * 1 / 1e-6 = 2e-10. Allow 1e-7 absolute + 1e-5 relative.
  const double h = 1e-6;
  for (size_t i = 0; i < p0.size(); ++i) {
    std::vector<double> p = p0;
    p[i] = p0[i] + h;
    trainer.set_parameters(p);
    const double up = trainer.loss(batch);
    p[i] = p0[i] - h;
    trainer.set_parameters(p);
    const double down = trainer.loss(batch);
    const double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(grad[i], numeric, 1e-7 + 1e-5 * std::fabs(numeric)) << "parameter " << i;
  }
}

TEST(SingleTrainer, TrainingLowersTheLoss) {
  const ModelSpec spec{3, 32, 16, 4, 1, 2};
  TrainConfig config;
  config.adamw.lr = 3e-3;
  SingleTrainer<float> trainer(spec, config);
  const Batch held_out = make_batch(spec, 1000000, 512);
  const double before = trainer.loss(held_out);
  for (int step = 0; step < 200; ++step) trainer.step(make_batch(spec, step * 64, 64));
  const double after = trainer.loss(held_out);
  // At initialization the loss is near log(4) = 1.386 (small random logits). The task is
  // linearly separable, so 200 AdamW steps must at least halve it on unseen samples.
  EXPECT_NEAR(before, std::log(4.0), 0.2);
  EXPECT_LT(after, before / 2);
}

TEST(SingleTrainer, SameConfigSameBits) {
  const ModelSpec spec{2, 16, 8, 3, 5, 6};
  for (OptimizerKind kind : {OptimizerKind::sgd, OptimizerKind::adamw}) {
    TrainConfig config;
    config.optimizer = kind;
    SingleTrainer<float> a(spec, config), b(spec, config);
    for (int step = 0; step < 5; ++step) {
      const Batch batch = make_batch(spec, step * 32, 32);
      EXPECT_EQ(a.step(batch), b.step(batch));
    }
    EXPECT_EQ(a.parameters(), b.parameters());
  }
}

}  // namespace
}  // namespace dts
