// Bit-level encoding and decoding of the OCP fp8 formats (see fp8.h). One template serves E4M3
// (4 exponent bits, 3 mantissa bits, no inf) and E5M2 (5, 2, IEEE-like); the rounding is
// half.cpp's (core/rounding.h): the double's significand cut at the format's last place, ties to even.
#include "core/fp8.h"

#include <bit>
#include <cmath>
#include <limits>

#include "core/rounding.h"

namespace dts {

namespace {

template <int kExpBits, int kMantBits, bool kHasInf>
struct Format {
  static constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  static constexpr uint64_t kExpMax = (uint64_t{1} << kExpBits) - 1;
  static constexpr uint64_t kMantMask = (uint64_t{1} << kMantBits) - 1;
  // IEEE-like formats keep the top exponent for inf and NaN; E4M3 keeps only S.1111.111 for NaN,
  // so its top exponent holds finite values up to mantissa 110.
  static constexpr uint64_t kLargest = kHasInf ? ((kExpMax - 1) << kMantBits) | kMantMask
                                               : (kExpMax << kMantBits) | (kMantMask - 1);
  static constexpr uint64_t kInf = kExpMax << kMantBits;  // E5M2 only
  static constexpr uint64_t kNaN = (kExpMax << kMantBits) | kMantMask;

  static uint8_t encode(double value, Fp8Overflow overflow) {
    const auto b = std::bit_cast<uint64_t>(value);
    const uint64_t sign = (b >> 63) << (kExpBits + kMantBits);
    const uint64_t dexp = (b >> 52) & 0x7ff;
    const uint64_t dman = b & ((uint64_t{1} << 52) - 1);
    const auto result = [&](uint64_t magnitude) { return static_cast<uint8_t>(sign | magnitude); };
    // Past the largest finite value: the mode decides (±inf takes this path too).
    const uint64_t overflowed = overflow == Fp8Overflow::saturating ? kLargest : kHasInf ? kInf : kNaN;
    if (dexp == 0x7ff) {
      if (dman != 0) {
        if constexpr (!kHasInf) return result(kNaN);
        // E5M2: keep the top payload bit and force the quiet one, as half.cpp does for f16.
        return result(kInf | (uint64_t{1} << (kMantBits - 1)) | (dman >> (52 - kMantBits)));
      }
      return result(overflowed);
    }
    const uint64_t magnitude = detail::rounded_magnitude<kExpBits, kMantBits>(b);
    // E4M3's 464 (448 + half its ulp) ties to 448's even mantissa; E5M2's 61440 ties to inf's,
    // as IEEE 754 overflow does: both fall out of the rounding above.
    if (magnitude > kLargest) return result(overflowed);
    return result(magnitude);
  }

  static double decode(uint8_t bits) {
    const bool negative = (bits >> (kExpBits + kMantBits)) & 1;
    const uint64_t magnitude = bits & ((kExpMax << kMantBits) | kMantMask);
    const uint64_t exp = magnitude >> kMantBits;
    const uint64_t man = magnitude & kMantMask;
    double value;
    if (magnitude == kNaN || (kHasInf && exp == kExpMax && man != 0)) {
      value = std::numeric_limits<double>::quiet_NaN();
    } else if (kHasInf && magnitude == kInf) {
      value = std::numeric_limits<double>::infinity();
    } else if (exp == 0) {
      value = std::ldexp(static_cast<double>(man), 1 - kBias - kMantBits);
    } else {
      value = std::ldexp(static_cast<double>(man | (uint64_t{1} << kMantBits)),
                         static_cast<int>(exp) - kBias - kMantBits);
    }
    return negative ? -value : value;
  }
};

using E4M3 = Format<4, 3, false>;
using E5M2 = Format<5, 2, true>;
static_assert(E4M3::kLargest == Fp8E4M3::kLargestBits && E5M2::kLargest == Fp8E5M2::kLargestBits);

// Every value of a format, decoded once: exact in f32 (at most 4 significant bits, exponents
// within f32's normal range).
template <class F>
const float* table() {
  static const auto* values = [] {
    auto* t = new float[256];
    for (unsigned i = 0; i < 256; ++i) t[i] = static_cast<float>(F::decode(static_cast<uint8_t>(i)));
    return t;
  }();
  return values;
}

}  // namespace

uint8_t f8e4m3_bits_from_double(double value, Fp8Overflow overflow) { return E4M3::encode(value, overflow); }
uint8_t f8e5m2_bits_from_double(double value, Fp8Overflow overflow) { return E5M2::encode(value, overflow); }
double double_from_f8e4m3_bits(uint8_t bits) { return E4M3::decode(bits); }
double double_from_f8e5m2_bits(uint8_t bits) { return E5M2::decode(bits); }
float float_from_f8e4m3_bits(uint8_t bits) { return table<E4M3>()[bits]; }
float float_from_f8e5m2_bits(uint8_t bits) { return table<E5M2>()[bits]; }

}  // namespace dts
