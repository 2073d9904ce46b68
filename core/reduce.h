// Element-wise reduction kernels on host memory, shared by backends that reduce on the host
// (MPI user ops for f16/bf16, the reference ring algorithms, fault injection).
// Semantics, fixed for every backend: f16/bf16/fp8 are combined in f32 and rounded to nearest
// even once per combine; integers wrap (modulo 2^bits, signed ones two's complement); floats follow
// IEEE 754 (overflow to ±inf, inf - inf = NaN); min and max propagate NaN (a NaN in any input
// gives NaN, as IEEE 754-2019 minimum/maximum); avg is sum followed by division by n (integer
// division truncates toward zero, as C does; unsigned divide as unsigned).
// fp8 rounds in OCP's non-saturating mode (core/fp8.h): e5m2 overflows to ±inf like f16, e4m3,
// which has no inf, to NaN. Why not saturating, which NCCL's fp8 kernels use (an f16 op, then
// cuda_fp8.h's __NV_SATFINITE conversion; NCCL src/device/reduce_kernel.h): it keeps one rule for
// every float dtype, and an overflow stays visible and absorbing whatever the combine order
// (NaN and inf stay; a clamped 448 can come down again: (448 + 448) - 448 is 0 saturated, 448 in
// another order), so the check's overflow inputs have one right answer. A saturating stack is
// then a named deviation ("saturates at 448"), for an expectation to waive once measured.
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
