// Element-wise reduction kernels on host memory, shared by backends that reduce on the host
// (MPI user ops for f16/bf16, the reference ring algorithms, fault injection).
// Semantics, fixed for every backend: f16/bf16 are combined in f32 and rounded to nearest even
// once per combine; integers wrap (modulo 2^bits, signed ones two's complement); floats follow
// IEEE 754 (overflow to ±inf, inf - inf = NaN); min and max propagate NaN (a NaN in any input
// gives NaN, as IEEE 754-2019 minimum/maximum); avg is sum followed by division by n (integer
// division truncates toward zero, as C does; unsigned divide as unsigned). fp8 has no kernels
// here (has_host_arithmetic): these functions throw Error{unsupported} for it.
#pragma once
#include <cstddef>

#include "core/dtype.h"

namespace dts {

// acc[i] = acc[i] OP in[i]. For avg the combine step is sum; finish with divide_by().
void reduce_into(DType dtype, ReduceOp op, void* acc, const void* in, size_t count);
// data[i] /= n (the last step of avg).
void divide_by(DType dtype, void* data, size_t count, int n);
// Fill with the identity of op (0 for sum/avg, 1 for prod, the largest value for min, ...).
void fill_identity(DType dtype, ReduceOp op, void* data, size_t count);

}  // namespace dts
