// Host implementations of kernels/kernels.h, for T = float and double (the reference trainer
// runs in both). gemm goes through OpenBLAS (sgemm/dgemm); the rest are loops that vectorize
// (float GeLU on its own exp and normal CDF: accuracy stated in cpu_kernels.cpp).
#pragma once
#include <cstdint>

#include "kernels/kernels.h"

namespace dts::kernels::cpu {

template <class T>
void gemm(const GemmShape& shape, T alpha, const T* a, const T* b, T beta, T* c);

template <class T>
void bias_gelu_forward(const T* x, const T* bias, T* pre, T* y, int64_t rows, int64_t cols);
template <class T>
void bias_gelu_backward(const T* pre, const T* dy, T* dx, T* dbias, int64_t rows, int64_t cols);

// Returns the mean loss; writes dlogits (may alias nothing). Labels are int32.
template <class T>
double softmax_cross_entropy(const T* logits, const int32_t* labels, T* dlogits, int64_t rows, int64_t classes);

template <class T>
void sgd_momentum_step(T* param, const T* grad, T* velocity, int64_t n, const SgdMomentum& opt);
template <class T>
void adamw_step(T* param, const T* grad, T* m, T* v, int64_t n, const AdamW& opt, int64_t step);

// f32 <-> narrow floats, round to nearest even (core/half.h bit conversions).
void cast_f32_to_bf16(const float* in, uint16_t* out, int64_t n);
void cast_bf16_to_f32(const uint16_t* in, float* out, int64_t n);
void cast_f32_to_f16(const float* in, uint16_t* out, int64_t n);
void cast_f16_to_f32(const uint16_t* in, float* out, int64_t n);
// Each value replaced by the nearest bf16 (ties to even), widened back: the two casts in one pass
// (bf16 compute rounds activations and gradients this way, strategies/mlp.h).
void round_to_bf16(float* values, int64_t n);
// Holds the calling thread for `seconds` (none for 0 or less), no less and little more: it sleeps
// until 1 ms before the end and yields the processor for the rest. A plain sleep overshoots by
// the timer's slack (measured: 100-460 us a call, so a straggler's factor 3 on phases of 50-200
// us came out as 5). The straggler's wait on the host (strategies/strategy.h).
void delay(double seconds);

}  // namespace dts::kernels::cpu
