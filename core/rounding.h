// Round to nearest, ties to even, of a double into the bit fields of a narrow binary float: the
// part shared by half.cpp (f16, bf16) and fp8.cpp (e4m3, e5m2), whose formats differ only in
// what lies past the largest finite value (inf, NaN, or a saturated value), which each decides.
#pragma once
#include <cstdint>

namespace dts::detail {

// The magnitude bits (exponent field << kMantBits | mantissa) of a finite double's |value|,
// rounded to nearest even. The exponent field is not bounded above: a result past the format's
// largest finite encoding means overflow, for the caller to map. Zero, double subnormals and
// anything below half the smallest subnormal of the format give 0.
template <int kExpBits, int kMantBits>
uint64_t rounded_magnitude(uint64_t double_bits) {
  constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  const uint64_t dexp = (double_bits >> 52) & 0x7ff;
  const uint64_t dman = double_bits & ((uint64_t{1} << 52) - 1);
  // Double subnormals lie far below half of either format's smallest subnormal.
  if (dexp == 0) return 0;
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
    // Below half the smallest subnormal: rounds to zero.
    if (shift > 54) return 0;
  }
  uint64_t kept = significand >> shift;
  const uint64_t rest = significand & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  if (rest > half || (rest == half && (kept & 1))) ++kept;
  // A subnormal's carry into bit kMantBits is exactly the smallest normal; a normal's kept holds
  // the implicit bit, and a rounding carry to 2^(mant+1) bumps the exponent by itself.
  if (exp_field == 0) return kept;
  return (exp_field << kMantBits) + kept - (uint64_t{1} << kMantBits);
}

}  // namespace dts::detail
