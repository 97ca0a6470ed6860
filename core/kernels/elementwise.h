// Elementwise kernels: broadcasting binary ops, unary ops, comparisons,
// where / masked_fill, and the fused backward of the activation functions.
// Binary ops broadcast with NumPy rules; both operands must have the same
// dtype (an Error names both otherwise); inputs may be any strided view.
#pragma once
#include "core/tensor.h"

namespace ember::kernels {

// --- binary (broadcasting) ------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);      // a^b, float only
Tensor maximum(const Tensor& a, const Tensor& b);  // NaN propagates
Tensor minimum(const Tensor& a, const Tensor& b);

// --- with a scalar ------------------------------------------------------------------
Tensor add_scalar(const Tensor& a, double s);
Tensor mul_scalar(const Tensor& a, double s);
Tensor pow_scalar(const Tensor& a, double p);  // a^p
Tensor rsub_scalar(const Tensor& a, double s);  // s - a
Tensor clamp(const Tensor& a, double lo, double hi);

// --- in place (bump the version of dst) -------------------------------------------
// dst += alpha * src, src broadcast to dst's shape.
void add_(Tensor& dst, const Tensor& src, double alpha = 1);
void mul_scalar_(Tensor& dst, double s);

// --- unary (float32 / float64) ------------------------------------------------------------
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor silu(const Tensor& a);       // x * sigmoid(x)
Tensor gelu(const Tensor& a);       // x * Phi(x), exact (erf)
Tensor gelu_tanh(const Tensor& a);  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
Tensor relu(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor sign(const Tensor& a);  // -1, 0, 1

// --- fused activation backward: grad_in = grad_out * f'(x) --------------------------------
Tensor silu_backward(const Tensor& x, const Tensor& grad);
Tensor gelu_backward(const Tensor& x, const Tensor& grad);
Tensor gelu_tanh_backward(const Tensor& x, const Tensor& grad);
Tensor relu_backward(const Tensor& x, const Tensor& grad);     // grad * (x > 0)
Tensor sigmoid_backward(const Tensor& y, const Tensor& grad);  // grad * y (1 - y), y = sigmoid(x)
Tensor tanh_backward(const Tensor& y, const Tensor& grad);     // grad * (1 - y^2), y = tanh(x)

// --- comparisons (broadcasting; result int32 0/1) ---------------------------------------------
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);

// --- selection ------------------------------------------------------------------------------------
// cond ? a : b elementwise (cond of any dtype, nonzero is true; all three broadcast).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// a with value where mask is nonzero (mask broadcasts to a's shape).
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value);

}  // namespace ember::kernels
