// IEEE binary16 (f16) and bfloat16 storage types with round-to-nearest-even conversions.
// Conversions go through double so that f64 -> f16 rounds once (no double rounding via f32).
#pragma once
#include <cstdint>

namespace dts {

uint16_t f16_bits_from_double(double value);   // round to nearest, ties to even; overflow -> inf
uint16_t bf16_bits_from_double(double value);  // likewise; NaN stays NaN (quiet)
double double_from_f16_bits(uint16_t bits);    // exact
double double_from_bf16_bits(uint16_t bits);   // exact
// Fast exact widening for hot loops (reductions): a table for f16, a shift for bf16.
float float_from_f16_bits(uint16_t bits);
inline float float_from_bf16_bits(uint16_t bits) {
  return __builtin_bit_cast(float, static_cast<uint32_t>(bits) << 16);
}

struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(double v) : bits(f16_bits_from_double(v)) {}
  explicit operator double() const { return float_from_f16_bits(bits); }
  explicit operator float() const { return float_from_f16_bits(bits); }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(double v) : bits(bf16_bits_from_double(v)) {}
  explicit operator double() const { return float_from_bf16_bits(bits); }
  explicit operator float() const { return float_from_bf16_bits(bits); }
};

}  // namespace dts
