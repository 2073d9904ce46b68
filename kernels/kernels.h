// Compute kernels of the training workload, one signature set for every device: cpu/ runs them
// on the host (gemm through OpenBLAS), cuda/ on a GPU (gemm through cuBLAS) with device pointers.
// Matrices are row-major. Each kernel's math is written here once; implementations must match it.
#pragma once
#include <cstdint>

namespace dts::kernels {

// C = alpha * op(A) * op(B) + beta * C, with op(X) = X^T when trans_x. op(A) is m x k, op(B) is
// k x n, C is m x n; lda/ldb/ldc are row strides (elements) of A, B, C as stored.
struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

// GeLU, exact form (PyTorch's default): gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2));
// gelu'(x) = Phi(x) + x * phi(x), phi the standard normal density.
//   forward:  pre[r][c] = x[r][c] + bias[c];  y = gelu(pre)
//   backward: dx = dy * gelu'(pre);  dbias[c] = sum over rows of dx[r][c]  (dbias overwritten)

// Softmax cross-entropy over `rows` samples of `classes` logits, labels in [0, classes):
//   loss = (1/rows) * sum_r ( logsumexp(logits[r]) - logits[r][label_r] )   (max-subtracted)
//   dlogits[r][c] = (softmax(logits[r])[c] - [c == label_r]) / rows

// SGD with momentum (PyTorch's form, dampening 0, weight decay added to the gradient):
//   g = grad + weight_decay * p;  v = momentum * v + g;  p -= lr * v
// AdamW (Loshchilov & Hutter; PyTorch's AdamW), step t >= 1:
//   p -= lr * weight_decay * p
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)

struct SgdMomentum {
  double lr = 0.01, momentum = 0.9, weight_decay = 0;
};
struct AdamW {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

}  // namespace dts::kernels
