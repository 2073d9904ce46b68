// Input patterns, references, bounds and the classification of wrong elements for the
// collectives checks (see check.h).
//
// The overflow input set, class by class (element i is in class i % K; "rank ρ" is the rank
// (i / K) % n, so the special value visits every rank; "others" are the remaining ranks):
//   integers, sum and avg (K 4): 0 every rank MAX; 1 every rank MIN (unsigned: 2^(bits-1), just
//     above the signed maximum); 2 rank ρ MAX, others 1; 3 every bit pattern at random.
//   integers, prod (K 4): 0 every rank 2^(bits/2) (the product wraps to 0); 1 every rank
//     2^(bits/2) + 1; 2 rank ρ MAX, others 2; 3 every bit pattern at random.
//   integers, min and max (K 4): 0 every bit pattern at random; 1 each rank the signed maximum or
//     the pattern just above it (0x7f.. or 0x80.., alternating over ranks: a comparison of the
//     wrong signedness picks the other one); 2 rank ρ MAX, others random; 3 rank ρ MIN, others
//     random.
//   floats, sum and avg (K 5): 0 every rank +H, H half the largest finite value (2 ranks reach
//     the largest exactly, 3 overflow to +inf in every order); 1 every rank -H; 2 rank ρ +inf,
//     others in [-1, 1); 3 rank ρ +inf, rank ρ+1 -inf (NaN), others in [-1, 1); 4 rank ρ NaN.
//   floats, prod (K 5): 0 every rank G, G^2 past the largest finite value (+inf from 2 ranks
//     on); 1 rank ρ -G, others G (-inf); 2 rank ρ -S, others S, S^2 below half the smallest
//     subnormal (-0 from 2 ranks on); 3 rank ρ 0, rank ρ+1 +inf (NaN), others in [0.5, 2);
//     4 rank ρ NaN.
//   floats, min and max (K 4): 0 rank ρ NaN, others in [-1, 1); 1 rank ρ +inf, rank ρ+1 -inf;
//     2 rank ρ +largest, rank ρ+1 -largest; 3 subnormals only.
//   data movement, every dtype: every bit pattern at random.
#include "suites/collectives/check.h"

#include <algorithm>
#include <bit>
#include <bitset>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>
#include <type_traits>
#include <vector>

#include "core/element.h"
#include "core/error.h"

namespace dts {

std::string_view name(InputKind kind) {
  switch (kind) {
    case InputKind::exact: return "exact";
    case InputKind::random: return "random";
    case InputKind::overflow: return "overflow";
  }
  return "?";
}

namespace {

// SplitMix64 finalizer over (seed, stream, index): cheap (the check generates n inputs per
// output element) and well mixed; inputs need no cryptographic or Philox-grade properties.
uint64_t mix(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + stream * 0xD1B54A32D192ED03ull + index * 0xBF58476D1CE4E5B9ull + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct Format {
  int precision;  // significand digits p
  int min_exponent;
  int max_exponent;
};

Format format_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return {24, -126, 127};
    case DType::f64: return {53, -1022, 1023};
    case DType::f16: return {11, -14, 15};
    case DType::bf16: return {8, -126, 127};
    case DType::f8e4m3: return {4, -6, 8};
    case DType::f8e5m2: return {3, -14, 15};
    default: return {0, 0, 0};
  }
}

// The largest finite value of a float dtype: (2 - 2^(1-p)) * 2^emax, but for e4m3, which gives
// its top pattern to NaN and so ends one step early: 1.75 * 2^8 = 448.
double largest_finite(DType dtype) {
  if (dtype == DType::f8e4m3) return double_from_f8e4m3_bits(Fp8E4M3::kLargestBits);
  const Format f = format_of(dtype);
  return std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.max_exponent);
}

// The low 8 * size_of(dtype) bits: what one element stores.
uint64_t storage_mask(DType dtype) {
  const size_t bits = 8 * size_of(dtype);
  return bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

// An integer dtype's range as bit patterns of its width.
struct IntegerRange {
  bool is_signed;
  int bits;
  uint64_t mask;  // the low `bits` bits
  uint64_t max;   // the largest value's pattern
  uint64_t min;   // the smallest value's pattern (0 unsigned, 0x80.. signed)
};

IntegerRange range_of(DType dtype) {
  IntegerRange r{};
  r.is_signed = !is_unsigned(dtype);
  r.bits = static_cast<int>(size_of(dtype)) * 8;
  r.mask = storage_mask(dtype);
  const uint64_t top = uint64_t{1} << (r.bits - 1);
  r.max = r.is_signed ? top - 1 : r.mask;
  r.min = r.is_signed ? top : 0;
  return r;
}

int64_t sign_extended(uint64_t bits, int width) {
  if (width == 64) return static_cast<int64_t>(bits);
  const uint64_t top = uint64_t{1} << (width - 1);
  return static_cast<int64_t>((bits ^ top) - top);  // two's complement, C++20 defines the conversion
}

// The value of an integer pattern of `range`'s dtype, for text and for the classification's
// direction of overflow (long double: 64 significant bits on x86, exact for every 64-bit value).
long double integer_value(uint64_t bits, const IntegerRange& range) {
  return range.is_signed ? static_cast<long double>(sign_extended(bits, range.bits))
                         : static_cast<long double>(bits & range.mask);
}

std::string integer_text(uint64_t bits, const IntegerRange& range) {
  return range.is_signed ? std::to_string(sign_extended(bits, range.bits)) : std::to_string(bits & range.mask);
}

template <class T>
uint64_t bits_of(T value) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<uint64_t>(value);  // sign-extends; callers mask to the width
  } else if constexpr (kIsNarrowFloat<T>) {
    return value.bits;
  } else if constexpr (std::is_same_v<T, float>) {
    return std::bit_cast<uint32_t>(value);
  } else {
    return std::bit_cast<uint64_t>(value);
  }
}

template <class T>
T from_bits(uint64_t bits) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(bits);  // modulo 2^bits (C++20)
  } else if constexpr (kIsNarrowFloat<T>) {
    T v;
    v.bits = static_cast<decltype(v.bits)>(bits);
    return v;
  } else if constexpr (std::is_same_v<T, float>) {
    return std::bit_cast<float>(static_cast<uint32_t>(bits));
  } else {
    return std::bit_cast<double>(bits);
  }
}

// IEEE rounding of a long double to double: beyond the largest double plus half its ulp the
// value rounds to ±inf (a plain cast of an out-of-range value is undefined in C++).
double to_double(long double v) {
  const long double overflow = static_cast<long double>(DBL_MAX) + std::ldexp(1.0L, 1023 - 53);
  if (v >= overflow) return std::numeric_limits<double>::infinity();
  if (v <= -overflow) return -std::numeric_limits<double>::infinity();
  return static_cast<double>(v);
}

// A double rounded to T with IEEE overflow to ±inf (f16/bf16/fp8 encode that themselves; e4m3,
// without inf, overflows to NaN: OCP's non-saturating mode, core/reduce.h). Through
// double first is innocuous: 53 >= 2p + 2 for p <= 24, so double rounding equals one rounding.
template <class T>
T to_dtype(double v) {
  if constexpr (std::is_same_v<T, float>) {
    const double overflow = static_cast<double>(FLT_MAX) + std::ldexp(1.0, 127 - 24);
    if (v >= overflow) return std::numeric_limits<float>::infinity();
    if (v <= -overflow) return -std::numeric_limits<float>::infinity();
  }
  return static_cast<T>(v);
}

// `value` rounded to the dtype: the input the stack actually sees.
uint64_t float_bits(DType dtype, double value) {
  return visit_dtype(dtype, [&](auto tag) -> uint64_t {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      return 0;
    } else {
      return bits_of(to_dtype<T>(value));
    }
  });
}

double float_value(DType dtype, uint64_t bits) {
  return visit_dtype(dtype, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    return static_cast<double>(from_bits<T>(bits));
  });
}

int ceil_log2(int n) {
  int levels = 0;
  while ((1 << levels) < n) ++levels;
  return levels;
}

// The classes of the overflow set per op family (see the top of this file).
int overflow_classes(const CheckSpec& s) {
  if (!is_floating(s.dtype)) return 4;
  if (!is_reducing(s.collective)) return 1;
  return (s.op == ReduceOp::min || s.op == ReduceOp::max) ? 4 : 5;
}

// Exact inputs of an integer dtype: no partial result leaves the range, so every order agrees.
uint64_t exact_integer(const CheckSpec& s, int rank, int64_t index, uint64_t h) {
  const IntegerRange range = range_of(s.dtype);
  const bool reducing = is_reducing(s.collective);
  if (reducing && s.op == ReduceOp::prod) {
    // Exactly one rank contributes magnitude 2 to each element, the rest magnitude 1: the
    // product is ±2 whatever the order and the rank count, and a missing rank shows.
    const uint64_t magnitude = (index + rank) % s.world_size == 0 ? 2 : 1;
    return (range.is_signed && (h & 1)) ? (0 - magnitude) & range.mask : magnitude;
  }
  // For sum/avg the largest value is split over n ranks so every partial sum is in range;
  // min/max and data movement use the whole range.
  const bool needs_split = reducing && (s.op == ReduceOp::sum || s.op == ReduceOp::avg);
  const uint64_t largest = range.is_signed ? range.max : range.mask;
  const uint64_t k = std::max<uint64_t>(1, largest / (needs_split ? static_cast<uint64_t>(s.world_size) : 1));
  if (!range.is_signed) return k == ~uint64_t{0} ? h : h % (k + 1);
  const uint64_t span = 2 * k + 1;  // [-k, k]; at most 2^64 - 1 since k <= 2^63 - 1
  return (h % span - k) & range.mask;
}

uint64_t overflow_integer(const CheckSpec& s, int rank, int64_t index, uint64_t h) {
  const IntegerRange range = range_of(s.dtype);
  const int classes = overflow_classes(s);
  const int cls = static_cast<int>(index % classes);
  const int special = static_cast<int>((index / classes) % s.world_size);
  const bool is_special = rank == special;
  const uint64_t random = h & range.mask;
  if (!is_reducing(s.collective)) return random;
  const uint64_t half = uint64_t{1} << (range.bits / 2);  // its square is 2^bits: wraps to 0
  switch (s.op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      switch (cls) {
        case 0: return range.max;
        case 1: return range.is_signed ? range.min : uint64_t{1} << (range.bits - 1);
        case 2: return is_special ? range.max : 1;
        default: return random;
      }
    case ReduceOp::prod:
      switch (cls) {
        case 0: return half;
        case 1: return half + 1;
        case 2: return is_special ? range.max : 2;
        default: return random;
      }
    case ReduceOp::min:
    case ReduceOp::max:
      switch (cls) {
        case 0: return random;
        case 1: return ((rank + index) % 2 == 0) ? (uint64_t{1} << (range.bits - 1)) - 1 : uint64_t{1} << (range.bits - 1);
        case 2: return is_special ? range.max : random;
        default: return is_special ? range.min : random;
      }
  }
  return random;
}

double overflow_float(const CheckSpec& s, int rank, int64_t index, uint64_t h) {
  const double uniform = static_cast<double>(h >> 11) * 0x1p-53;  // [0, 1)
  const Format f = format_of(s.dtype);
  const int classes = overflow_classes(s);
  const int cls = static_cast<int>(index % classes);
  const int n = s.world_size;
  const int special = static_cast<int>((index / classes) % n);
  const bool is_special = rank == special;
  const bool is_next = n > 1 && rank == (special + 1) % n;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const double largest = largest_finite(s.dtype);
  const double in_unit = uniform * 2.0 - 1.0;  // [-1, 1)
  switch (s.op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      switch (cls) {
        case 0: return largest / 2;
        case 1: return -largest / 2;
        case 2: return is_special ? inf : in_unit;
        case 3: return is_special ? inf : is_next ? -inf : in_unit;
        default: return is_special ? nan : in_unit;
      }
    case ReduceOp::prod: {
      const double big = std::ldexp(1.0, f.max_exponent / 2 + 1);  // big^2 >= 2^(emax+1)
      // small^2 below half the smallest subnormal 2^(emin-p+1): rounds to zero.
      const int smallest_exponent = f.min_exponent - (f.precision - 1);
      const double small = std::ldexp(1.0, (smallest_exponent - 1) / 2 - 1);
      switch (cls) {
        case 0: return big;
        case 1: return is_special ? -big : big;
        case 2: return is_special ? -small : small;
        case 3: return is_special ? 0.0 : is_next ? inf : 0.5 + 1.5 * uniform;
        default: return is_special ? nan : 0.5 + 1.5 * uniform;
      }
    }
    case ReduceOp::min:
    case ReduceOp::max:
      switch (cls) {
        case 0: return is_special ? nan : in_unit;
        case 1: return is_special ? inf : is_next ? -inf : in_unit;
        case 2: return is_special ? largest : is_next ? -largest : in_unit;
        default: {
          // Subnormal, never zero: a +0/-0 pair would make min and max depend on the order.
          const double magnitude = (0.25 + 0.5 * uniform) * std::ldexp(1.0, f.min_exponent);
          return (h & 1) ? -magnitude : magnitude;
        }
      }
  }
  return in_unit;
}

}  // namespace

int64_t input_elements(const CheckSpec& s) {
  switch (s.collective) {
    case Collective::reduce_scatter:
    case Collective::all_to_all: return s.count * s.world_size;
    default: return s.count;
  }
}

int64_t output_elements(const CheckSpec& s) {
  switch (s.collective) {
    case Collective::all_gather:
    case Collective::all_to_all: return s.count * s.world_size;
    default: return s.count;
  }
}

void call_collective(Communicator& comm, const CheckSpec& s, const void* in, void* out) {
  const auto count = static_cast<size_t>(s.count);
  switch (s.collective) {
    case Collective::all_reduce: comm.all_reduce(in, out, count, s.dtype, s.op); break;
    case Collective::reduce_scatter: comm.reduce_scatter(in, out, count, s.dtype, s.op); break;
    case Collective::all_gather: comm.all_gather(in, out, count, s.dtype); break;
    case Collective::broadcast: comm.broadcast(in, out, count, s.dtype, s.root); break;
    case Collective::reduce: comm.reduce(in, out, count, s.dtype, s.op, s.root); break;
    case Collective::all_to_all: comm.all_to_all(in, out, count, s.dtype); break;
    case Collective::send_recv: {
      const int n = comm.size(), r = comm.rank();
      comm.send_recv(in, (r + 1) % n, out, (r - 1 + n) % n, count, s.dtype);
      break;
    }
  }
}

uint64_t input_bits(const CheckSpec& s, int rank, int64_t index) {
  // Streams: exact 2r, random 2r + 1 (as before the overflow set), overflow apart from both.
  constexpr uint64_t kOverflowStreams = uint64_t{1} << 40;
  const auto r = static_cast<uint64_t>(rank);
  const uint64_t stream = s.kind == InputKind::overflow ? kOverflowStreams + r
                                                        : r * 2 + (s.kind == InputKind::random ? 1 : 0);
  const uint64_t h = mix(s.seed, stream, static_cast<uint64_t>(index));
  const bool reducing = is_reducing(s.collective);
  if (!is_floating(s.dtype)) {
    const IntegerRange range = range_of(s.dtype);
    switch (s.kind) {
      case InputKind::exact: return exact_integer(s, rank, index, h);
      case InputKind::random: return h & range.mask;  // wrapping arithmetic is exact in any order
      case InputKind::overflow: return overflow_integer(s, rank, index, h) & range.mask;
    }
  }
  const double uniform = static_cast<double>(h >> 11) * 0x1p-53;  // [0, 1)
  if (s.kind == InputKind::overflow) {
    if (!reducing) return h & storage_mask(s.dtype);
    return float_bits(s.dtype, overflow_float(s, rank, index, h));
  }
  if (s.kind == InputKind::random) {
    if (reducing && s.op == ReduceOp::prod) {
      const double magnitude = 0.5 + 1.5 * uniform;  // [0.5, 2)
      return float_bits(s.dtype, (h & 1) ? -magnitude : magnitude);
    }
    // [-1, 1), never zero: a +0 and a -0 (e4m3 rounds |x| <= 2^-10 to zero) would make min and
    // max depend on the order; such a draw takes the smallest subnormal of its sign instead.
    const double value = uniform * 2.0 - 1.0;
    const uint64_t bits = float_bits(s.dtype, value);
    if (float_value(s.dtype, bits) != 0) return bits;
    const Format f = format_of(s.dtype);
    return float_bits(s.dtype, std::copysign(std::ldexp(1.0, f.min_exponent - (f.precision - 1)), value));
  }
  // Exact: small integers, every partial sum exact. A float of p significant bits holds every
  // integer up to 2^p (p = 4 for e4m3: 0..16; p = 3 for e5m2: 0..8; 17 and 9 are not values).
  if (reducing && s.op == ReduceOp::prod) {
    const double magnitude = (index + rank) % s.world_size == 0 ? 2.0 : 1.0;  // as exact_integer
    return float_bits(s.dtype, (h & 1) ? -magnitude : magnitude);
  }
  // For sum/avg the budget 2^p is split over the ranks that contribute to an element, each |x| <=
  // floor(2^p / contributors), so every partial sum of every order stays within 2^p. All n ranks
  // contribute while n <= 2^p; beyond (fp8 past 16 or 8 ranks) only those with (index + rank) %
  // m == 0, m = ceil(n / 2^p): at most ceil(n / m) <= 2^p of them, the others give 0.
  const bool needs_split = reducing && (s.op == ReduceOp::sum || s.op == ReduceOp::avg);
  const double exact_limit = std::ldexp(1.0, format_of(s.dtype).precision);  // every integer up to it
  int contributors = s.world_size;
  if (needs_split && s.world_size > exact_limit) {
    const auto m = static_cast<int64_t>(std::ceil(s.world_size / exact_limit));
    if ((index + rank) % m != 0) return float_bits(s.dtype, 0.0);
    contributors = static_cast<int>((s.world_size + m - 1) / m);
  }
  double k = std::floor(exact_limit / (needs_split ? contributors : 1));
  k = std::max(1.0, std::min(k, 0x1p20));  // past 2^20 larger values add nothing to a float check
  const auto span = static_cast<uint64_t>(2 * k + 1);
  return float_bits(s.dtype, static_cast<double>((h >> 8) % span) - k);
}

double input_value(const CheckSpec& s, int rank, int64_t index) {
  const uint64_t bits = input_bits(s, rank, index);
  if (is_floating(s.dtype)) return float_value(s.dtype, bits);
  return static_cast<double>(integer_value(bits, range_of(s.dtype)));
}

void fill_input(const CheckSpec& s, int rank, void* input) {
  const int64_t n = input_elements(s);
  visit_dtype(s.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(input);
    for (int64_t i = 0; i < n; ++i) p[i] = from_bits<T>(input_bits(s, rank, i));
  });
}

void fill_sentinel(void* data, int64_t bytes) {
  // A buffer of 0 elements may have no storage: memset(nullptr, _, 0) is undefined behaviour.
  if (bytes > 0) std::memset(data, 0xA5, static_cast<size_t>(bytes));
}

double ulp_of(DType dtype, double value) {
  const Format f = format_of(dtype);
  if (f.precision == 0) return 1;
  const double magnitude = std::fabs(value);
  int exponent = magnitude > 0 ? std::ilogb(magnitude) : f.min_exponent;
  if (exponent < f.min_exponent) exponent = f.min_exponent;
  return std::ldexp(1.0, exponent - (f.precision - 1));
}

double random_error_bound(DType dtype, ReduceOp op, int world_size, double sum_abs, double ref) {
  const Format f = format_of(dtype);
  if (f.precision == 0) return 0;  // integers are exact in any order (two's complement wraps)
  const double eps = std::ldexp(1.0, 1 - f.precision);
  const double eta = std::ldexp(1.0, f.min_exponent - (f.precision - 1));
  const double levels = ceil_log2(world_size) + 1;
  switch (op) {
    case ReduceOp::sum: return levels * eps * sum_abs + eta;
    case ReduceOp::avg: return levels * eps * sum_abs / world_size + eps * std::fabs(ref) + eta;
    case ReduceOp::prod: return levels * eps * std::fabs(ref) + eta;
    case ReduceOp::min:
    case ReduceOp::max: return 0;
  }
  return 0;
}

std::string describe(Deviation deviation, DType dtype, ReduceOp op, bool reducing) {
  const std::string op_name(reducing ? name(op) : "the copy");
  const auto bound = [&](bool high) {
    if (is_floating(dtype)) {
      std::ostringstream text;
      text.precision(9);
      text << (high ? largest_finite(dtype) : -largest_finite(dtype));
      return text.str();
    }
    const IntegerRange range = range_of(dtype);
    return integer_text(high ? range.max : range.min, range);
  };
  switch (deviation) {
    case Deviation::other: return "wrong value";
    case Deviation::saturates_high: return "saturates at " + bound(true);
    case Deviation::saturates_low: return "saturates at " + bound(false);
    case Deviation::compares_signed: return "compares " + std::string(name(dtype)) + " as signed";
    case Deviation::compares_unsigned: return "compares " + std::string(name(dtype)) + " as unsigned";
    case Deviation::nan_dropped: return "NaN dropped by " + op_name;
    case Deviation::inf_dropped: return "inf dropped by " + op_name;
    case Deviation::avg_divides_first: return "avg finite where the sum overflows (divides before summing)";
    case Deviation::overflow_lost: return "finite where the " + op_name + " overflows to inf";
    case Deviation::spurious_overflow: return "inf where the " + op_name + " is finite";
    case Deviation::nan_for_inf: return "NaN where inf is due";
    case Deviation::inf_for_nan: return "inf where NaN is due (inf - inf, 0 * inf)";
    case Deviation::zero_sign_lost: return "sign of zero lost";
    case Deviation::nan_payload_changed: return "NaN payload changed";
    case Deviation::subnormal_flushed: return "subnormal flushed to zero";
    case Deviation::saturates_partially: return "a partial " + op_name + " saturates";
  }
  return "wrong value";
}

std::vector<DeviationKind> deviation_vocabulary() {
  std::vector<DType> dtypes(kAllDTypes.begin(), kAllDTypes.end());
  dtypes.insert(dtypes.end(), kFp8DTypes.begin(), kFp8DTypes.end());  // "saturates at 448", ...
  std::vector<DeviationKind> kinds;
  for (size_t i = 1; i < kDeviationCount; ++i) {  // 0 is Deviation::other, "wrong value"
    const auto deviation = static_cast<Deviation>(i);
    for (const DType dtype : dtypes) {
      for (const ReduceOp op : kAllReduceOps) {
        kinds.push_back({describe(deviation, dtype, op, true), std::string(name(dtype)), std::string(name(op))});
      }
      kinds.push_back({describe(deviation, dtype, ReduceOp::sum, false), std::string(name(dtype)), "none"});
    }
  }
  return kinds;
}

std::string describe(const DeviationCounts& counts, DType dtype, ReduceOp op, bool reducing) {
  std::vector<size_t> order(kDeviationCount);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return counts[a] > counts[b]; });
  std::string text;
  for (size_t i : order) {
    if (counts[i] == 0) break;
    text += (text.empty() ? "" : ", ") + describe(static_cast<Deviation>(i), dtype, op, reducing) + ": " +
            std::to_string(counts[i]);
  }
  return text;
}

namespace {

// Where output element j of `rank` comes from: one (rank, index) for data movement, or the
// same index on every rank for reductions.
struct Source {
  bool reduce_all;
  int rank;
  int64_t index;
};

Source source_of(const CheckSpec& s, int rank, int64_t j) {
  const int n = s.world_size;
  switch (s.collective) {
    case Collective::all_reduce:
    case Collective::reduce: return {true, 0, j};
    case Collective::reduce_scatter: return {true, 0, static_cast<int64_t>(rank) * s.count + j};
    case Collective::all_gather: return {false, static_cast<int>(j / s.count), j % s.count};
    case Collective::broadcast: return {false, s.root, j};
    case Collective::all_to_all:
      return {false, static_cast<int>(j / s.count), static_cast<int64_t>(rank) * s.count + j % s.count};
    case Collective::send_recv: return {false, (rank - 1 + n) % n, j};
  }
  return {false, 0, j};
}

// One element's verdict.
struct Judgement {
  bool wrong = false;
  double reference = 0;     // for the ulp count
  double error = 0;         // |got - reference|; inf where not comparable
  std::string expected;     // as text, where wrong only (formatting every element cost ~95% of a check)
  Deviation deviation = Deviation::other;
};

template <class T>
std::string show(T v) {
  if constexpr (std::is_integral_v<T>) {
    return std::is_signed_v<T> ? std::to_string(static_cast<int64_t>(v)) : std::to_string(static_cast<uint64_t>(v));
  } else {
    std::ostringstream out;
    out.precision(17);
    out << static_cast<double>(v);
    return out.str();
  }
}

// The stated wrapping reduction of integer patterns over every rank, in `is_signed`'s order for
// min/max (the other order classifies a stack that compares with the wrong signedness).
uint64_t reduce_integers(const std::vector<uint64_t>& inputs, ReduceOp op, const IntegerRange& range,
                         bool is_signed) {
  uint64_t acc = inputs[0];
  const auto less = [&](uint64_t a, uint64_t b) {
    return is_signed ? sign_extended(a, range.bits) < sign_extended(b, range.bits) : a < b;
  };
  for (size_t r = 1; r < inputs.size(); ++r) {
    const uint64_t x = inputs[r];
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc = (acc + x) & range.mask; break;
      case ReduceOp::prod: acc = (acc * x) & range.mask; break;  // mod 2^64, then 2^bits
      case ReduceOp::min: acc = less(x, acc) ? x : acc; break;
      case ReduceOp::max: acc = less(acc, x) ? x : acc; break;
    }
  }
  if (op == ReduceOp::avg) {
    // The wrapped sum, divided truncating toward zero, in the dtype's signedness.
    const auto n = static_cast<int64_t>(inputs.size());
    acc = (range.is_signed ? static_cast<uint64_t>(sign_extended(acc, range.bits) / n)
                           : acc / static_cast<uint64_t>(n)) & range.mask;
  }
  return acc;
}

// Whether `got` is a sum (or avg) of 8-bit `inputs` that some partial sums reached by saturating
// at the dtype's bounds while others wrapped: the stack combines the ranks' values as a binary
// tree (any tree: ring, recursive doubling, recursive halving, binomial), and saturating vector
// code makes some additions while scalar code makes others (Open MPI's 8-bit ops). Every tree
// and every choice of mode per addition is tried, by the values each subset of ranks can reach:
// at most 4 ranks (beyond, the subsets are too many to search per element, and a wrong element
// stays "wrong value").
constexpr int kPartialSaturationMaxRanks = 4;
bool partial_saturation(const std::vector<uint64_t>& inputs, ReduceOp op, const IntegerRange& range,
                        uint64_t got_bits) {
  const auto n = static_cast<int>(inputs.size());
  if (range.bits != 8 || n < 3 || n > kPartialSaturationMaxRanks) return false;
  if (op != ReduceOp::sum && op != ReduceOp::avg) return false;
  const long double lowest = integer_value(range.min, range), highest = integer_value(range.max, range);
  // reachable[S]: the patterns a tree over the ranks of bit set S can give (a set, and its
  // members listed, so that combining two costs their sizes' product, not 256 squared).
  std::array<std::bitset<256>, 1u << kPartialSaturationMaxRanks> reachable{};
  std::array<std::array<uint8_t, 256>, 1u << kPartialSaturationMaxRanks> members;
  std::array<unsigned, 1u << kPartialSaturationMaxRanks> sizes{};
  const unsigned all = (1u << n) - 1;
  for (int r = 0; r < n; ++r) {
    reachable[1u << r].set(inputs[static_cast<size_t>(r)] & 0xff);
    members[1u << r][sizes[1u << r]++] = static_cast<uint8_t>(inputs[static_cast<size_t>(r)] & 0xff);
  }
  const long double wanted = integer_value(got_bits, range);
  const auto is_got = [&](unsigned pattern) {
    const long double value = integer_value(pattern, range);
    return (op == ReduceOp::avg ? std::trunc(value / n) : value) == wanted;
  };
  const auto add = [&](unsigned set, unsigned pattern) {
    if (!reachable[set][pattern]) {
      reachable[set].set(pattern);
      members[set][sizes[set]++] = static_cast<uint8_t>(pattern);
    }
  };
  for (unsigned set = 1; set <= all; ++set) {
    if (std::popcount(set) < 2) continue;
    // Every split of `set` into two non-empty halves, each once (the half holding the lowest rank first).
    const unsigned lowest_rank = set & -set;
    for (unsigned half = (set - 1) & set; half != 0; half = (half - 1) & set) {
      if ((half & lowest_rank) == 0) continue;
      for (unsigned i = 0; i < sizes[half]; ++i) {
        const unsigned x = members[half][i];
        for (unsigned k = 0; k < sizes[set ^ half]; ++k) {
          const unsigned y = members[set ^ half][k];
          const long double sum = integer_value(x, range) + integer_value(y, range);
          const unsigned wrapped = (x + y) & 0xffu;
          const unsigned saturated = static_cast<unsigned>(static_cast<int64_t>(std::clamp(sum, lowest, highest))) & 0xffu;
          if (set == all) {
            // The whole set: only whether `got` is among its values matters.
            if (is_got(wrapped) || is_got(saturated)) return true;
            continue;
          }
          add(set, wrapped);
          add(set, saturated);
        }
      }
    }
  }
  return false;
}

template <class T>
Judgement judge_integer_reduction(const CheckSpec& s, int64_t index, T got) {
  const IntegerRange range = range_of(s.dtype);
  std::vector<uint64_t> inputs(static_cast<size_t>(s.world_size));
  for (int r = 0; r < s.world_size; ++r) inputs[static_cast<size_t>(r)] = input_bits(s, r, index);
  const uint64_t expected = reduce_integers(inputs, s.op, range, range.is_signed);
  const uint64_t got_bits = bits_of(got) & range.mask;
  Judgement j;
  j.reference = static_cast<double>(integer_value(expected, range));
  j.wrong = got_bits != expected;
  if (!j.wrong) return j;
  j.expected = integer_text(expected, range);
  j.error = std::fabs(static_cast<double>(integer_value(got_bits, range) - integer_value(expected, range)));
  if (s.op == ReduceOp::min || s.op == ReduceOp::max) {
    if (got_bits == reduce_integers(inputs, s.op, range, !range.is_signed)) {
      j.deviation = range.is_signed ? Deviation::compares_unsigned : Deviation::compares_signed;
    }
    return j;
  }
  // The unbounded result, to tell a clamp from any other wrong value.
  long double exact = s.op == ReduceOp::prod ? 1 : 0;
  for (uint64_t x : inputs) exact = s.op == ReduceOp::prod ? exact * integer_value(x, range) : exact + integer_value(x, range);
  const long double lowest = integer_value(range.min, range), highest = integer_value(range.max, range);
  const long double clamped = std::clamp(exact, lowest, highest);
  // avg: a sum clamped at the bound, then divided (truncating toward zero) by n.
  const long double clamped_result =
      s.op == ReduceOp::avg ? std::trunc(clamped / static_cast<long double>(inputs.size())) : clamped;
  if (clamped != exact && integer_value(got_bits, range) == clamped_result) {
    j.deviation = exact > highest ? Deviation::saturates_high : Deviation::saturates_low;
  } else if (partial_saturation(inputs, s.op, range, got_bits)) {
    j.deviation = Deviation::saturates_partially;
  }
  return j;
}

// `exact`: the unrounded result (long double), which tells an e4m3 overflow (NaN, as it has no
// inf) from inf - inf.
Deviation classify_float_reduction(const CheckSpec& s, double expected, double got, bool nan_input, double exact) {
  const double largest = largest_finite(s.dtype);
  const bool min_max = s.op == ReduceOp::min || s.op == ReduceOp::max;
  if (std::isnan(expected)) {
    if (nan_input) return Deviation::nan_dropped;
    if (std::isfinite(exact) && std::fabs(exact) > largest && got == std::copysign(largest, exact)) {
      return exact > 0 ? Deviation::saturates_high : Deviation::saturates_low;  // e4m3 saturated (NCCL's mode)
    }
    return std::isinf(got) ? Deviation::inf_for_nan : Deviation::other;
  }
  if (std::isinf(expected)) {
    if (std::isnan(got)) return Deviation::nan_for_inf;
    if (std::isinf(got)) return Deviation::other;  // the opposite infinity
    if (min_max) return Deviation::inf_dropped;
    if (got == largest) return Deviation::saturates_high;
    if (got == -largest) return Deviation::saturates_low;
    return s.op == ReduceOp::avg ? Deviation::avg_divides_first : Deviation::overflow_lost;
  }
  if (std::isinf(got)) return Deviation::spurious_overflow;
  if (expected == 0 && got == 0) return Deviation::zero_sign_lost;
  return Deviation::other;
}

template <class T>
Judgement judge_float_reduction(const CheckSpec& s, int64_t index, T got) {
  const int n = s.world_size;
  long double acc = input_value(s, 0, index);
  double sum_abs = std::fabs(static_cast<double>(acc));
  bool nan_input = std::isnan(acc);
  for (int r = 1; r < n; ++r) {
    const long double x = input_value(s, r, index);
    sum_abs += std::fabs(static_cast<double>(x));
    nan_input = nan_input || std::isnan(x);
    switch (s.op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc += x; break;
      case ReduceOp::prod: acc *= x; break;
      // NaN propagates (IEEE 754-2019 minimum/maximum); std::min would keep whichever came first.
      case ReduceOp::min: acc = (std::isnan(acc) || std::isnan(x)) ? acc + x : std::min(acc, x); break;
      case ReduceOp::max: acc = (std::isnan(acc) || std::isnan(x)) ? acc + x : std::max(acc, x); break;
    }
  }
  Judgement j;
  T expected;
  if (s.kind == InputKind::overflow) {
    // Every combine order gives these bits (check.cpp's classes): the exact result rounded once,
    // and for avg the rounded sum (±inf past the range) divided by n and rounded again.
    expected = to_dtype<T>(to_double(acc));
    if (s.op == ReduceOp::avg) expected = to_dtype<T>(static_cast<double>(expected) / n);
    j.reference = static_cast<double>(expected);
  } else if (s.op == ReduceOp::avg) {
    // Exact inputs make every partial sum an integer below 2^53, so double holds the sum exactly
    // and the one rounding to T happens in the cast (double rounding through double is innocuous:
    // 53 >= 2p + 2 for p <= 24). Random inputs use long double.
    j.reference = s.kind == InputKind::exact ? static_cast<double>(acc) / n : static_cast<double>(acc / n);
    expected = static_cast<T>(j.reference);
  } else {
    j.reference = static_cast<double>(acc);
    expected = static_cast<T>(j.reference);
  }
  const double got_value = static_cast<double>(got);
  const double expected_value = static_cast<double>(expected);
  j.error = std::isnan(got_value) ? std::numeric_limits<double>::infinity() : std::fabs(got_value - j.reference);
  const bool bit_exact = s.kind != InputKind::random || s.op == ReduceOp::min || s.op == ReduceOp::max;
  if (bit_exact) {
    // Any NaN stands for NaN: IEEE 754 does not fix the sign or payload an operation returns.
    const bool both_nan = std::isnan(expected_value) && std::isnan(got_value);
    j.wrong = !both_nan && bits_of(got) != bits_of(expected);
    if (!j.wrong) j.error = 0;
    else if (j.error == 0 || std::isnan(j.error)) j.error = std::numeric_limits<double>::infinity();  // -0 vs +0
  } else {
    j.wrong = !(j.error <= random_error_bound(s.dtype, s.op, n, sum_abs, j.reference));
  }
  if (j.wrong) {
    j.expected = show(expected);
    j.deviation = classify_float_reduction(s, expected_value, got_value, nan_input, to_double(acc));
  }
  return j;
}

// Data movement: the input's bits must arrive unchanged, NaN payloads and signed zeros included.
template <class T>
Judgement judge_copy(const CheckSpec& s, const Source& src, T got) {
  const uint64_t bits = input_bits(s, src.rank, src.index);
  const T expected = from_bits<T>(bits);
  Judgement j;
  j.reference = static_cast<double>(expected);
  const uint64_t mask = storage_mask(s.dtype);
  j.wrong = (bits_of(got) & mask) != (bits & mask);
  if (!j.wrong) return j;
  j.expected = show(expected);
  const double got_value = static_cast<double>(got);
  j.error = std::fabs(got_value - j.reference);
  if (std::isnan(j.error) || j.error == 0) j.error = std::numeric_limits<double>::infinity();
  if constexpr (!std::is_integral_v<T>) {
    const bool subnormal = j.reference != 0 && std::fabs(j.reference) < std::ldexp(1.0, format_of(s.dtype).min_exponent);
    if (std::isnan(j.reference) && std::isnan(got_value)) j.deviation = Deviation::nan_payload_changed;
    else if (subnormal && got_value == 0) j.deviation = Deviation::subnormal_flushed;
    else if (j.reference == 0 && got_value == 0) j.deviation = Deviation::zero_sign_lost;
  }
  return j;
}

template <class T>
CheckResult check_typed(const CheckSpec& s, int rank, const T* out) {
  CheckResult result;
  if (s.collective == Collective::reduce && rank != s.root) return result;
  const int64_t elements = output_elements(s);
  if (!is_reducing(s.collective)) result.wrong_from.assign(static_cast<size_t>(s.world_size), 0);
  for (int64_t j = 0; j < elements; ++j) {
    const Source src = source_of(s, rank, j);
    const T got = out[j];
    Judgement judged;
    if (!src.reduce_all) judged = judge_copy(s, src, got);
    else if constexpr (std::is_integral_v<T>) judged = judge_integer_reduction(s, src.index, got);
    else judged = judge_float_reduction(s, src.index, got);
    if (judged.error > 0) {
      const double ulps = std::isfinite(judged.reference) ? judged.error / ulp_of(s.dtype, judged.reference)
                                                          : std::numeric_limits<double>::infinity();
      result.max_ulp = std::max(result.max_ulp, ulps);
    }
    if (!judged.wrong) continue;
    if (result.wrong == 0) {
      result.first_wrong = "rank " + std::to_string(rank) + " element " + std::to_string(j) + ": got " + show(got) +
                           " expected " + judged.expected + " (" +
                           describe(judged.deviation, s.dtype, s.op, is_reducing(s.collective)) + ")";
    }
    ++result.wrong;
    ++result.deviations[static_cast<size_t>(judged.deviation)];
    if (!src.reduce_all) ++result.wrong_from[static_cast<size_t>(src.rank)];
  }
  result.checked = elements;
  return result;
}

}  // namespace

CheckResult check_output(const CheckSpec& spec, int rank, const void* output) {
  return visit_dtype(spec.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return check_typed<T>(spec, rank, static_cast<const T*>(output));
  });
}

}  // namespace dts
