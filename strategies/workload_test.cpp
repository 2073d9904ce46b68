// The workload is a pure function of its seeds: shards of a parameter generated alone equal the
// same elements of the whole, samples generated in any grouping are the same, and the values
// follow the distributions they claim.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "strategies/workload.h"

namespace dts {
namespace {

TEST(Workload, LayoutIsContiguousInReferenceOrder) {
  const ModelSpec spec{3, 16, 8, 5, 1, 2};
  const auto layout = parameter_layout(spec);
  ASSERT_EQ(layout.size(), 6u);  // weight and bias of 3 layers
  EXPECT_EQ(layout[0].name, "layer0.weight");
  EXPECT_EQ(layout[0].rows, 16);
  EXPECT_EQ(layout[0].cols, 8);
  EXPECT_EQ(layout[5].name, "layer2.bias");
  EXPECT_EQ(layout[5].rows, 5);
  int64_t offset = 0;
  for (const auto& p : layout) {
    EXPECT_EQ(p.offset, offset) << p.name;
    offset += p.size();
  }
  // 8*16+16 + 16*16+16 + 16*5+5 parameters.
  EXPECT_EQ(parameter_count(spec), 8 * 16 + 16 + 16 * 16 + 16 + 16 * 5 + 5);
}

TEST(Workload, AnyShardEqualsTheSameElementsOfTheWhole) {
  const ModelSpec spec{2, 33, 7, 3, 9, 2};
  const auto all = init_parameters(spec);
  for (const auto& p : parameter_layout(spec)) {
    // Shards of 1, 5 and 17 elements, including one that ends exactly at the parameter's end.
    for (int64_t begin : {int64_t{0}, p.size() / 3, p.size() - 1}) {
      for (int64_t len : {int64_t{1}, int64_t{5}, int64_t{17}}) {
        const int64_t end = std::min(p.size(), begin + len);
        std::vector<double> shard(static_cast<size_t>(end - begin));
        init_parameter(spec, p, begin, end, shard.data());
        for (int64_t i = begin; i < end; ++i) {
          ASSERT_EQ(shard[static_cast<size_t>(i - begin)], all[static_cast<size_t>(p.offset + i)]) << p.name << " " << i;
        }
      }
    }
  }
}

TEST(Workload, ParametersFollowPyTorchLinearInit) {
  const ModelSpec spec{1, 1, 400, 100, 3, 2};  // one Linear of 100 x 400: fan_in 400
  const auto layout = parameter_layout(spec);
  std::vector<double> w(static_cast<size_t>(layout[0].size()));
  init_parameter(spec, layout[0], 0, layout[0].size(), w.data());
  const double bound = 1.0 / std::sqrt(400.0);
  double sum = 0, sum_sq = 0;
  for (double v : w) {
    ASSERT_GE(v, -bound);
    ASSERT_LT(v, bound);
    sum += v;
    sum_sq += v * v;
  }
  const double n = static_cast<double>(w.size());
  // Uniform(-b, b): mean 0, variance b^2/3. The sample mean's standard error is b/sqrt(3n);
  // allow 5 of them. The variance estimate's relative standard error is about sqrt(0.8/n) for a
  // uniform (excess kurtosis -1.2); allow 5 of those too.
  EXPECT_LT(std::fabs(sum / n), 5 * bound / std::sqrt(3 * n));
  EXPECT_NEAR(sum_sq / n, bound * bound / 3, 5 * std::sqrt(0.8 / n) * bound * bound / 3);
  // A different seed gives different values.
  ModelSpec other = spec;
  other.seed = 4;
  EXPECT_NE(init_parameters(other), init_parameters(spec));
}

TEST(Workload, SamplesDoNotDependOnHowTheyAreGrouped) {
  const ModelSpec spec{2, 8, 6, 4, 1, 7};
  const Batch whole = make_batch(spec, 0, 10);
  const Batch part = make_batch(spec, 5, 3);
  for (int64_t s = 0; s < 3; ++s) {
    EXPECT_EQ(part.labels[static_cast<size_t>(s)], whole.labels[static_cast<size_t>(5 + s)]);
    for (int64_t f = 0; f < 6; ++f) {
      EXPECT_EQ(part.x[static_cast<size_t>(s * 6 + f)], whole.x[static_cast<size_t>((5 + s) * 6 + f)]);
    }
  }
}

TEST(Workload, SamplesAreStandardNormalAndLabelsUseEveryClass) {
  const ModelSpec spec{2, 8, 16, 10, 1, 3};
  const Batch b = make_batch(spec, 0, 2000);
  double sum = 0, sum_sq = 0;
  for (double v : b.x) {
    sum += v;
    sum_sq += v * v;
  }
  const double n = static_cast<double>(b.x.size());
  // N(0,1): the mean's standard error is 1/sqrt(n), the variance estimate's sqrt(2/n); 5 of each.
  EXPECT_LT(std::fabs(sum / n), 5 / std::sqrt(n));
  EXPECT_NEAR(sum_sq / n, 1.0, 5 * std::sqrt(2 / n));
  std::set<int32_t> classes(b.labels.begin(), b.labels.end());
  // A random linear teacher over 16 Gaussian features: every one of 10 classes wins sometimes
  // in 2000 samples (each class's share is far above 1/2000).
  EXPECT_EQ(classes.size(), 10u);
  for (int32_t c : b.labels) {
    EXPECT_GE(c, 0);
    EXPECT_LT(c, 10);
  }
}

TEST(Workload, WordDigestSeesOneFlippedBitAnywhere) {
  // 1000 bytes: 31 whole 32-byte blocks (every lane) and an 8-byte tail taken byte by byte.
  std::vector<unsigned char> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 37 + 11);
  const uint64_t digest = word_digest(data.data(), data.size());
  EXPECT_EQ(word_digest(data.data(), data.size()), digest);
  for (size_t at : {size_t{0}, size_t{9}, size_t{17}, size_t{31}, size_t{500}, size_t{991}, size_t{999}}) {
    for (int bit : {0, 7}) {
      std::vector<unsigned char> flipped = data;
      flipped[at] = static_cast<unsigned char>(flipped[at] ^ (1u << bit));
      EXPECT_NE(word_digest(flipped.data(), flipped.size()), digest) << "byte " << at << " bit " << bit;
    }
  }
  // Zeros of two lengths, and another seed, differ.
  const std::vector<unsigned char> zeros(64, 0);
  EXPECT_NE(word_digest(zeros.data(), 32), word_digest(zeros.data(), 64));
  EXPECT_NE(word_digest(data.data(), data.size(), 1), digest);
}

}  // namespace
}  // namespace dts
