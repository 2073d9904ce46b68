// Bit-level encoding of narrow IEEE-like formats from double, with round to nearest even.
// One template serves f16 (5 exponent bits, 10 mantissa bits) and bf16 (8, 7).
#include "core/half.h"

#include <bit>
#include <cmath>

namespace dts {

namespace {

template <int kExpBits, int kMantBits>
uint16_t encode(double value) {
  constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  constexpr uint64_t kExpMax = (1u << kExpBits) - 1;
  const auto b = std::bit_cast<uint64_t>(value);
  const uint64_t sign = (b >> 63) << (kExpBits + kMantBits);
  const uint64_t dexp = (b >> 52) & 0x7ff;
  const uint64_t dman = b & ((uint64_t{1} << 52) - 1);
  if (dexp == 0x7ff) {
    if (dman == 0) return static_cast<uint16_t>(sign | (kExpMax << kMantBits));  // infinity
    // NaN: keep the top payload bits and force the quiet bit so it cannot become infinity.
    const uint64_t payload = dman >> (52 - kMantBits);
    return static_cast<uint16_t>(sign | (kExpMax << kMantBits) | (uint64_t{1} << (kMantBits - 1)) |
                                 payload);
  }
  // Zero, and double subnormals (far below half of either format's smallest subnormal).
  if (dexp == 0) return static_cast<uint16_t>(sign);
  const int e = static_cast<int>(dexp) - 1023;
  const uint64_t significand = (uint64_t{1} << 52) | dman;  // 53 bits, value = sig * 2^(e-52)
  int shift;                                                // low bits of significand to drop
  uint64_t exp_field;
  if (e >= 1 - kBias) {
    shift = 52 - kMantBits;
    exp_field = static_cast<uint64_t>(e + kBias);
  } else {
    // Subnormal in the target: units of 2^(1 - bias - mant_bits).
    shift = 52 - kMantBits + (1 - kBias - e);
    exp_field = 0;
    // Below half the smallest subnormal: rounds to (signed) zero.
    if (shift > 54) return static_cast<uint16_t>(sign);
  }
  uint64_t kept = significand >> shift;
  const uint64_t rest = significand & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  if (rest > half || (rest == half && (kept & 1))) ++kept;
  uint64_t magnitude;
  if (exp_field == 0) {
    magnitude = kept;  // a carry into bit kMantBits is exactly the smallest normal
  } else {
    // kept holds the implicit bit; a rounding carry to 2^(mant+1) bumps the exponent by itself.
    magnitude = (exp_field << kMantBits) + kept - (uint64_t{1} << kMantBits);
  }
  if (magnitude >= (kExpMax << kMantBits)) magnitude = kExpMax << kMantBits;  // overflow -> inf
  return static_cast<uint16_t>(sign | magnitude);
}

template <int kExpBits, int kMantBits>
double decode(uint16_t bits) {
  constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  constexpr uint32_t kExpMax = (1u << kExpBits) - 1;
  const bool negative = (bits >> (kExpBits + kMantBits)) & 1;
  const uint32_t exp = (bits >> kMantBits) & kExpMax;
  const uint32_t man = bits & ((1u << kMantBits) - 1);
  double magnitude;
  if (exp == kExpMax) {
    magnitude = man ? std::nan("") : INFINITY;
  } else if (exp == 0) {
    magnitude = std::ldexp(static_cast<double>(man), 1 - kBias - kMantBits);
  } else {
    magnitude = std::ldexp(static_cast<double>(man | (1u << kMantBits)), static_cast<int>(exp) - kBias - kMantBits);
  }
  return negative ? -magnitude : magnitude;
}

}  // namespace

uint16_t f16_bits_from_double(double value) { return encode<5, 10>(value); }
uint16_t bf16_bits_from_double(double value) { return encode<8, 7>(value); }
double double_from_f16_bits(uint16_t bits) { return decode<5, 10>(bits); }
double double_from_bf16_bits(uint16_t bits) { return decode<8, 7>(bits); }

float float_from_f16_bits(uint16_t bits) {
  // Every f16 value is exact in f32, so a 256 KiB table built once from the exact decoder is exact.
  static const auto* table = [] {
    auto* t = new float[65536];
    for (uint32_t i = 0; i < 65536; ++i) t[i] = static_cast<float>(decode<5, 10>(static_cast<uint16_t>(i)));
    return t;
  }();
  return table[bits];
}

}  // namespace dts
