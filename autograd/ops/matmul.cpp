// Matmul with transpose flags, C = op(A) op(B). Backward is two more matmuls
// whose flags absorb every transpose (no transposed copies). A 2-D operand
// broadcast over a batch gets its gradient summed over that batch: by one
// 2-D matmul over the folded batch when the layout allows, else by a sum.
// Under autocast (autograd/autocast.h) float32 operands are multiplied as
// bfloat16: this op is where the switch is read.
#include "core/kernels/matmul.h"

#include "autograd/autocast.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/kernels/bf16.h"
#include "core/kernels/reduce.h"

// Shapes: op(A) [..., M, K], op(B) [..., K, N], C and G = dL/dC [..., M, N];
// A is stored [..., K, M] when trans_a, B is stored [..., N, K] when trans_b.

namespace ember {
namespace {

Tensor reduce_to(Tensor g, const Shape& shape) {
  return g.shape() == shape ? g : kernels::sum_to_shape(g, shape);
}

// dA = G op(B)^T, stored as A is: transposed when trans_a, i.e. op(B) G^T.
Tensor matmul_grad_a(const Tensor& g, const Tensor& b, bool ta, bool tb, const Shape& a_shape) {
  Tensor da = ta ? kernels::matmul(b, g, tb, true) : kernels::matmul(g, b, false, !tb);
  return reduce_to(std::move(da), a_shape);
}

// dB = op(A)^T G, stored as B is: transposed when trans_b, i.e. G^T op(A).
Tensor matmul_grad_b(const Tensor& g, const Tensor& a, bool ta, bool tb, const Shape& b_shape) {
  if (b_shape.size() == 2 && a.dim() > 2 && !ta && a.is_contiguous()) {
    // B was shared by every batch: fold the batch into M and do one matmul,
    // A [..., M, K] -> [(...) M, K], G [..., M, N] -> [(...) M, N].
    const Tensor a2 = a.reshape({-1, a.size(-1)});
    const Tensor g2 = g.reshape({-1, g.size(-1)});
    return tb ? kernels::matmul(g2, a2, true, false) : kernels::matmul(a2, g2, true, false);
  }
  Tensor db = tb ? kernels::matmul(g, a, true, ta) : kernels::matmul(a, g, !ta, false);
  return reduce_to(std::move(db), b_shape);
}

// The same products on bfloat16 copies of A, B (kept for backward instead of
// the float32 tensors) and G; float32 results, float32 accumulation.
Variable matmul_bf16(const Variable& a, const Variable& b, bool trans_a, bool trans_b,
                     std::function<void()> on_b_read) {
  const bool need_a = needs_grad(a), need_b = needs_grad(b);
  const Tensor a16 = autocast_to_bfloat16(a), b16 = autocast_to_bfloat16(b);
  return record("matmul_bf16", {a, b}, kernels::matmul(a16, b16, trans_a, trans_b),
                [need_a, need_b, trans_a, trans_b, a_shape = a.shape(), b_shape = b.shape(),
                 sa = need_b ? SavedTensor(a16) : SavedTensor(),
                 sb = need_a ? SavedTensor(b16) : SavedTensor(),
                 on_b_read = std::move(on_b_read)](const Tensor& g) -> Grads {
                  const Tensor g16 = kernels::to_bfloat16(g);
                  Grads out(2);
                  if (need_a) out[0] = matmul_grad_a(g16, sb.get(), trans_a, trans_b, a_shape);
                  if (on_b_read) on_b_read();
                  if (need_b) out[1] = matmul_grad_b(g16, sa.get(), trans_a, trans_b, b_shape);
                  return out;
                });
}

}  // namespace

// C = op(A) op(B):  dop(A) = G op(B)^T,  dop(B) = op(A)^T G
Variable matmul(const Variable& a, const Variable& b, bool trans_a, bool trans_b,
                std::function<void()> on_b_read) {
  EMBER_PROFILE_SCOPE(kMatmulFamily);
  if (autocast_dtype() == DType::BFloat16 && a.dtype() == DType::Float32 && b.dtype() == DType::Float32) {
    return matmul_bf16(a, b, trans_a, trans_b, std::move(on_b_read));
  }
  const bool need_a = needs_grad(a), need_b = needs_grad(b);
  return record("matmul", {a, b}, kernels::matmul(a.data(), b.data(), trans_a, trans_b),
                [need_a, need_b, trans_a, trans_b, a_shape = a.shape(), b_shape = b.shape(),
                 sa = need_b ? SavedTensor(a.data()) : SavedTensor(),
                 sb = need_a ? SavedTensor(b.data()) : SavedTensor(),
                 on_b_read = std::move(on_b_read)](const Tensor& g) -> Grads {
                  Grads out(2);
                  if (need_a) out[0] = matmul_grad_a(g, sb.get(), trans_a, trans_b, a_shape);
                  if (on_b_read) on_b_read();
                  if (need_b) out[1] = matmul_grad_b(g, sa.get(), trans_a, trans_b, b_shape);
                  return out;
                });
}

}  // namespace ember
