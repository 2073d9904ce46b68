// Typed access to untyped buffers: visit_dtype() calls a generic lambda with the C++ type of a
// DType, and load/store move single elements through double (exact for every dtype but i64 and
// u64 beyond 2^53, which callers that need exactness handle with integer paths).
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/half.h"

namespace dts {

template <class T>
struct TypeTag {
  using type = T;
};

template <class F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f(TypeTag<float>{});
    case DType::f64: return f(TypeTag<double>{});
    case DType::f16: return f(TypeTag<Half>{});
    case DType::bf16: return f(TypeTag<BFloat16>{});
    case DType::i8: return f(TypeTag<int8_t>{});
    case DType::u8: return f(TypeTag<uint8_t>{});
    case DType::i32: return f(TypeTag<int32_t>{});
    case DType::i64: return f(TypeTag<int64_t>{});
    case DType::u32: return f(TypeTag<uint32_t>{});
    case DType::u64: return f(TypeTag<uint64_t>{});
    case DType::f8e4m3: return f(TypeTag<Fp8E4M3>{});
    case DType::f8e5m2: return f(TypeTag<Fp8E5M2>{});
  }
  return f(TypeTag<float>{});
}

// Storage types without C++ arithmetic: combined in f32 and rounded back (core/reduce.h).
template <class T>
inline constexpr bool kIsFp8 = std::is_same_v<T, Fp8E4M3> || std::is_same_v<T, Fp8E5M2>;
template <class T>
inline constexpr bool kIsNarrowFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> || kIsFp8<T>;

template <class T>
double to_double(T v) {
  return static_cast<double>(v);
}
template <class T>
T from_double(double v) {
  return static_cast<T>(v);
}

double load_double(DType dtype, const void* data, size_t index);
void store_double(DType dtype, void* data, size_t index, double value);  // rounds to nearest even

}  // namespace dts
