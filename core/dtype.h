// Element types and reduction operators: the shared vocabulary of every layer.
// Names follow DESIGN.md (f32, bf16, ...); parsing also accepts nccl-tests' spellings.
// The fp8 formats (OCP e4m3 and e5m2, core/fp8.h) have host arithmetic like the others, but no
// MPI datatype: the mpi backend refuses them, dtsuite's own algorithms (ring, tree) carry them.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dts {

// New types go at the end: the values of the older ones stay what they were.
enum class DType : uint8_t { f32, f64, f16, bf16, i8, u8, i32, i64, u32, u64, f8e4m3, f8e5m2 };
enum class ReduceOp : uint8_t { sum, prod, min, max, avg };
enum class Memory : uint8_t { host, device };

// Every dtype an MPI library carries (core/reduce.h reduces these and fp8): what host backends
// carry and tests sweep.
inline constexpr std::array<DType, 10> kAllDTypes{DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8,
                                                  DType::u8,  DType::i32, DType::u32, DType::i64,  DType::u64};
// nccl-tests' fp8 types (NCCL reduces them on sm_90 and newer): checked where a backend carries
// them (nccl, ring/tree over any inner), SKIP where none does (mpi).
inline constexpr std::array<DType, 2> kFp8DTypes{DType::f8e4m3, DType::f8e5m2};
inline constexpr std::array<ReduceOp, 5> kAllReduceOps{ReduceOp::sum, ReduceOp::prod, ReduceOp::min,
                                                       ReduceOp::max, ReduceOp::avg};

size_t size_of(DType dtype);
// The dtype that carries `dtype`'s elements through a transfer that only moves bytes (an
// algorithm's point-to-point sends): itself, or u8 for fp8, for which MPI has no datatype.
DType carrier_dtype(DType dtype);
bool is_floating(DType dtype);  // fp8 included
bool is_unsigned(DType dtype);  // u8, u32, u64
std::string_view name(DType dtype);
std::string_view name(ReduceOp op);
std::string_view name(Memory memory);
// nccl-tests' name of a type ("float", "half", "bfloat16", "int8", ...), for its table shape.
std::string_view nccl_name(DType dtype);

// Throw Error{invalid_argument} naming the accepted spellings.
DType parse_dtype(std::string_view text);
ReduceOp parse_reduce_op(std::string_view text);
// "8", "64K", "16M", "1G" (powers of 1024, as nccl-tests) -> bytes; Error{invalid_argument}
// with one line for anything else or a size above 2^50.
int64_t parse_size(const std::string& text);
// "a,b,c" -> {a, b, c}; an empty list or item, or an item given twice, is Error{invalid_argument}.
std::vector<std::string> parse_list(const std::string& text);

}  // namespace dts
