// Input patterns, references and bounds for the collectives checks (see check.h).
#include "suites/collectives/check.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <type_traits>
#include <vector>

#include "core/element.h"
#include "core/error.h"

namespace dts {

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
};

Format format_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return {24, -126};
    case DType::f64: return {53, -1022};
    case DType::f16: return {11, -14};
    case DType::bf16: return {8, -126};
    default: return {0, 0};
  }
}

// Largest integer magnitude up to which every integer is representable (floats) or that fits
// (integers): the budget shared by n ranks' exact inputs so no partial sum leaves it.
double exact_limit(DType dtype) {
  switch (dtype) {
    case DType::f32: return 0x1p24;
    case DType::f64: return 0x1p53;
    case DType::f16: return 0x1p11;
    case DType::bf16: return 0x1p8;
    case DType::i8: return 127;
    case DType::u8: return 255;
    case DType::i32: return 2147483647.0;
    case DType::i64: return 0x1p53;  // inputs travel through double in the checker
  }
  return 1;
}

// `value` rounded to the dtype: the input the stack actually sees.
double rounded_to(DType dtype, double value) {
  uint64_t scratch = 0;
  store_double(dtype, &scratch, 0, value);
  return load_double(dtype, &scratch, 0);
}

bool is_unsigned(DType dtype) { return dtype == DType::u8; }

int ceil_log2(int n) {
  int levels = 0;
  while ((1 << levels) < n) ++levels;
  return levels;
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

double input_value(const CheckSpec& s, int rank, int64_t index) {
  const uint64_t stream = static_cast<uint64_t>(rank) * 2 + (s.kind == InputKind::random ? 1 : 0);
  const uint64_t h = mix(s.seed, stream, static_cast<uint64_t>(index));
  const bool reducing = is_reducing(s.collective);
  const bool signed_type = !is_unsigned(s.dtype);
  if (reducing && s.op == ReduceOp::prod) {
    if (s.kind == InputKind::random && is_floating(s.dtype)) {
      const double magnitude = 0.5 + 1.5 * static_cast<double>(h >> 11) * 0x1p-53;  // [0.5, 2)
      return rounded_to(s.dtype, (h & 1) ? -magnitude : magnitude);
    }
    // Exactly one rank contributes magnitude 2 to each element, the rest magnitude 1: the
    // product is ±2 whatever the order and the rank count, and a missing rank shows.
    const double magnitude = (index + rank) % s.world_size == 0 ? 2.0 : 1.0;
    return (signed_type && (h & 1)) ? -magnitude : magnitude;
  }
  if (s.kind == InputKind::random && is_floating(s.dtype)) {
    const double u = static_cast<double>(h >> 11) * 0x1p-53 * 2.0 - 1.0;  // [-1, 1)
    return rounded_to(s.dtype, u);
  }
  // Small integers: for sum/avg the budget is split over n ranks so every partial sum is exact;
  // min/max and data movement need no budget split (any representable value is exact).
  const bool needs_split = reducing && (s.op == ReduceOp::sum || s.op == ReduceOp::avg);
  double k = std::floor(exact_limit(s.dtype) / (needs_split ? s.world_size : 1));
  k = std::max(1.0, std::min(k, 0x1p20));  // past 2^20 larger values add nothing to the check
  const auto span = static_cast<uint64_t>(signed_type ? 2 * k + 1 : k + 1);
  const double v = static_cast<double>((h >> 8) % span);
  return signed_type ? v - k : v;
}

void fill_input(const CheckSpec& s, int rank, void* input) {
  const int64_t n = input_elements(s);
  visit_dtype(s.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(input);
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(input_value(s, rank, i));
  });
}

void fill_sentinel(void* data, int64_t bytes) { std::memset(data, 0xA5, static_cast<size_t>(bytes)); }

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

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
std::string show(T v) {
  std::ostringstream out;
  out.precision(17);
  out << static_cast<double>(v);
  return out.str();
}

template <class T>
CheckResult check_typed(const CheckSpec& s, int rank, const T* out) {
  CheckResult result;
  if (s.collective == Collective::reduce && rank != s.root) return result;
  const int64_t elements = output_elements(s);
  const int n = s.world_size;
  const bool reduction = is_reducing(s.collective);
  const bool bit_exact = s.kind == InputKind::exact || !is_floating(s.dtype) || !reduction ||
                         s.op == ReduceOp::min || s.op == ReduceOp::max;
  for (int64_t j = 0; j < elements; ++j) {
    const Source src = source_of(s, rank, j);
    T expected;
    double reference = 0, sum_abs = 0;
    if (!src.reduce_all) {
      reference = input_value(s, src.rank, src.index);
      expected = static_cast<T>(reference);
    } else if constexpr (std::is_integral_v<T>) {
      // Integers: the same two's-complement arithmetic the stack must use.
      int64_t acc = static_cast<int64_t>(input_value(s, 0, src.index));
      for (int r = 1; r < n; ++r) {
        const auto x = static_cast<int64_t>(input_value(s, r, src.index));
        switch (s.op) {
          case ReduceOp::sum:
          case ReduceOp::avg: acc += x; break;
          case ReduceOp::prod: acc *= x; break;
          case ReduceOp::min: acc = std::min(acc, x); break;
          case ReduceOp::max: acc = std::max(acc, x); break;
        }
      }
      if (s.op == ReduceOp::avg) acc /= n;
      expected = static_cast<T>(acc);
      reference = static_cast<double>(acc);
    } else {
      // Floats: exact inputs make every partial sum an integer below 2^53, so double holds the
      // sum exactly and the one rounding to T happens in the cast (double rounding through
      // double is innocuous: 53 >= 2p + 2 for p <= 24). Random inputs use long double.
      long double acc = input_value(s, 0, src.index);
      sum_abs = std::fabs(static_cast<double>(acc));
      for (int r = 1; r < n; ++r) {
        const long double x = input_value(s, r, src.index);
        sum_abs += std::fabs(static_cast<double>(x));
        switch (s.op) {
          case ReduceOp::sum:
          case ReduceOp::avg: acc += x; break;
          case ReduceOp::prod: acc *= x; break;
          case ReduceOp::min: acc = std::min(acc, x); break;
          case ReduceOp::max: acc = std::max(acc, x); break;
        }
      }
      if (s.op == ReduceOp::avg) {
        reference = s.kind == InputKind::exact ? static_cast<double>(acc) / n : static_cast<double>(acc / n);
      } else {
        reference = static_cast<double>(acc);
      }
      expected = static_cast<T>(reference);
    }
    const T got = out[j];
    const double got_value = static_cast<double>(got);
    double error = std::isnan(got_value) ? std::numeric_limits<double>::infinity() : std::fabs(got_value - reference);
    bool wrong;
    if (bit_exact) {
      wrong = !same_bits(got, expected);
      if (wrong && error == 0) error = std::numeric_limits<double>::infinity();  // -0 vs +0, NaN payloads
      if (!wrong) error = 0;
    } else {
      wrong = !(error <= random_error_bound(s.dtype, s.op, n, sum_abs, reference));
    }
    const double ulps = error / ulp_of(s.dtype, reference);
    if (ulps > result.max_ulp) result.max_ulp = ulps;
    if (wrong) {
      if (result.wrong == 0) {
        result.first_wrong = "rank " + std::to_string(rank) + " element " + std::to_string(j) + ": got " + show(got) +
                             " expected " + show(expected);
      }
      ++result.wrong;
    }
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
