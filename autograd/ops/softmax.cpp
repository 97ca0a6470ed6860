// Softmax and log-softmax over the last dim. Both save only their output y;
// the fused kernels in core/kernels/softmax.cpp compute forward and backward.
#include "core/kernels/softmax.h"

#include "autograd/node.h"
#include "autograd/ops.h"

// Shapes: x [..., C] -> y [..., C], normalized over C.

namespace ember {

// y = e^x / sum_C e^x:  dx = y (g - sum_C(g y))
Variable softmax(const Variable& x) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  Tensor y = kernels::softmax(x.data());
  return record("softmax", {x}, y, [sy = SavedTensor(y)](const Tensor& g) -> Grads {
    return {kernels::softmax_backward(sy.get(), g)};
  });
}

// y = x - log sum_C e^x:  dx = g - e^y sum_C(g)
Variable log_softmax(const Variable& x) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  Tensor y = kernels::log_softmax(x.data());
  return record("log_softmax", {x}, y, [sy = SavedTensor(y)](const Tensor& g) -> Grads {
    return {kernels::log_softmax_backward(sy.get(), g)};
  });
}

}  // namespace ember
