// Selection by a mask: where and masked_fill. The condition / mask is a plain
// Tensor of any dtype (nonzero is true), never differentiated; it is saved to
// route the gradient, and an in-place edit of it before backward is caught.
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/kernels/elementwise.h"

// Shapes: cond, a, b (or a, mask) broadcast to y [...]; g = dL/dy.

namespace ember {

// y = cond ? a : b:  da = cond ? g : 0,  db = cond ? 0 : g
Variable where(const Tensor& cond, const Variable& a, const Variable& b) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  const bool need_a = needs_grad(a), need_b = needs_grad(b);
  return record("where", {a, b}, kernels::where(cond, a.data(), b.data()),
                [need_a, need_b, sc = SavedTensor(cond)](const Tensor& g) -> Grads {
                  const Tensor zero = Tensor::scalar(0, g.dtype());
                  return {need_a ? kernels::where(sc.get(), g, zero) : Tensor(),
                          need_b ? kernels::where(sc.get(), zero, g) : Tensor()};
                });
}

// y = mask ? value : a:  da = mask ? 0 : g
Variable masked_fill(const Variable& a, const Tensor& mask, double value) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  return record("masked_fill", {a}, kernels::masked_fill(a.data(), mask, value),
                [sm = SavedTensor(mask)](const Tensor& g) -> Grads {
                  return {kernels::masked_fill(g, sm.get(), 0)};
                });
}

}  // namespace ember
