// Host reduction kernels; see reduce.h for the semantics every backend shares.
#include "core/reduce.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/element.h"

namespace dts {

namespace {

template <class T>
T combine(ReduceOp op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case ReduceOp::prod:
        // Multiply in a wide unsigned type so overflow wraps instead of being undefined.
        return static_cast<T>(static_cast<U>(static_cast<uint64_t>(static_cast<U>(a)) *
                                             static_cast<uint64_t>(static_cast<U>(b))));
      case ReduceOp::min: return std::min(a, b);
      case ReduceOp::max: return std::max(a, b);
    }
    return a;
  } else if constexpr (kIsNarrowFloat<T>) {
    const float r = combine<float>(op, static_cast<float>(a), static_cast<float>(b));
    return T(static_cast<double>(r));
  } else {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return a + b;
      case ReduceOp::prod: return a * b;
      // NaN propagates, as in the reference: fmin would hide it.
      case ReduceOp::min: return (a != a || b != b) ? a + b : std::min(a, b);
      case ReduceOp::max: return (a != a || b != b) ? a + b : std::max(a, b);
    }
    return a;
  }
}

template <class T>
void reduce_typed(ReduceOp op, T* acc, const T* in, size_t count) {
  // One switch per buffer, not per element, so the loops vectorize for the wide types.
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      for (size_t i = 0; i < count; ++i) acc[i] = combine(ReduceOp::sum, acc[i], in[i]);
      break;
    case ReduceOp::prod:
      for (size_t i = 0; i < count; ++i) acc[i] = combine(ReduceOp::prod, acc[i], in[i]);
      break;
    case ReduceOp::min:
      for (size_t i = 0; i < count; ++i) acc[i] = combine(ReduceOp::min, acc[i], in[i]);
      break;
    case ReduceOp::max:
      for (size_t i = 0; i < count; ++i) acc[i] = combine(ReduceOp::max, acc[i], in[i]);
      break;
  }
}

}  // namespace

void reduce_into(DType dtype, ReduceOp op, void* acc, const void* in, size_t count) {
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduce_typed(op, static_cast<T*>(acc), static_cast<const T*>(in), count);
  });
}

void divide_by(DType dtype, void* data, size_t count, int n) {
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(data);
    if constexpr (std::is_unsigned_v<T>) {
      // Widen first: n may not fit the element type (u8), and a u64 above 2^63 is no int64.
      const auto divisor = static_cast<uint64_t>(n);
      for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(static_cast<uint64_t>(p[i]) / divisor);
    } else if constexpr (std::is_integral_v<T>) {
      // Widen first: an i8 n would not fit the element type.
      for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(static_cast<int64_t>(p[i]) / int64_t{n});
    } else if constexpr (kIsNarrowFloat<T>) {
      // f32 has at least 2p+2 bits for p = 11 (f16), 8 (bf16), 4 and 3 (fp8), so rounding the f32 quotient
      // again to the narrow type equals rounding the exact quotient once.
      for (size_t i = 0; i < count; ++i) p[i] = T(static_cast<double>(static_cast<float>(p[i]) / static_cast<float>(n)));
    } else {
      for (size_t i = 0; i < count; ++i) p[i] = p[i] / static_cast<T>(n);
    }
  });
}

void fill_identity(DType dtype, ReduceOp op, void* data, size_t count) {
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T value{};
    if constexpr (std::is_integral_v<T>) {
      switch (op) {
        case ReduceOp::sum:
        case ReduceOp::avg: value = 0; break;
        case ReduceOp::prod: value = 1; break;
        case ReduceOp::min: value = std::numeric_limits<T>::max(); break;
        case ReduceOp::max: value = std::numeric_limits<T>::lowest(); break;
      }
    } else {
      double v = 0;
      switch (op) {
        case ReduceOp::sum:
        case ReduceOp::avg: v = 0; break;
        case ReduceOp::prod: v = 1; break;
        case ReduceOp::min: v = std::numeric_limits<double>::infinity(); break;
        case ReduceOp::max: v = -std::numeric_limits<double>::infinity(); break;
      }
      value = T(v);
      if constexpr (std::is_same_v<T, Fp8E4M3>) {
        // No inf in e4m3 (T(inf) is NaN, which min and max propagate): its largest value, 448,
        // is as neutral, being at least every other value.
        if (op == ReduceOp::min) value.bits = Fp8E4M3::kLargestBits;
        if (op == ReduceOp::max) value.bits = Fp8E4M3::kLargestBits | 0x80;
      }
    }
    std::fill_n(static_cast<T*>(data), count, value);
  });
}

double load_double(DType dtype, const void* data, size_t index) {
  return visit_dtype(dtype, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    return static_cast<double>(static_cast<const T*>(data)[index]);
  });
}

void store_double(DType dtype, void* data, size_t index, double value) {
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    static_cast<T*>(data)[index] = static_cast<T>(value);
  });
}

}  // namespace dts
