// Bit-level encoding of narrow IEEE-like formats from double, with round to nearest even.
// One template serves f16 (5 exponent bits, 10 mantissa bits) and bf16 (8, 7).
#include "core/half.h"

#include <bit>
#include <cmath>

#include "core/rounding.h"

namespace dts {

namespace {

template <int kExpBits, int kMantBits>
uint16_t encode(double value) {
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
  uint64_t magnitude = detail::rounded_magnitude<kExpBits, kMantBits>(b);
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
