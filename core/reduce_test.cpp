// Tests of core/reduce: reduce_into per dtype and op against hand-computed values (integer wrap,
// NaN propagation), f16/bf16/fp8 combines against one correct rounding of the exact result,
// divide_by (truncation toward zero, narrow-float rounding) and fill_identity.
#include "core/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/element.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/half.h"

namespace dts {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

template <class T>
std::vector<T> reduced(DType dtype, ReduceOp op, std::vector<T> acc, const std::vector<T>& in) {
  EXPECT_EQ(acc.size(), in.size());
  reduce_into(dtype, op, acc.data(), in.data(), acc.size());
  return acc;
}

template <class T>
using Limits = std::numeric_limits<T>;

// --- integers: two's complement wrap ---------------------------------------------------------

TEST(ReduceInto, Int8) {
  const std::vector<int8_t> acc{127, -128, 16, -128, 5, -3};
  const std::vector<int8_t> in{1, -1, 8, -1, -7, 2};
  // 127 + 1 wraps to -128; -128 + -1 wraps to 127.
  EXPECT_EQ(reduced(DType::i8, ReduceOp::sum, acc, in), (std::vector<int8_t>{-128, 127, 24, 127, -2, -1}));
  // 127 * 1 = 127; -128 * -1 = 128 wraps to -128; 16 * 8 = 128 wraps to -128; 5 * -7 = -35.
  EXPECT_EQ(reduced(DType::i8, ReduceOp::prod, acc, in), (std::vector<int8_t>{127, -128, -128, -128, -35, -6}));
  EXPECT_EQ(reduced(DType::i8, ReduceOp::min, acc, in), (std::vector<int8_t>{1, -128, 8, -128, -7, -3}));
  EXPECT_EQ(reduced(DType::i8, ReduceOp::max, acc, in), (std::vector<int8_t>{127, -1, 16, -1, 5, 2}));
  // avg's combine step is the sum; divide_by finishes it.
  EXPECT_EQ(reduced(DType::i8, ReduceOp::avg, acc, in), reduced(DType::i8, ReduceOp::sum, acc, in));
}

TEST(ReduceInto, UInt8) {
  const std::vector<uint8_t> acc{255, 16, 200, 0, 7};
  const std::vector<uint8_t> in{1, 16, 2, 255, 3};
  // 255 + 1 wraps to 0; 200 + 2 = 202; 0 + 255 = 255.
  EXPECT_EQ(reduced(DType::u8, ReduceOp::sum, acc, in), (std::vector<uint8_t>{0, 32, 202, 255, 10}));
  // 16 * 16 = 256 wraps to 0; 200 * 2 = 400 = 256 + 144.
  EXPECT_EQ(reduced(DType::u8, ReduceOp::prod, acc, in), (std::vector<uint8_t>{255, 0, 144, 0, 21}));
  // Unsigned order: 255 is the largest, not -1.
  EXPECT_EQ(reduced(DType::u8, ReduceOp::min, acc, in), (std::vector<uint8_t>{1, 16, 2, 0, 3}));
  EXPECT_EQ(reduced(DType::u8, ReduceOp::max, acc, in), (std::vector<uint8_t>{255, 16, 200, 255, 7}));
}

TEST(ReduceInto, Int32) {
  const int32_t max = Limits<int32_t>::max(), min = Limits<int32_t>::min();
  const std::vector<int32_t> acc{max, min, 65536, 65537, -6};
  const std::vector<int32_t> in{1, -1, 65536, 65537, 7};
  EXPECT_EQ(reduced(DType::i32, ReduceOp::sum, acc, in), (std::vector<int32_t>{min, max, 131072, 131074, 1}));
  // 2^16 * 2^16 = 2^32 wraps to 0; (2^16 + 1)^2 = 2^32 + 2^17 + 1 wraps to 131073.
  EXPECT_EQ(reduced(DType::i32, ReduceOp::prod, acc, in), (std::vector<int32_t>{max, min, 0, 131073, -42}));
  EXPECT_EQ(reduced(DType::i32, ReduceOp::min, acc, in), (std::vector<int32_t>{1, min, 65536, 65537, -6}));
  EXPECT_EQ(reduced(DType::i32, ReduceOp::max, acc, in), (std::vector<int32_t>{max, -1, 65536, 65537, 7}));
}

TEST(ReduceInto, Int64) {
  const int64_t max = Limits<int64_t>::max(), min = Limits<int64_t>::min();
  const int64_t two32 = int64_t{1} << 32;
  const std::vector<int64_t> acc{max, min, two32, two32 + 1, -3};
  const std::vector<int64_t> in{1, -1, two32, two32 + 1, 5};
  EXPECT_EQ(reduced(DType::i64, ReduceOp::sum, acc, in),
            (std::vector<int64_t>{min, max, 2 * two32, 2 * two32 + 2, 2}));
  // 2^32 * 2^32 = 2^64 wraps to 0; (2^32 + 1)^2 = 2^64 + 2^33 + 1 wraps to 2^33 + 1.
  EXPECT_EQ(reduced(DType::i64, ReduceOp::prod, acc, in),
            (std::vector<int64_t>{max, min, 0, 2 * two32 + 1, -15}));
  EXPECT_EQ(reduced(DType::i64, ReduceOp::min, acc, in), (std::vector<int64_t>{1, min, two32, two32 + 1, -3}));
  EXPECT_EQ(reduced(DType::i64, ReduceOp::max, acc, in), (std::vector<int64_t>{max, -1, two32, two32 + 1, 5}));
}

// Unsigned 32 and 64 bits: wrap modulo 2^bits, and order as unsigned (values above the signed
// maximum are the largest, not negative).
TEST(ReduceInto, UInt32AndUInt64) {
  const uint32_t max32 = Limits<uint32_t>::max(), top32 = uint32_t{1} << 31;
  const std::vector<uint32_t> acc32{max32, top32, 65536, 65537, 5};
  const std::vector<uint32_t> in32{1, top32, 65536, 65537, top32};
  // max + 1 wraps to 0; 2^31 + 2^31 = 2^32 wraps to 0; 2^16 * 2^16 = 2^32 wraps to 0;
  // (2^16 + 1)^2 = 2^32 + 2^17 + 1 wraps to 2^17 + 1; 5 * 2^31 = 2^33 + 2^31 wraps to 2^31.
  EXPECT_EQ(reduced(DType::u32, ReduceOp::sum, acc32, in32), (std::vector<uint32_t>{0, 0, 131072, 131074, 5 + top32}));
  EXPECT_EQ(reduced(DType::u32, ReduceOp::prod, acc32, in32), (std::vector<uint32_t>{max32, 0, 0, 131073, top32}));
  EXPECT_EQ(reduced(DType::u32, ReduceOp::min, acc32, in32), (std::vector<uint32_t>{1, top32, 65536, 65537, 5}));
  EXPECT_EQ(reduced(DType::u32, ReduceOp::max, acc32, in32), (std::vector<uint32_t>{max32, top32, 65536, 65537, top32}));

  const uint64_t max64 = Limits<uint64_t>::max(), top64 = uint64_t{1} << 63, two32 = uint64_t{1} << 32;
  const std::vector<uint64_t> acc64{max64, top64, two32, 3};
  const std::vector<uint64_t> in64{2, top64, two32 + 1, top64};
  // max + 2 wraps to 1; 2^63 * 2 (as 2^63 + 2^63) wraps to 0; 2^32 * (2^32 + 1) = 2^64 + 2^32
  // wraps to 2^32; 3 * 2^63 = 2^64 + 2^63 wraps to 2^63.
  EXPECT_EQ(reduced(DType::u64, ReduceOp::sum, acc64, in64), (std::vector<uint64_t>{1, 0, 2 * two32 + 1, top64 + 3}));
  EXPECT_EQ(reduced(DType::u64, ReduceOp::prod, acc64, in64), (std::vector<uint64_t>{max64 - 1, 0, two32, top64}));
  EXPECT_EQ(reduced(DType::u64, ReduceOp::min, acc64, in64), (std::vector<uint64_t>{2, top64, two32, 3}));
  EXPECT_EQ(reduced(DType::u64, ReduceOp::max, acc64, in64), (std::vector<uint64_t>{max64, top64, two32 + 1, top64}));
}

// --- wide floats ----------------------------------------------------------------------------

template <class T>
void check_wide_float(DType dtype) {
  // Values with few significant bits: every result below is exact, so == is the right test.
  const std::vector<T> acc{1.5, -2, 3, 0.25};
  const std::vector<T> in{2.25, 4, -0.5, -0.25};
  EXPECT_EQ(reduced(dtype, ReduceOp::sum, acc, in), (std::vector<T>{3.75, 2, 2.5, 0}));
  EXPECT_EQ(reduced(dtype, ReduceOp::avg, acc, in), (std::vector<T>{3.75, 2, 2.5, 0}));
  EXPECT_EQ(reduced(dtype, ReduceOp::prod, acc, in), (std::vector<T>{3.375, -8, -1.5, -0.0625}));
  EXPECT_EQ(reduced(dtype, ReduceOp::min, acc, in), (std::vector<T>{1.5, -2, -0.5, -0.25}));
  EXPECT_EQ(reduced(dtype, ReduceOp::max, acc, in), (std::vector<T>{2.25, 4, 3, 0.25}));
  // Infinity behaves as IEEE says: inf + -inf is NaN, min picks -inf.
  const T inf = Limits<T>::infinity();
  EXPECT_TRUE(std::isnan(reduced(dtype, ReduceOp::sum, std::vector<T>{inf}, {-inf})[0]));
  EXPECT_EQ(reduced(dtype, ReduceOp::min, std::vector<T>{inf}, {-inf})[0], -inf);
}

TEST(ReduceInto, Float32) { check_wide_float<float>(DType::f32); }
TEST(ReduceInto, Float64) { check_wide_float<double>(DType::f64); }

// min/max must propagate NaN whichever side it is on (a wrong element must not vanish into a
// plausible value, as fmin/fmax or a plain comparison would let it).
TEST(ReduceInto, MinMaxPropagateNan) {
  for (ReduceOp op : {ReduceOp::min, ReduceOp::max}) {
    const std::vector<float> f = reduced(DType::f32, op, std::vector<float>{NAN, 1.0f}, {1.0f, NAN});
    EXPECT_TRUE(std::isnan(f[0]) && std::isnan(f[1])) << name(op);
    const std::vector<double> d = reduced(DType::f64, op, std::vector<double>{kNan, 1.0}, {1.0, kNan});
    EXPECT_TRUE(std::isnan(d[0]) && std::isnan(d[1])) << name(op);
    const uint16_t f16_nan = f16_bits_from_double(kNan), f16_one = f16_bits_from_double(1.0);
    std::vector<uint16_t> h{f16_nan, f16_one};
    const std::vector<uint16_t> h_in{f16_one, f16_nan};
    reduce_into(DType::f16, op, h.data(), h_in.data(), 2);
    EXPECT_TRUE(std::isnan(double_from_f16_bits(h[0])) && std::isnan(double_from_f16_bits(h[1]))) << name(op);
    const uint16_t bf16_nan = bf16_bits_from_double(kNan), bf16_one = bf16_bits_from_double(1.0);
    std::vector<uint16_t> b{bf16_nan, bf16_one};
    const std::vector<uint16_t> b_in{bf16_one, bf16_nan};
    reduce_into(DType::bf16, op, b.data(), b_in.data(), 2);
    EXPECT_TRUE(std::isnan(double_from_bf16_bits(b[0])) && std::isnan(double_from_bf16_bits(b[1]))) << name(op);
  }
}

// --- f16 / bf16: one correct rounding per combine -----------------------------------------------

double exact_combine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return a + b;
    case ReduceOp::prod: return a * b;
    case ReduceOp::min: return std::isnan(a) || std::isnan(b) ? kNan : std::min(a, b);
    case ReduceOp::max: return std::isnan(a) || std::isnan(b) ? kNan : std::max(a, b);
  }
  return kNan;
}

// Every f16 value against 48 partners (special values and random ones), for each op. The
// reference computes in double, where the sum or product of two f16 values is exact (a sum spans
// at most 2^16 .. 2^-24, 41 bits; a product has 22 significant bits), then rounds once with
// _Float16 (libgcc's correctly rounded conversion).
TEST(ReduceInto, F16CombineIsCorrectlyRounded) {
  std::vector<uint16_t> all(0x10000);
  for (uint32_t b = 0; b < 0x10000; ++b) all[b] = static_cast<uint16_t>(b);
  std::vector<uint16_t> partners{0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x3c01,
                                 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x1400, 0x5bff, 0x3555, 0x0200};
  std::mt19937 rng(2024);  // fixed seed: reproducible
  // Random finite values of either sign: magnitude below 0x7c00 (infinity).
  while (partners.size() < 48) partners.push_back(static_cast<uint16_t>((rng() % 0x7c00) | (rng() & 0x8000)));
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
    for (uint16_t partner : partners) {
      std::vector<uint16_t> acc = all;
      const std::vector<uint16_t> in(all.size(), partner);
      reduce_into(DType::f16, op, acc.data(), in.data(), acc.size());
      for (uint32_t i = 0; i < 0x10000; ++i) {
        const double exact = exact_combine(op, double_from_f16_bits(all[i]), double_from_f16_bits(partner));
        const uint16_t want = std::bit_cast<uint16_t>(static_cast<_Float16>(exact));
        if (std::isnan(exact)) {
          ASSERT_TRUE(std::isnan(double_from_f16_bits(acc[i]))) << name(op) << std::hex << " " << i << " " << partner;
        } else {
          ASSERT_EQ(acc[i], want) << name(op) << std::hex << " " << i << " " << partner;
        }
      }
    }
  }
}

// The same for bf16. Exponents there span 2^-133 .. 2^128, so a sum may not be exact in double;
// rounding the double result again to bf16 is still correct because double has at least
// 2 * 8 + 2 significant bits (Figueroa's double-rounding theorem). bf16_bits_from_double is
// checked exhaustively in half_test.
TEST(ReduceInto, BF16CombineIsCorrectlyRounded) {
  std::vector<uint16_t> all(0x10000);
  for (uint32_t b = 0; b < 0x10000; ++b) all[b] = static_cast<uint16_t>(b);
  std::vector<uint16_t> partners{0x0000, 0x8000, 0x0001, 0x007f, 0x0080, 0x3f80, 0xbf80, 0x3f81,
                                 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x3c00, 0x4b7f, 0x3eab};
  std::mt19937 rng(2025);  // fixed seed: reproducible
  // Random finite values of either sign: magnitude below 0x7f80 (infinity).
  while (partners.size() < 40) partners.push_back(static_cast<uint16_t>((rng() % 0x7f80) | (rng() & 0x8000)));
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
    for (uint16_t partner : partners) {
      std::vector<uint16_t> acc = all;
      const std::vector<uint16_t> in(all.size(), partner);
      reduce_into(DType::bf16, op, acc.data(), in.data(), acc.size());
      for (uint32_t i = 0; i < 0x10000; ++i) {
        const double exact = exact_combine(op, double_from_bf16_bits(all[i]), double_from_bf16_bits(partner));
        if (std::isnan(exact)) {
          ASSERT_TRUE(std::isnan(double_from_bf16_bits(acc[i]))) << name(op) << std::hex << " " << i;
        } else {
          ASSERT_EQ(acc[i], bf16_bits_from_double(exact)) << name(op) << std::hex << " " << i << " " << partner;
        }
      }
    }
  }
}

TEST(ReduceInto, F16HandPicked) {
  // 2048 + 1: f16 has 11 significant bits, so 2049 is a tie between 2048 (even) and 2050.
  std::vector<uint16_t> acc{f16_bits_from_double(2048), f16_bits_from_double(65504)};
  const std::vector<uint16_t> in{f16_bits_from_double(1), f16_bits_from_double(16)};
  reduce_into(DType::f16, ReduceOp::sum, acc.data(), in.data(), 2);
  EXPECT_EQ(acc[0], f16_bits_from_double(2048));
  // 65504 + 16 = 65520, the overflow tie: infinity, as a correctly rounded f16 add gives.
  EXPECT_EQ(acc[1], 0x7c00);
}

// --- counts 0 and 1 -------------------------------------------------------------------------------

// fp8: every pair of patterns (256 x 256) and op. The sum and product of two fp8 values are exact
// in double (exponents span 2^-16 .. 2^16, 4 significant bits each), so the reference rounds
// once, non-saturating (core/reduce.h): e4m3 overflows to NaN, e5m2 to ±inf.
TEST(ReduceInto, Fp8CombineIsCorrectlyRoundedNonSaturating) {
  struct Format {
    DType dtype;
    double (*decode)(uint8_t);
    uint8_t (*encode)(double, Fp8Overflow);
  };
  for (const Format f : {Format{DType::f8e4m3, double_from_f8e4m3_bits, f8e4m3_bits_from_double},
                         Format{DType::f8e5m2, double_from_f8e5m2_bits, f8e5m2_bits_from_double}}) {
    std::vector<uint8_t> all(256);
    for (unsigned b = 0; b < 256; ++b) all[b] = static_cast<uint8_t>(b);
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
      for (unsigned partner = 0; partner < 256; ++partner) {
        std::vector<uint8_t> acc = all;
        const std::vector<uint8_t> in(all.size(), static_cast<uint8_t>(partner));
        reduce_into(f.dtype, op, acc.data(), in.data(), acc.size());
        for (unsigned i = 0; i < 256; ++i) {
          const double exact = exact_combine(op, f.decode(all[i]), f.decode(static_cast<uint8_t>(partner)));
          if (std::isnan(exact)) {
            ASSERT_TRUE(std::isnan(f.decode(acc[i]))) << name(f.dtype) << " " << name(op) << " " << i << " " << partner;
          } else {
            ASSERT_EQ(acc[i], f.encode(exact, Fp8Overflow::non_saturating))
                << name(f.dtype) << " " << name(op) << " " << i << " " << partner;
          }
        }
      }
    }
  }
  // By hand: e4m3 224 + 224 = 448, the largest; 448 + 32 is NaN (past 464, the last value that
  // rounds to 448); e5m2 57344 + 8192 is inf.
  EXPECT_EQ(reduced<uint8_t>(DType::f8e4m3, ReduceOp::sum, {0x76, 0x7e}, {0x76, 0x60}), (std::vector<uint8_t>{0x7e, 0x7f}));
  EXPECT_EQ(reduced<uint8_t>(DType::f8e5m2, ReduceOp::sum, {0x7b}, {0x70}), std::vector<uint8_t>{0x7c});
}

TEST(ReduceInto, CountZeroTouchesNothingAndCountOneOnlyTheFirst) {
  struct Case {
    ReduceOp op;
    int32_t first;  // 5 OP 3
  };
  const Case cases[] = {{ReduceOp::sum, 8}, {ReduceOp::prod, 15}, {ReduceOp::min, 3},
                        {ReduceOp::max, 5}, {ReduceOp::avg, 8}};
  for (const Case& c : cases) {
    reduce_into(DType::f32, c.op, nullptr, nullptr, 0);  // empty buffers may have no storage
    std::vector<int32_t> acc{5, 9};
    const std::vector<int32_t> in{3, 4};
    reduce_into(DType::i32, c.op, acc.data(), in.data(), 0);
    EXPECT_EQ(acc, (std::vector<int32_t>{5, 9})) << name(c.op);
    reduce_into(DType::i32, c.op, acc.data(), in.data(), 1);
    EXPECT_EQ(acc, (std::vector<int32_t>{c.first, 9})) << name(c.op);  // 9: the guard past count
  }
  divide_by(DType::i32, nullptr, 0, 3);
  fill_identity(DType::f64, ReduceOp::sum, nullptr, 0);
}

// --- divide_by ------------------------------------------------------------------------------------

TEST(DivideBy, IntegersTruncateTowardZero) {
  std::vector<int32_t> i32{-7, 7, -8, 0, -1, Limits<int32_t>::min()};
  divide_by(DType::i32, i32.data(), i32.size(), 2);
  // -7 / 2 = -3.5 -> -3 (toward zero, not floor's -4); -1 / 2 -> 0; INT32_MIN / 2 = -2^30.
  EXPECT_EQ(i32, (std::vector<int32_t>{-3, 3, -4, 0, 0, -(1 << 30)}));

  std::vector<int8_t> i8{-128, 127, 100, -100};
  divide_by(DType::i8, i8.data(), i8.size(), 3);
  EXPECT_EQ(i8, (std::vector<int8_t>{-42, 42, 33, -33}));  // -42.67 -> -42, 33.33 -> 33
  std::vector<int8_t> i8_big_n{100, -100};
  divide_by(DType::i8, i8_big_n.data(), i8_big_n.size(), 200);  // n does not fit in int8
  EXPECT_EQ(i8_big_n, (std::vector<int8_t>{0, 0}));

  std::vector<uint8_t> u8{255, 1};
  divide_by(DType::u8, u8.data(), u8.size(), 2);
  EXPECT_EQ(u8, (std::vector<uint8_t>{127, 0}));

  std::vector<int64_t> i64{-7, Limits<int64_t>::max()};
  divide_by(DType::i64, i64.data(), i64.size(), 2);
  EXPECT_EQ(i64, (std::vector<int64_t>{-3, Limits<int64_t>::max() / 2}));

  // Unsigned values above the signed maximum divide as unsigned (through int64 a u64 of 2^63
  // or more would turn negative).
  std::vector<uint64_t> u64{Limits<uint64_t>::max(), uint64_t{1} << 63};
  divide_by(DType::u64, u64.data(), u64.size(), 2);
  EXPECT_EQ(u64, (std::vector<uint64_t>{Limits<uint64_t>::max() / 2, uint64_t{1} << 62}));
  std::vector<uint32_t> u32{Limits<uint32_t>::max()};
  divide_by(DType::u32, u32.data(), u32.size(), 3);
  EXPECT_EQ(u32, (std::vector<uint32_t>{Limits<uint32_t>::max() / 3}));
  std::vector<uint8_t> u8_big_n{255};
  divide_by(DType::u8, u8_big_n.data(), u8_big_n.size(), 256);  // n does not fit in uint8
  EXPECT_EQ(u8_big_n, (std::vector<uint8_t>{0}));
}

TEST(DivideBy, WideFloats) {
  std::vector<float> f{1, -3, 0.5f};
  divide_by(DType::f32, f.data(), f.size(), 3);
  EXPECT_EQ(f, (std::vector<float>{1.0f / 3.0f, -1.0f, 0.5f / 3.0f}));
  std::vector<double> d{1, -3};
  divide_by(DType::f64, d.data(), d.size(), 3);
  EXPECT_EQ(d, (std::vector<double>{1.0 / 3.0, -1.0}));
}

// Every f16 / bf16 value divided by n must be the exact quotient rounded once. The double
// quotient is within half a double ulp; rounding it again is exact by the 2p+2 theorem (53 >=
// 2 * 11 + 2), so _Float16(double(a) / n) is the correctly rounded answer.
TEST(DivideBy, NarrowFloatsRoundOnce) {
  for (int n : {2, 3, 5, 7, 1000, 65537}) {
    std::vector<uint16_t> h(0x10000), b(0x10000);
    for (uint32_t i = 0; i < 0x10000; ++i) h[i] = b[i] = static_cast<uint16_t>(i);
    divide_by(DType::f16, h.data(), h.size(), n);
    divide_by(DType::bf16, b.data(), b.size(), n);
    for (uint32_t i = 0; i < 0x10000; ++i) {
      const auto bits = static_cast<uint16_t>(i);
      const double f16_quotient = double_from_f16_bits(bits) / n;
      const double bf16_quotient = double_from_bf16_bits(bits) / n;
      if (std::isnan(f16_quotient)) {
        ASSERT_TRUE(std::isnan(double_from_f16_bits(h[i])));
      } else {
        ASSERT_EQ(h[i], std::bit_cast<uint16_t>(static_cast<_Float16>(f16_quotient))) << std::hex << i << " / " << std::dec << n;
      }
      if (std::isnan(bf16_quotient)) {
        ASSERT_TRUE(std::isnan(double_from_bf16_bits(b[i])));
      } else {
        ASSERT_EQ(b[i], bf16_bits_from_double(bf16_quotient)) << std::hex << i << " / " << std::dec << n;
      }
    }
  }
  for (int n : {2, 3, 5, 7, 1000}) {
    for (DType dtype : kFp8DTypes) {
      std::vector<uint8_t> q(256);
      for (unsigned i = 0; i < 256; ++i) q[i] = static_cast<uint8_t>(i);
      divide_by(dtype, q.data(), q.size(), n);
      for (unsigned i = 0; i < 256; ++i) {
        const auto bits = static_cast<uint8_t>(i);
        const double quotient = load_double(dtype, &bits, 0) / n;
        std::vector<uint8_t> want(1);
        store_double(dtype, want.data(), 0, quotient);  // one rounding of the exact quotient
        if (std::isnan(quotient)) {
          ASSERT_TRUE(std::isnan(load_double(dtype, q.data(), i)));
        } else {
          ASSERT_EQ(q[i], want[0]) << name(dtype) << " " << i << " / " << n;
        }
      }
    }
  }
  // By hand: 1 / 3 in f16 is 0x3555 (0.333251953125; 0x3556 would be 0.33349609375, farther).
  uint16_t third = f16_bits_from_double(1.0);
  divide_by(DType::f16, &third, 1, 3);
  EXPECT_EQ(third, 0x3555);
}

// --- fill_identity ------------------------------------------------------------------------------

template <class T>
std::vector<T> identity(DType dtype, ReduceOp op) {
  std::vector<T> v(3, T{42});
  fill_identity(dtype, op, v.data(), v.size());
  return v;
}

TEST(FillIdentity, Values) {
  EXPECT_EQ(identity<float>(DType::f32, ReduceOp::sum), std::vector<float>(3, 0.0f));
  EXPECT_EQ(identity<float>(DType::f32, ReduceOp::avg), std::vector<float>(3, 0.0f));
  EXPECT_EQ(identity<float>(DType::f32, ReduceOp::prod), std::vector<float>(3, 1.0f));
  // Floats: min starts at +inf (not FLT_MAX, which would lose against an inf input).
  EXPECT_EQ(identity<float>(DType::f32, ReduceOp::min), std::vector<float>(3, Limits<float>::infinity()));
  EXPECT_EQ(identity<double>(DType::f64, ReduceOp::max), std::vector<double>(3, -kInf));
  EXPECT_EQ(identity<uint16_t>(DType::f16, ReduceOp::min), std::vector<uint16_t>(3, 0x7c00));  // +inf
  EXPECT_EQ(identity<uint16_t>(DType::f16, ReduceOp::max), std::vector<uint16_t>(3, 0xfc00));  // -inf
  EXPECT_EQ(identity<uint16_t>(DType::f16, ReduceOp::prod), std::vector<uint16_t>(3, 0x3c00));  // 1
  EXPECT_EQ(identity<uint16_t>(DType::bf16, ReduceOp::min), std::vector<uint16_t>(3, 0x7f80));  // +inf
  EXPECT_EQ(identity<uint16_t>(DType::bf16, ReduceOp::sum), std::vector<uint16_t>(3, 0x0000));
  // fp8: e5m2 has ±inf; e4m3 has none, so min and max start at ±448 (NaN would propagate).
  EXPECT_EQ(identity<uint8_t>(DType::f8e5m2, ReduceOp::min), std::vector<uint8_t>(3, 0x7c));
  EXPECT_EQ(identity<uint8_t>(DType::f8e5m2, ReduceOp::max), std::vector<uint8_t>(3, 0xfc));
  EXPECT_EQ(identity<uint8_t>(DType::f8e4m3, ReduceOp::min), std::vector<uint8_t>(3, 0x7e));
  EXPECT_EQ(identity<uint8_t>(DType::f8e4m3, ReduceOp::max), std::vector<uint8_t>(3, 0xfe));
  EXPECT_EQ(identity<uint8_t>(DType::f8e4m3, ReduceOp::prod), std::vector<uint8_t>(3, 0x38));  // 1
  // Integers: the extreme values of the type.
  EXPECT_EQ(identity<int8_t>(DType::i8, ReduceOp::min), std::vector<int8_t>(3, 127));
  EXPECT_EQ(identity<int8_t>(DType::i8, ReduceOp::max), std::vector<int8_t>(3, -128));
  EXPECT_EQ(identity<uint8_t>(DType::u8, ReduceOp::min), std::vector<uint8_t>(3, 255));
  EXPECT_EQ(identity<uint8_t>(DType::u8, ReduceOp::max), std::vector<uint8_t>(3, 0));
  EXPECT_EQ(identity<int32_t>(DType::i32, ReduceOp::min), std::vector<int32_t>(3, Limits<int32_t>::max()));
  EXPECT_EQ(identity<int64_t>(DType::i64, ReduceOp::max), std::vector<int64_t>(3, Limits<int64_t>::min()));
  EXPECT_EQ(identity<int64_t>(DType::i64, ReduceOp::prod), std::vector<int64_t>(3, 1));
}

// The identity is what a reduction over zero ranks starts from: identity OP x == x for all x.
TEST(FillIdentity, IsNeutral) {
  const std::vector<int8_t> i8_values{-128, -1, 0, 1, 127};
  const std::vector<double> f64_values{-kInf, -1.5, -0.0, 0.0, 2.75, 1e308, kInf};
  for (ReduceOp op : kAllReduceOps) {
    std::vector<int8_t> acc(i8_values.size());
    fill_identity(DType::i8, op, acc.data(), acc.size());
    EXPECT_EQ(reduced(DType::i8, op, acc, i8_values), i8_values) << name(op);
    std::vector<double> dacc(f64_values.size());
    fill_identity(DType::f64, op, dacc.data(), dacc.size());
    const std::vector<double> got = reduced(DType::f64, op, dacc, f64_values);
    EXPECT_EQ(got, f64_values) << name(op);  // == treats -0 and +0 alike: 0 + -0 is +0
  }
  // fp8: every value but NaN, the largest and infinities included; -0 + 0 is +0, so sums compare
  // by value.
  for (DType dtype : kFp8DTypes) {
    std::vector<uint8_t> values;
    for (unsigned b = 0; b < 256; ++b) {
      const auto byte = static_cast<uint8_t>(b);
      if (!std::isnan(load_double(dtype, &byte, 0))) values.push_back(byte);
    }
    for (ReduceOp op : kAllReduceOps) {
      std::vector<uint8_t> acc(values.size());
      fill_identity(dtype, op, acc.data(), acc.size());
      const std::vector<uint8_t> got = reduced(dtype, op, acc, values);
      for (size_t i = 0; i < values.size(); ++i) {
        EXPECT_EQ(load_double(dtype, got.data(), i), load_double(dtype, values.data(), i)) << name(dtype) << " " << name(op);
      }
    }
  }
}

}  // namespace
}  // namespace dts
