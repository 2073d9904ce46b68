// Tests of core/half: f16 and bf16 encoding from double (round to nearest, ties to even, one
// rounding only) and exact decoding. References are independent of half.cpp: GCC's _Float16
// conversion (libgcc __truncdfhf2, correctly rounded) for f16; for bf16, the f32 bit layout
// (bf16 is the top half of an f32) and a nearest-neighbour search over all bf16 values.
#include "core/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace dts {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

uint16_t reference_f16(double value) { return std::bit_cast<uint16_t>(static_cast<_Float16>(value)); }

bool is_f16_nan(uint16_t bits) { return (bits & 0x7c00) == 0x7c00 && (bits & 0x03ff) != 0; }
bool is_bf16_nan(uint16_t bits) { return (bits & 0x7f80) == 0x7f80 && (bits & 0x007f) != 0; }

// The next double away from zero / toward zero: one unit in the last place of a double.
double up(double x) { return std::nextafter(x, x < 0 ? -kInf : kInf); }
double down(double x) { return std::nextafter(x, 0.0); }

// bf16 decoded through its definition: the upper 16 bits of an IEEE binary32.
double bf16_by_definition(uint16_t bits) {
  return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(bits) << 16));
}

// Round-to-nearest-even bf16 of an exact f32, on its bits: add 0x7fff plus the lowest kept bit,
// then truncate. Ties (low half == 0x8000) round up only when the kept part is odd. A carry out
// of the mantissa bumps the exponent, and out of the largest finite value gives infinity.
uint16_t reference_bf16_from_float(float value) {
  const uint32_t u = std::bit_cast<uint32_t>(value);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Round-to-nearest-even bf16 of any double, by search: the two bf16 magnitudes around |x|,
// compared with their midpoint (exact in double: bf16 has 8 significant bits).
uint16_t reference_bf16(double x) {
  static const std::vector<double> magnitudes = [] {
    std::vector<double> m;  // index == bit pattern, for 0x0000 .. 0x7f7f (0 .. max finite)
    for (uint32_t b = 0; b <= 0x7f7f; ++b) m.push_back(bf16_by_definition(static_cast<uint16_t>(b)));
    return m;
  }();
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  // Past the largest finite value by half its ulp (2^(127-7) / 2 = 2^119) or more: infinity.
  const double overflow = magnitudes.back() + std::ldexp(1.0, 119);
  if (a >= overflow) return sign | 0x7f80;
  const auto above = std::lower_bound(magnitudes.begin(), magnitudes.end(), a);
  if (above == magnitudes.end()) return sign | 0x7f7f;  // between max and the overflow point
  auto hi = static_cast<uint16_t>(above - magnitudes.begin());
  if (*above == a || hi == 0) return sign | hi;
  const uint16_t lo = hi - 1;
  const double mid = (magnitudes[lo] + magnitudes[hi]) / 2;
  if (a < mid) return sign | lo;
  if (a > mid) return sign | hi;
  return sign | ((lo & 1) ? hi : lo);  // tie: the even pattern
}

// --- f16 -----------------------------------------------------------------------------------

TEST(F16, NamedValues) {
  struct Case {
    double value;
    uint16_t bits;
    const char* why;
  };
  const double sub = std::ldexp(1.0, -24);  // smallest subnormal, 2^(1-15-10)
  const Case cases[] = {
      {0.0, 0x0000, "+0"},
      {-0.0, 0x8000, "-0 keeps its sign"},
      {sub, 0x0001, "smallest subnormal 2^-24"},
      {sub / 2, 0x0000, "half of it: tie between 0 and 0x0001, even is 0"},
      {-sub / 2, 0x8000, "same tie, negative: -0"},
      {sub * 0.75, 0x0001, "0.75 of it: nearer 0x0001"},
      {sub * 1.5, 0x0002, "tie between 0x0001 and 0x0002: even is 0x0002"},
      {1023 * sub, 0x03ff, "largest subnormal, (1 - 2^-10) * 2^-14"},
      {1023.5 * sub, 0x0400, "tie between 0x03ff and 0x0400: carries into the smallest normal"},
      {std::ldexp(1.0, -14), 0x0400, "smallest normal 2^-14"},
      {std::ldexp(1.0, -26), 0x0000, "below half the smallest subnormal"},
      {1e-300, 0x0000, "far below"},
      {std::numeric_limits<double>::denorm_min(), 0x0000, "double subnormal"},
      {-std::numeric_limits<double>::denorm_min(), 0x8000, "negative double subnormal"},
      {1.0, 0x3c00, "1"},
      {1.0 + std::ldexp(1.0, -11), 0x3c00, "1 + 2^-11: tie between 1 and 1 + 2^-10, even is 1"},
      {1.0 + 3 * std::ldexp(1.0, -11), 0x3c02, "1 + 3*2^-11: tie between 0x3c01 and 0x3c02"},
      {up(1.0 + std::ldexp(1.0, -11)), 0x3c01, "just above the tie rounds up"},
      {-2.0, 0xc000, "-2"},
      {65504.0, 0x7bff, "max finite, (2 - 2^-10) * 2^15"},
      {65519.0, 0x7bff, "below max + half ulp (65520)"},
      {65520.0, 0x7c00, "max + half ulp: tie between 0x7bff (odd) and 2^16 (even): infinity"},
      {-65520.0, 0xfc00, "same, negative"},
      {1e300, 0x7c00, "far above"},
      {kInf, 0x7c00, "+inf"},
      {-kInf, 0xfc00, "-inf"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(f16_bits_from_double(c.value), c.bits) << c.why << " (" << c.value << ")";
    EXPECT_EQ(reference_f16(c.value), c.bits) << "reference disagrees: " << c.why;
  }
}

TEST(F16, NanStaysQuietNan) {
  const double quiet = std::numeric_limits<double>::quiet_NaN();
  // A signaling NaN with only the lowest payload bit: dropping payload bits must not make it inf.
  const double signaling = std::bit_cast<double>(uint64_t{0x7ff0000000000001});
  for (double nan : {quiet, -quiet, signaling}) {
    const uint16_t bits = f16_bits_from_double(nan);
    EXPECT_TRUE(is_f16_nan(bits)) << std::hex << bits;
    EXPECT_TRUE(bits & 0x0200) << "quiet bit (top mantissa bit) set: " << std::hex << bits;
    EXPECT_EQ(bits & 0x8000, std::signbit(nan) ? 0x8000 : 0);
  }
}

// Every f16 value, the midpoints between neighbours (ties: even wins) and one double ulp either
// side of each midpoint, against the correctly rounded reference.
TEST(F16, AllPatternsAndTheirMidpointsMatchReference) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const double v = double_from_f16_bits(bits);
    if (is_f16_nan(bits)) {
      ASSERT_TRUE(std::isnan(v)) << std::hex << b;
      continue;
    }
    ASSERT_EQ(f16_bits_from_double(v), bits) << "exact value " << v;
    ASSERT_EQ(reference_f16(v), bits);
    if ((bits & 0x7fff) >= 0x7c00) continue;  // infinity: no next value
    // The next magnitude; past the max finite it is 2^16, where the overflow threshold lies.
    const double next = (bits & 0x7fff) == 0x7bff ? std::copysign(65536.0, v) : double_from_f16_bits(bits + 1);
    const double mid = (v + next) / 2;  // exact: 12 significant bits
    for (double x : {mid, up(mid), down(mid)}) {
      ASSERT_EQ(f16_bits_from_double(x), reference_f16(x)) << "near midpoint of " << std::hex << b << ": " << x;
    }
  }
}

TEST(F16, RandomDoublesMatchReference) {
  // Doubles with random significands over exponents -30 .. 17: every f16 binade, the subnormal
  // range, underflow to zero and overflow to infinity.
  std::mt19937_64 rng(12345);  // fixed seed: reproducible
  std::uniform_int_distribution<int> exponent(-30, 17);
  for (int i = 0; i < 1'000'000; ++i) {
    const uint64_t significand = rng() >> 11;  // 53 random bits
    double x = std::ldexp(static_cast<double>(significand), exponent(rng) - 53);
    if (rng() & 1) x = -x;
    ASSERT_EQ(f16_bits_from_double(x), reference_f16(x)) << x;
  }
}

TEST(F16, DecodeIsExactAndFloatTableAgrees) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const double d = double_from_f16_bits(bits);
    const float f = float_from_f16_bits(bits);
    const double by_compiler = static_cast<double>(std::bit_cast<_Float16>(bits));
    if (std::isnan(d)) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_TRUE(std::isnan(by_compiler));
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), d) << std::hex << b;
    ASSERT_EQ(d, by_compiler) << std::hex << b;
    ASSERT_EQ(std::signbit(d), (b & 0x8000) != 0);
  }
}

TEST(F16, HalfTypeConverts) {
  EXPECT_EQ(Half(1.5).bits, 0x3e00);  // 1.5 = 1.1b * 2^0: exponent 15, mantissa 0x200
  EXPECT_EQ(static_cast<double>(Half(1.5)), 1.5);
  EXPECT_EQ(static_cast<float>(Half(-0.25)), -0.25f);
  EXPECT_EQ(Half().bits, 0x0000);
}

// --- bf16 ----------------------------------------------------------------------------------

TEST(BF16, NamedValues) {
  struct Case {
    double value;
    uint16_t bits;
    const char* why;
  };
  const double sub = std::ldexp(1.0, -133);  // smallest subnormal, 2^(1-127-7)
  const double max = 255 * std::ldexp(1.0, 120);  // (2 - 2^-7) * 2^127
  const double half_ulp_at_max = std::ldexp(1.0, 119);
  const Case cases[] = {
      {0.0, 0x0000, "+0"},
      {-0.0, 0x8000, "-0"},
      {sub, 0x0001, "smallest subnormal 2^-133"},
      {sub / 2, 0x0000, "half of it: tie, even is 0"},
      {sub * 0.75, 0x0001, "0.75 of it"},
      {127 * sub, 0x007f, "largest subnormal"},
      {std::ldexp(1.0, -126), 0x0080, "smallest normal 2^-126"},
      {1.0, 0x3f80, "1"},
      {1.0 + std::ldexp(1.0, -8), 0x3f80, "1 + 2^-8: tie between 1 and 1 + 2^-7, even is 1"},
      {1.0 + 3 * std::ldexp(1.0, -8), 0x3f82, "1 + 3*2^-8: tie between 0x3f81 and 0x3f82"},
      {max, 0x7f7f, "max finite"},
      {max + half_ulp_at_max, 0x7f80, "tie past max: even side is infinity"},
      {down(max + half_ulp_at_max), 0x7f7f, "just below that tie"},
      {-(max + half_ulp_at_max), 0xff80, "negative overflow"},
      {1e300, 0x7f80, "far above"},
      {kInf, 0x7f80, "+inf"},
      {-kInf, 0xff80, "-inf"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(bf16_bits_from_double(c.value), c.bits) << c.why << " (" << c.value << ")";
    EXPECT_EQ(reference_bf16(c.value), c.bits) << "reference disagrees: " << c.why;
  }
}

TEST(BF16, NanStaysQuietNan) {
  const double quiet = std::numeric_limits<double>::quiet_NaN();
  const double signaling = std::bit_cast<double>(uint64_t{0x7ff0000000000001});
  for (double nan : {quiet, -quiet, signaling}) {
    const uint16_t bits = bf16_bits_from_double(nan);
    EXPECT_TRUE(is_bf16_nan(bits)) << std::hex << bits;
    EXPECT_TRUE(bits & 0x0040) << "quiet bit set: " << std::hex << bits;
  }
}

// A double just past a bf16 tie that f32 rounds onto the tie: f64 -> f32 -> bf16 would then
// round the tie to even, the wrong way. bf16_bits_from_double must round once.
TEST(BF16, NoDoubleRoundingThroughF32) {
  // 1 + 2^-8 is the tie between 0x3f80 and 0x3f81; 2^-30 is below half an f32 ulp at 1 (2^-24).
  const double above_tie = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  ASSERT_EQ(static_cast<double>(static_cast<float>(above_tie)), 1.0 + std::ldexp(1.0, -8));
  EXPECT_EQ(reference_bf16_from_float(static_cast<float>(above_tie)), 0x3f80);  // the wrong answer
  EXPECT_EQ(bf16_bits_from_double(above_tie), 0x3f81);
  EXPECT_EQ(reference_bf16(above_tie), 0x3f81);
  // Mirror case: just below the tie 1 + 3*2^-8 between 0x3f81 (odd) and 0x3f82 (even).
  const double below_tie = 1.0 + 3 * std::ldexp(1.0, -8) - std::ldexp(1.0, -30);
  ASSERT_EQ(static_cast<double>(static_cast<float>(below_tie)), 1.0 + 3 * std::ldexp(1.0, -8));
  EXPECT_EQ(reference_bf16_from_float(static_cast<float>(below_tie)), 0x3f82);  // the wrong answer
  EXPECT_EQ(bf16_bits_from_double(below_tie), 0x3f81);
  // In the subnormal range: the tie between 0x0001 and 0x0002 is 1.5 * 2^-133; add 2^-160
  // (far below an f32 subnormal ulp, 2^-149).
  const double sub = std::ldexp(1.0, -133);
  EXPECT_EQ(bf16_bits_from_double(1.5 * sub + std::ldexp(1.0, -160)), 0x0002);
  EXPECT_EQ(bf16_bits_from_double(0.5 * sub + std::ldexp(1.0, -160)), 0x0001);  // above the 0 tie
}

// Every f32 value is exact in double, so on f32 inputs the bit trick is a reference. Covered:
// every upper half (all bf16 patterns, every exponent) with low halves at and around the tie.
TEST(BF16, FloatInputsMatchBitReference) {
  const uint32_t lows[] = {0x0000, 0x0001, 0x3fff, 0x7fff, 0x8000, 0x8001, 0xc000, 0xffff};
  for (uint32_t high = 0; high < 0x10000; ++high) {
    if ((high & 0x7f80) == 0x7f80) continue;  // inf/NaN upper halves: NaN inputs tested above
    for (uint32_t low : lows) {
      const float f = std::bit_cast<float>((high << 16) | low);
      ASSERT_EQ(bf16_bits_from_double(f), reference_bf16_from_float(f)) << std::hex << ((high << 16) | low);
    }
  }
}

// Every bf16 value, and around each midpoint (including past max finite), by search reference.
TEST(BF16, AllPatternsAndTheirMidpointsMatchReference) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const double v = double_from_bf16_bits(bits);
    ASSERT_EQ(std::isnan(v), is_bf16_nan(bits));
    if (std::isnan(v)) continue;
    ASSERT_EQ(v, bf16_by_definition(bits)) << std::hex << b;
    ASSERT_EQ(bf16_bits_from_double(v), bits) << std::hex << b;
    if ((bits & 0x7fff) >= 0x7f80) continue;
    const double next = (bits & 0x7fff) == 0x7f7f ? std::copysign(std::ldexp(1.0, 128), v)
                                                  : double_from_bf16_bits(bits + 1);
    const double mid = (v + next) / 2;
    for (double x : {mid, up(mid), down(mid)}) {
      ASSERT_EQ(bf16_bits_from_double(x), reference_bf16(x)) << "near midpoint of " << std::hex << b;
    }
  }
}

TEST(BF16, RandomDoublesMatchReference) {
  // Exponents -140 .. 130: subnormals, underflow, every binade, overflow; 53-bit significands,
  // so most values are not f32 values.
  std::mt19937_64 rng(54321);  // fixed seed: reproducible
  std::uniform_int_distribution<int> exponent(-140, 130);
  for (int i = 0; i < 300'000; ++i) {
    const uint64_t significand = rng() >> 11;
    double x = std::ldexp(static_cast<double>(significand), exponent(rng) - 53);
    if (rng() & 1) x = -x;
    ASSERT_EQ(bf16_bits_from_double(x), reference_bf16(x)) << x;
  }
}

TEST(BF16, FloatWideningAgreesWithDecoder) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const double d = double_from_bf16_bits(bits);
    const float f = float_from_bf16_bits(bits);
    if (std::isnan(d)) {
      EXPECT_TRUE(std::isnan(f));
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), d) << std::hex << b;
  }
}

TEST(BF16, BFloat16TypeConverts) {
  EXPECT_EQ(BFloat16(1.5).bits, 0x3fc0);  // 1.5: exponent 127 (0x3f8 << 4), mantissa 0x40
  EXPECT_EQ(static_cast<double>(BFloat16(-3.0)), -3.0);
  EXPECT_EQ(BFloat16().bits, 0x0000);
}

}  // namespace
}  // namespace dts
