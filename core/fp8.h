// OCP 8-bit floating point (OCP 8-bit Floating Point Specification v1.0), the storage types of
// DType::f8e4m3 and f8e5m2, beside core/half.h's f16/bf16: exact decoding, and encoding from
// double with round to nearest, ties to even, in either of OCP's two overflow modes.
//   E4M3: bias 7, no infinities, NaN only S.1111.111, largest finite 448 (S.1111.110).
//   E5M2: bias 15, IEEE-like: inf S.11111.00, NaN S.11111.{01,10,11}, largest finite 57344.
#pragma once
#include <cstdint>

namespace dts {

// OCP's two conversion modes; NaN stays NaN in both. Saturating: a magnitude that rounds past the
// largest finite value, and ±inf itself, become ±largest (cuda_fp8.h's __NV_SATFINITE, which
// NCCL's fp8 reductions use). Non-saturating: they become NaN in E4M3 (it has no inf) and ±inf
// in E5M2 (__NV_NOSAT; PyTorch's float8 casts). dtsuite's own arithmetic is non-saturating
// (core/reduce.h says why); the saturating mode is what a stack may do instead.
enum class Fp8Overflow : uint8_t { saturating, non_saturating };

uint8_t f8e4m3_bits_from_double(double value, Fp8Overflow overflow = Fp8Overflow::non_saturating);
uint8_t f8e5m2_bits_from_double(double value, Fp8Overflow overflow = Fp8Overflow::non_saturating);
double double_from_f8e4m3_bits(uint8_t bits);  // exact
double double_from_f8e5m2_bits(uint8_t bits);  // exact
// Exact too (every fp8 value is an f32), from a 256-entry table: for hot loops (reductions).
float float_from_f8e4m3_bits(uint8_t bits);
float float_from_f8e5m2_bits(uint8_t bits);

struct Fp8E4M3 {
  static constexpr uint8_t kLargestBits = 0x7e;  // 448
  uint8_t bits = 0;
  Fp8E4M3() = default;
  explicit Fp8E4M3(double v) : bits(f8e4m3_bits_from_double(v)) {}  // non-saturating
  explicit operator double() const { return float_from_f8e4m3_bits(bits); }
  explicit operator float() const { return float_from_f8e4m3_bits(bits); }
};

struct Fp8E5M2 {
  static constexpr uint8_t kLargestBits = 0x7b;  // 57344
  uint8_t bits = 0;
  Fp8E5M2() = default;
  explicit Fp8E5M2(double v) : bits(f8e5m2_bits_from_double(v)) {}  // non-saturating
  explicit operator double() const { return float_from_f8e5m2_bits(bits); }
  explicit operator float() const { return float_from_f8e5m2_bits(bits); }
};

}  // namespace dts
