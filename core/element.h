// Typed access to untyped buffers: visit_dtype() calls a generic lambda with the C++ type of a
// DType, and load/store move single elements through double (exact for every dtype but i64 and
// u64 beyond 2^53, which callers that need exactness handle with integer paths).
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"
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
    case DType::f8e4m3:
    case DType::f8e5m2:
      // No host arithmetic: a caller that reaches here reports the case as unsupported (SKIP).
      throw Error(Error::Kind::unsupported,
                  std::string(name(dtype)) + ": dtsuite has no host arithmetic for fp8 (no host backend carries it)");
  }
  return f(TypeTag<float>{});
}

template <class T>
inline constexpr bool kIsNarrowFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

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
