// Tests of core/fp8: the OCP E4M3 and E5M2 codecs. Every one of the 256 patterns of each format
// is decoded against the specification's formula written out here, independently of fp8.cpp;
// encoding is checked by round trips, by the midpoint between every pair of neighbours (ties to
// even), and at the edges: overflow in both modes, underflow, NaN, signed zero.
#include "core/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace dts {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One format as the specification states it.
struct Spec {
  std::string name;
  int exp_bits, mant_bits, bias;
  bool has_inf;
  double largest;   // 448 = 1.75 * 2^8; 57344 = 1.75 * 2^15
  double smallest;  // the smallest subnormal: 2^(1 - bias - mant_bits)
  uint8_t (*encode)(double, Fp8Overflow);
  double (*decode)(uint8_t);
  float (*decode_float)(uint8_t);
};

const Spec kE4M3{"e4m3", 4, 3, 7, false, 448, 0x1p-9, f8e4m3_bits_from_double, double_from_f8e4m3_bits,
                 float_from_f8e4m3_bits};
const Spec kE5M2{"e5m2", 5, 2, 15, true, 57344, 0x1p-16, f8e5m2_bits_from_double, double_from_f8e5m2_bits,
                 float_from_f8e5m2_bits};

bool is_nan_pattern(const Spec& f, unsigned bits) {
  const unsigned exp = (bits >> f.mant_bits) & ((1u << f.exp_bits) - 1), man = bits & ((1u << f.mant_bits) - 1);
  const unsigned exp_max = (1u << f.exp_bits) - 1, man_max = (1u << f.mant_bits) - 1;
  return f.has_inf ? exp == exp_max && man != 0 : exp == exp_max && man == man_max;
}

// sign * 2^(e - bias) * (1 + m / 2^mbits), subnormals 2^(1 - bias) * (m / 2^mbits), specials.
double by_formula(const Spec& f, unsigned bits) {
  const double sign = (bits & 0x80) ? -1.0 : 1.0;
  const unsigned exp = (bits >> f.mant_bits) & ((1u << f.exp_bits) - 1), man = bits & ((1u << f.mant_bits) - 1);
  if (is_nan_pattern(f, bits)) return kNaN;
  if (f.has_inf && exp == (1u << f.exp_bits) - 1) return sign * kInf;
  const double fraction = man / std::pow(2.0, f.mant_bits);
  if (exp == 0) return sign * std::pow(2.0, 1 - f.bias) * fraction;
  return sign * std::pow(2.0, static_cast<int>(exp) - f.bias) * (1 + fraction);
}

// The finite non-negative patterns in increasing order of value (for fp8, increasing bits).
std::vector<uint8_t> finite_non_negative(const Spec& f) {
  std::vector<uint8_t> out;
  for (unsigned bits = 0; bits < 0x80; ++bits) {
    if (std::isfinite(by_formula(f, bits))) out.push_back(static_cast<uint8_t>(bits));
  }
  return out;
}

class Fp8Codec : public testing::TestWithParam<Spec> {};

TEST_P(Fp8Codec, EveryPatternDecodesAsTheFormulaSays) {
  const Spec& f = GetParam();
  int nans = 0, infinities = 0;
  for (unsigned bits = 0; bits < 256; ++bits) {
    const double want = by_formula(f, bits);
    const double got = f.decode(static_cast<uint8_t>(bits));
    const double got_float = static_cast<double>(f.decode_float(static_cast<uint8_t>(bits)));
    if (std::isnan(want)) {
      ++nans;
      EXPECT_TRUE(std::isnan(got) && std::isnan(got_float)) << f.name << " " << bits;
      continue;
    }
    if (std::isinf(want)) ++infinities;
    EXPECT_EQ(got, want) << f.name << " " << bits;
    EXPECT_EQ(got_float, want) << f.name << " " << bits;
    EXPECT_EQ(std::signbit(got), (bits & 0x80) != 0) << f.name << " " << bits;  // -0 included
  }
  // E4M3: S.1111.111, two patterns; E5M2: S.11111.{01,10,11}, six, and S.11111.00 twice.
  EXPECT_EQ(nans, f.has_inf ? 6 : 2);
  EXPECT_EQ(infinities, f.has_inf ? 2 : 0);
  const std::vector<uint8_t> finite = finite_non_negative(f);
  EXPECT_EQ(f.decode(finite.back()), f.largest);
  EXPECT_EQ(f.decode(finite[1]), f.smallest);
}

TEST_P(Fp8Codec, EveryFiniteValueRoundTripsInBothModes) {
  const Spec& f = GetParam();
  for (unsigned bits = 0; bits < 256; ++bits) {
    const double value = f.decode(static_cast<uint8_t>(bits));
    if (!std::isfinite(value)) continue;
    for (Fp8Overflow mode : {Fp8Overflow::saturating, Fp8Overflow::non_saturating}) {
      EXPECT_EQ(f.encode(value, mode), bits) << f.name << " " << value;
    }
  }
}

TEST_P(Fp8Codec, MidpointsTieToEvenAndNeighboursRoundToNearest) {
  const Spec& f = GetParam();
  const std::vector<uint8_t> finite = finite_non_negative(f);
  for (size_t i = 0; i + 1 < finite.size(); ++i) {
    const uint8_t low = finite[i], high = finite[i + 1];
    const double a = f.decode(low), b = f.decode(high);
    const double mid = (a + b) / 2;  // exact in double: a and b have at most 4 significant bits
    // Neighbouring patterns differ in the last mantissa bit: the even pattern has the even mantissa.
    const uint8_t even = (low & 1) == 0 ? low : high;
    for (double sign : {1.0, -1.0}) {
      const auto with_sign = [&](uint8_t bits) { return static_cast<uint8_t>(sign < 0 ? bits | 0x80 : bits); };
      EXPECT_EQ(f.encode(sign * mid, Fp8Overflow::non_saturating), with_sign(even)) << f.name << " " << sign * mid;
      EXPECT_EQ(f.encode(sign * std::nextafter(mid, 0.0), Fp8Overflow::non_saturating), with_sign(low))
          << f.name << " " << sign * mid;
      EXPECT_EQ(f.encode(sign * std::nextafter(mid, kInf), Fp8Overflow::non_saturating), with_sign(high))
          << f.name << " " << sign * mid;
    }
  }
}

TEST_P(Fp8Codec, OverflowSaturatesOrGoesToTheSpecialValue) {
  const Spec& f = GetParam();
  const uint8_t largest = f.encode(f.largest, Fp8Overflow::non_saturating);
  const uint8_t special = f.has_inf ? 0x7c : 0x7f;  // +inf in E5M2, NaN in E4M3
  // Half the largest value's ulp above it: E4M3 448 + 16 = 464 ties to 448 (mantissa 110 is
  // even; the pattern above is NaN); E5M2 57344 + 4096 = 61440 ties to inf, as IEEE 754 overflow.
  const double ulp = f.largest - f.decode(static_cast<uint8_t>(largest - 1));  // 32 and 8192
  const double threshold = f.largest + ulp / 2;
  EXPECT_EQ(f.encode(threshold, Fp8Overflow::non_saturating), f.has_inf ? special : largest) << f.name;
  EXPECT_EQ(f.encode(std::nextafter(threshold, 0.0), Fp8Overflow::non_saturating), largest) << f.name;
  for (double value : {std::nextafter(threshold, kInf), 2 * f.largest, 1e300, kInf}) {
    for (double sign : {1.0, -1.0}) {
      const uint8_t sign_bit = sign < 0 ? 0x80 : 0;
      EXPECT_EQ(f.encode(sign * value, Fp8Overflow::saturating), largest | sign_bit) << f.name << " " << sign * value;
      EXPECT_EQ(f.encode(sign * value, Fp8Overflow::non_saturating), special | sign_bit) << f.name << " " << sign * value;
    }
  }
}

TEST_P(Fp8Codec, UnderflowNaNAndSignedZero) {
  const Spec& f = GetParam();
  for (Fp8Overflow mode : {Fp8Overflow::saturating, Fp8Overflow::non_saturating}) {
    EXPECT_EQ(f.encode(0.0, mode), 0x00);
    EXPECT_EQ(f.encode(-0.0, mode), 0x80);
    // Half the smallest subnormal ties to zero (even); just above it rounds up to the subnormal.
    EXPECT_EQ(f.encode(f.smallest / 2, mode), 0x00);
    EXPECT_EQ(f.encode(-f.smallest / 2, mode), 0x80);
    EXPECT_EQ(f.encode(std::nextafter(f.smallest / 2, 1.0), mode), 0x01);
    EXPECT_EQ(f.encode(std::numeric_limits<double>::denorm_min(), mode), 0x00);
    // NaN stays NaN in both modes, with its sign.
    for (double nan : {kNaN, -kNaN, std::numeric_limits<double>::signaling_NaN()}) {
      const uint8_t bits = f.encode(nan, mode);
      EXPECT_TRUE(is_nan_pattern(f, bits)) << f.name << " " << unsigned{bits};
      EXPECT_EQ((bits & 0x80) != 0, std::signbit(nan));
    }
  }
  EXPECT_TRUE(std::signbit(f.decode(0x80)));
  EXPECT_EQ(f.decode(0x80), 0.0);
}

TEST(Fp8, StorageTypesConvertNonSaturating) {
  EXPECT_EQ(Fp8E4M3(1.0).bits, 0x38);  // 0.0111.000: 2^(7-7)
  EXPECT_EQ(Fp8E5M2(1.0).bits, 0x3c);  // 0.01111.00: 2^(15-15)
  EXPECT_EQ(static_cast<double>(Fp8E4M3(448.0)), 448.0);
  EXPECT_EQ(Fp8E4M3(448.0).bits, Fp8E4M3::kLargestBits);
  EXPECT_EQ(Fp8E5M2(57344.0).bits, Fp8E5M2::kLargestBits);
  EXPECT_TRUE(std::isnan(static_cast<double>(Fp8E4M3(1000.0))));
  EXPECT_EQ(static_cast<float>(Fp8E5M2(1e6)), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(static_cast<double>(Fp8E4M3(-kInf))));  // E4M3 has no inf
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Codec, testing::Values(kE4M3, kE5M2),
                         [](const testing::TestParamInfo<Spec>& param) { return param.param.name; });

}  // namespace
}  // namespace dts
