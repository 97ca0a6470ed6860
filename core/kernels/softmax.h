// Softmax and log-softmax over the last dimension, with their backward:
//   y = softmax(x):      dx = y * (dy - sum(dy * y))
//   y = log_softmax(x):  dx = dy - exp(y) * sum(dy)
#pragma once
#include "core/tensor.h"

namespace ember::kernels {

Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);
Tensor softmax_backward(const Tensor& y, const Tensor& dy);
Tensor log_softmax_backward(const Tensor& y, const Tensor& dy);

}  // namespace ember::kernels
