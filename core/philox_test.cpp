// Tests of core/philox: Philox4x32-10 against the Random123 known-answer vectors, and the
// derived helpers (philox_bits, philox_uniform): range, determinism and the mean of many draws.
#include "core/philox.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dts {
namespace {

// Random123 tests/kat_vectors, the three "philox4x32 10" lines: counter[4], key[2] -> output[4].
struct KnownAnswer {
  PhiloxCounter counter;
  PhiloxKey key;
  PhiloxCounter expected;
};
constexpr KnownAnswer kKnownAnswers[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    // The digits of pi as counter and key.
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

// philox4x32_10 is constexpr: the vectors hold at compile time too, so a wrong constant in the
// header fails the build of this file, not only the test run.
static_assert(philox4x32_10(kKnownAnswers[0].counter, kKnownAnswers[0].key) == kKnownAnswers[0].expected);
static_assert(philox4x32_10(kKnownAnswers[2].counter, kKnownAnswers[2].key) == kKnownAnswers[2].expected);

TEST(Philox, Random123KnownAnswers) {
  for (const KnownAnswer& kat : kKnownAnswers) {
    const PhiloxCounter out = philox4x32_10(kat.counter, kat.key);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(out[i], kat.expected[i]) << "word " << i << std::hex << " got " << out[i];
  }
}

TEST(Philox, BitsAreAPureFunctionOfSeedStreamIndex) {
  EXPECT_EQ(philox_bits(1, 2, 3), philox_bits(1, 2, 3));
  // Changing any one input changes the output (a collision among these would be a 2^-64 event).
  EXPECT_NE(philox_bits(1, 2, 3), philox_bits(2, 2, 3));
  EXPECT_NE(philox_bits(1, 2, 3), philox_bits(1, 3, 3));
  EXPECT_NE(philox_bits(1, 2, 3), philox_bits(1, 2, 4));
  // The high halves of index and stream are used, not dropped.
  EXPECT_NE(philox_bits(1, 2, 3), philox_bits(1, 2, 3 + (uint64_t{1} << 32)));
  EXPECT_NE(philox_bits(1, 2, 3), philox_bits(1, 2 + (uint64_t{1} << 32), 3));
  EXPECT_NE(philox_bits(1, 2, 3), philox_bits(1 + (uint64_t{1} << 32), 2, 3));
  // Layout: counter {index lo, index hi, stream lo, stream hi}, key {seed lo, seed hi}; the
  // 64 bits are output words 0 and 1. With all zeros that is the first known answer.
  EXPECT_EQ(philox_bits(0, 0, 0), (uint64_t{0x6627e8d5} << 32) | 0xe169c58d);
}

TEST(Philox, UniformIsInUnitIntervalWithTheRightMean) {
  constexpr int kDraws = 100000;
  double sum = 0, low = 1, high = 0;
  for (int i = 0; i < kDraws; ++i) {
    const double u = philox_uniform(42, 7, static_cast<uint64_t>(i));
    sum += u;
    low = std::min(low, u);
    high = std::max(high, u);
  }
  EXPECT_GE(low, 0.0);
  EXPECT_LT(high, 1.0);
  // U(0,1) has variance 1/12, so the mean of N draws has standard deviation 1/sqrt(12 N)
  // (about 9.1e-4 for N = 1e5); 5 standard deviations fail a correct generator with
  // probability below 1e-6.
  const double sigma = 1.0 / std::sqrt(12.0 * kDraws);
  EXPECT_NEAR(sum / kDraws, 0.5, 5 * sigma);
}

TEST(Philox, UniformExtremes) {
  // 53 bits scaled by 2^-53: the largest value is 1 - 2^-53, which is below 1 exactly.
  EXPECT_LT(static_cast<double>((~uint64_t{0}) >> 11) * 0x1.0p-53, 1.0);
  EXPECT_EQ(philox_uniform(0, 0, 0), static_cast<double>(philox_bits(0, 0, 0) >> 11) * 0x1.0p-53);
}

}  // namespace
}  // namespace dts
