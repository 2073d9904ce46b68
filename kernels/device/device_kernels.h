// The device's kernel table: kernels/kernels.h's float kernels on device pointers, for the
// process's device kind (core/buffer.h). cuda: kernels/cuda (cuBLAS gemm), queued on the legacy
// default stream. emulated: kernels/cpu on the host memory behind each device range (the only
// code that reaches it: emulated_memory_of), each range checked to lie inside one device buffer,
// so a kernel handed a pointer past its buffer fails as it would on a GPU, and no earlier.
// Strategies on the device call these and nothing else, so one strategy code runs on both kinds.
#pragma once
#include <cstdint>

#include "kernels/kernels.h"

namespace dts::kernels::device {

// Waits for the queued kernels and raises a kernel fault as an Error (cuda); nothing to wait for
// on the emulated device, whose kernels run when called.
void synchronize();
void gemm(const GemmShape& shape, float alpha, const float* a, const float* b, float beta, float* c);
void bias_gelu_forward(const float* x, const float* bias, float* pre, float* y, int64_t rows, int64_t cols);
void bias_gelu_backward(const float* pre, const float* dy, float* dx, float* dbias, int64_t rows, int64_t cols);
double softmax_cross_entropy(const float* logits, const int32_t* labels, float* dlogits, int64_t rows, int64_t classes);
void sgd_momentum_step(float* param, const float* grad, float* velocity, int64_t n, const SgdMomentum& opt);
void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, const AdamW& opt, int64_t step);
// The loops kernels.h leaves to the caller, as kernels/cuda/cuda_kernels.h states them:
//   bias_add: out[r][c] = x[r][c] + bias[c];  column_sum: out[c] = sum over rows of x[r][c] (in
//   double, rows in order, rounded once);  add: y[i] += x[i];  scale: x[i] *= alpha;
//   divide: x[i] /= divisor
void bias_add(const float* x, const float* bias, float* out, int64_t rows, int64_t cols);
void column_sum(const float* x, float* out, int64_t rows, int64_t cols);
void add(float* y, const float* x, int64_t n);
void scale(float* x, float alpha, int64_t n);
void divide(float* x, float divisor, int64_t n);
// x[i] = float(double(x[i]) * alpha), rounded once (the table's scale_in_double).
void scale_in_double(float* x, double alpha, int64_t n);
// Each value to the nearest bf16 (ties to even), in place (kernels/cpu's round_to_bf16).
void round_to_bf16(float* x, int64_t n);
// Device memory set to zero, and copied device to device (queued, as the kernels are).
void zero(float* x, int64_t n);
void copy(float* dst, const float* src, int64_t n);
// Keeps the device busy for `seconds`, queued as a kernel is (the straggler's delay): on a GPU a
// kernel spinning on the device's global timer; on the emulated device, whose kernels run when
// called, the host's kernels/cpu delay.
void delay(double seconds);
// f32 <-> bf16 bits: each value to the nearest bf16 (ties to even), and back exactly (kernels/cpu's
// cast_f32_to_bf16 and cast_bf16_to_f32).
void cast_f32_to_bf16(const float* in, uint16_t* out, int64_t n);
void cast_bf16_to_f32(const uint16_t* in, float* out, int64_t n);

}  // namespace dts::kernels::device
