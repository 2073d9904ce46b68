// The alpha-beta fit (alpha_beta.h) against data generated from known lines: it must recover
// them, find where one regime ends and the next begins, not split noise into pieces, and refuse
// what is no measurement.
#include "planner/alpha_beta.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/philox.h"

namespace dts::planner {
namespace {

// Sizes 8 B, 32 B, ..., 4^k * 8 up to `largest`: the powers nccl-tests steps through (x4 here).
std::vector<double> sizes_up_to(double largest) {
  std::vector<double> sizes;
  for (double b = 8; b <= largest; b *= 4) sizes.push_back(b);
  return sizes;
}

TEST(AlphaBeta, RecoversAnExactLine) {
  // 5 us and 10 GB/s, sizes 8 B to 512 MiB: one piece, both terms to rounding (1e-9 relative:
  // the normal equations' sums over 14 sizes spanning 2^26 lose at most a few digits of 16).
  std::vector<TimedSize> points;
  for (double b : sizes_up_to(5.4e8)) points.push_back({b, 5e-6 + b / 1e10});
  const AlphaBetaFit fit = fit_alpha_beta(points);
  ASSERT_EQ(fit.pieces.size(), 1u) << fit.describe();
  EXPECT_NEAR(fit.pieces[0].alpha, 5e-6, 5e-6 * 1e-9);
  EXPECT_NEAR(fit.pieces[0].beta(), 1e10, 1e10 * 1e-9);
  EXPECT_LT(fit.max_residual(), 1e-9);
  EXPECT_EQ(fit.pieces[0].sizes, static_cast<int>(points.size()));
  EXPECT_DOUBLE_EQ(fit.pieces[0].first_bytes, 8);
}

TEST(AlphaBeta, FindsWhereTheLibraryChangesAlgorithm) {
  // A latency-bound protocol up to 128 KiB (2 us, 2 GB/s) and a bandwidth-bound one above it
  // (30 us, 12 GB/s), as NCCL's LL and Simple: two pieces, the break between the two sizes that
  // straddle the switch, each line recovered.
  std::vector<TimedSize> points;
  for (double b : sizes_up_to(5.4e8)) {
    points.push_back({b, b <= 131072 ? 2e-6 + b / 2e9 : 30e-6 + b / 12e9});
  }
  const AlphaBetaFit fit = fit_alpha_beta(points);
  ASSERT_EQ(fit.pieces.size(), 2u) << fit.describe();
  EXPECT_DOUBLE_EQ(fit.pieces[0].last_bytes, 131072);
  EXPECT_DOUBLE_EQ(fit.pieces[1].first_bytes, 524288);
  EXPECT_NEAR(fit.pieces[0].alpha, 2e-6, 2e-6 * 1e-9);
  EXPECT_NEAR(fit.pieces[1].beta(), 12e9, 12e9 * 1e-9);
  // A size in the gap takes the upper piece's line; beyond the last, the last's (extrapolated).
  EXPECT_DOUBLE_EQ(fit.seconds(262144), 30e-6 + 262144 / 12e9);
  EXPECT_FALSE(fit.covers(1e12));
  EXPECT_DOUBLE_EQ(fit.seconds(1e12), 30e-6 + 1e12 / 12e9);
  // One piece allowed: the best single line, whose residuals show it does not hold.
  const AlphaBetaFit one = fit_alpha_beta(points, 1);
  ASSERT_EQ(one.pieces.size(), 1u);
  EXPECT_GT(one.max_residual(), 0.3);
}

TEST(AlphaBeta, NoiseIsNotSplitIntoPieces) {
  // One line with +-5% multiplicative noise (uniform, Philox), three repeats of every size:
  // BIC keeps one piece, and the terms come back within the noise's reach: alpha is set by the
  // small sizes (a 5% noise on 5 us), beta by the large; 10% leaves a margin of two.
  std::vector<TimedSize> points;
  uint64_t counter = 0;
  for (int repeat = 0; repeat < 3; ++repeat) {
    for (double b : sizes_up_to(5.4e8)) {
      const double u = static_cast<double>(philox_bits(11, 0, counter++) >> 11) / 9007199254740992.0;  // [0, 1)
      points.push_back({b, (5e-6 + b / 1e10) * (1 + 0.1 * (u - 0.5))});
    }
  }
  const AlphaBetaFit fit = fit_alpha_beta(points);
  ASSERT_EQ(fit.pieces.size(), 1u) << fit.describe();
  EXPECT_NEAR(fit.pieces[0].alpha, 5e-6, 5e-7);
  EXPECT_NEAR(fit.pieces[0].beta(), 1e10, 1e9);
  EXPECT_LE(fit.max_residual(), 0.1);  // each point within 5% of the line, the fit within 10%
  EXPECT_EQ(fit.pieces[0].points, static_cast<int>(points.size()));
}

TEST(AlphaBeta, NegativeTermsAreHeldAtZero) {
  // Times that fall with size over a range (a cache effect) would give a negative 1/beta: the
  // fit keeps 1/beta = 0 (the mean latency, relative), never a negative bandwidth.
  const std::vector<TimedSize> points{{8, 4e-6}, {64, 3.9e-6}, {512, 3.8e-6}, {4096, 3.7e-6}};
  const AlphaBetaFit fit = fit_alpha_beta(points);
  // Four sizes are one piece (a piece takes three). The latency-only line minimises
  // sum ((alpha - t) / t)^2, whose minimum is alpha = sum(1/t) / sum(1/t^2).
  ASSERT_EQ(fit.pieces.size(), 1u) << fit.describe();
  double inverse = 0, inverse_squared = 0;
  for (const TimedSize& p : points) {
    inverse += 1 / p.seconds;
    inverse_squared += 1 / (p.seconds * p.seconds);
  }
  EXPECT_EQ(fit.pieces[0].inverse_beta, 0);
  EXPECT_NEAR(fit.pieces[0].alpha, inverse / inverse_squared, 4e-6 * 1e-12);
  // Pure bandwidth (time proportional to size): alpha 0 rather than negative.
  const AlphaBetaFit bandwidth = fit_alpha_beta({{1e6, 1e-4}, {2e6, 2e-4}, {4e6, 4e-4}});
  EXPECT_GE(bandwidth.pieces[0].alpha, 0);
  EXPECT_NEAR(bandwidth.pieces[0].beta(), 1e10, 1e10 * 1e-9);
}

TEST(AlphaBeta, TwoSizesAreOneExactLineAndFewerAreRefused) {
  const AlphaBetaFit two = fit_alpha_beta({{1000, 2e-6}, {2000, 3e-6}});
  ASSERT_EQ(two.pieces.size(), 1u);
  EXPECT_NEAR(two.pieces[0].alpha, 1e-6, 1e-15);
  EXPECT_NEAR(two.pieces[0].beta(), 1e9, 1e-3);
  // One size repeated, none, a time of zero, a negative size, NaN: no line.
  EXPECT_THROW(fit_alpha_beta({{1000, 2e-6}, {1000, 3e-6}}), Error);
  EXPECT_THROW(fit_alpha_beta({}), Error);
  EXPECT_THROW(fit_alpha_beta({{1000, 0}, {2000, 3e-6}}), Error);
  EXPECT_THROW(fit_alpha_beta({{-1, 1e-6}, {2000, 3e-6}}), Error);
  EXPECT_THROW(fit_alpha_beta({{1000, NAN}, {2000, 3e-6}}), Error);
  EXPECT_THROW(fit_alpha_beta({{1000, 2e-6}, {2000, 3e-6}}, 0), Error);
  // Times no clock reads: 1e200 s made every weight 1/t^2 zero and the line 0 s for every call.
  for (const double seconds : {1e200, 2e9, 1e-16, -1e-6}) {
    try {
      fit_alpha_beta({{1000, seconds}, {2000, seconds * 2}});
      ADD_FAILURE() << "fitted " << seconds;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("outside what a clock reads (1e-15 .. 1e+09 s)"), std::string::npos) << e.what();
    }
  }
  // The bounds themselves fit, to a line that is not 0.
  const AlphaBetaFit longest = fit_alpha_beta({{1000, kLongestFitTime / 2}, {2000, kLongestFitTime}});
  EXPECT_NEAR(longest.seconds(2000), kLongestFitTime, kLongestFitTime * 1e-9);
  const AlphaBetaFit shortest = fit_alpha_beta({{1000, kShortestFitTime}, {2000, 2 * kShortestFitTime}});
  EXPECT_NEAR(shortest.seconds(2000), 2 * kShortestFitTime, kShortestFitTime * 1e-9);
  // Sizes so large that the sums overflow (1e600): refused, not fitted by a constant.
  try {
    fit_alpha_beta({{1e300, 1}, {2e300, 2}});
    ADD_FAILURE() << "1e300 bytes were fitted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overflows the sums"), std::string::npos) << e.what();
  }
  try {
    fit_alpha_beta({{8, 1e-6}, {8, 2e-6}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs at least two distinct sizes, got 1 (8 bytes)"), std::string::npos)
        << e.what();
  }
}

TEST(AlphaBeta, DescribesEachPiece) {
  std::vector<TimedSize> points;
  for (double b : sizes_up_to(1e6)) points.push_back({b, 5e-6 + b / 1e10});
  const std::string text = fit_alpha_beta(points).describe();
  EXPECT_NE(text.find("alpha 5 us"), std::string::npos) << text;
  EXPECT_NE(text.find("beta 10 GB/s"), std::string::npos) << text;
  EXPECT_NE(text.find("8 bytes-"), std::string::npos) << text;
}

}  // namespace
}  // namespace dts::planner
