// CUDA implementations of kernels/kernels.h for float, on device pointers. Every function runs on
// the legacy default stream and returns after the work is queued; call synchronize() before
// reading results on the host, or before handing them to work of another stream (a device
// communicator's: NCCL's streams are non-blocking, so they do not wait for the default stream).
// Errors: dts::Error{backend} with cudaGetErrorString / cuBLAS status.
#pragma once
#include <cstdint>

#include "kernels/kernels.h"

namespace dts::kernels::cuda {

bool available();  // a CUDA device answers (false without a driver or device; never throws)
// Waits for the work queued on the default stream (only: not for other streams' work, such as a
// device communicator's collectives in flight), and raises a kernel fault as an Error.
void synchronize();

void gemm(const GemmShape& shape, float alpha, const float* a, const float* b, float beta, float* c);
void bias_gelu_forward(const float* x, const float* bias, float* pre, float* y, int64_t rows, int64_t cols);
void bias_gelu_backward(const float* pre, const float* dy, float* dx, float* dbias, int64_t rows, int64_t cols);
double softmax_cross_entropy(const float* logits, const int32_t* labels, float* dlogits, int64_t rows, int64_t classes);
void sgd_momentum_step(float* param, const float* grad, float* velocity, int64_t n, const SgdMomentum& opt);
void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, const AdamW& opt, int64_t step);
// The pieces of a layer that kernels.h leaves to loops (kernels/device/kernel_table.h):
//   bias_add:   out[r][c] = x[r][c] + bias[c]        (one float add: bias_gelu_forward without GeLU)
//   column_sum: out[c] = sum over rows of x[r][c]    (in double, in a fixed order, rounded once;
//                                                     0 for no rows)
//   add:        y[i] += x[i];   scale: x[i] *= alpha;   divide: x[i] /= divisor  (one float
//                                                     operation each, IEEE division)
void bias_add(const float* x, const float* bias, float* out, int64_t rows, int64_t cols);
void column_sum(const float* x, float* out, int64_t rows, int64_t cols);
void add(float* y, const float* x, int64_t n);
void scale(float* x, float alpha, int64_t n);
void divide(float* x, float divisor, int64_t n);
// x[i] = float(double(x[i]) * alpha): the product in double, rounded once.
void scale_in_double(float* x, double alpha, int64_t n);
// Keeps the device busy for `seconds` (queued; none for 0 or less): a kernel spinning on the
// device's global timer (the straggler's delay, strategies/strategy.h).
void delay(double seconds);
void cast_f32_to_bf16(const float* in, uint16_t* out, int64_t n);
void cast_bf16_to_f32(const uint16_t* in, float* out, int64_t n);
// Each value to the nearest bf16 (ties to even) and back, in place: bf16 compute's rounding.
void round_to_bf16(float* x, int64_t n);
void cast_f32_to_f16(const float* in, uint16_t* out, int64_t n);
void cast_f16_to_f32(const uint16_t* in, float* out, int64_t n);

}  // namespace dts::kernels::cuda
