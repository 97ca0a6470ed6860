// Causal scaled dot-product attention with GQA/MQA head sharing, sliding
// window and score soft-capping: the flash kernels of core/kernels/attention/attention.h
// (tiled, online softmax; backward recomputes P from the saved row logsumexp),
// so memory is linear in the sequence length.
// Shapes: q, out [B, T, Hq, D]; k, v [B, S, Hkv, D]; lse [B, Hq, T].
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/kernels/attention/attention.h"

namespace ember {
namespace {

// The kernels read any [B, N, H, D] view whose D axis is contiguous (e.g. a
// slice of the KV cache) without copying it.
Tensor with_contiguous_rows(const Tensor& t) {
  return t.stride(3) == 1 ? t : t.contiguous();
}

}  // namespace

Variable attention(const Variable& q, const Variable& k, const Variable& v, double scale,
                   int64_t window, double softcap) {
  EMBER_PROFILE_SCOPE(kAttentionFamily);
  EMBER_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "attention: q, k, v must be [B, T, H, D], got ", shape_str(q.shape()), ", ",
              shape_str(k.shape()), ", ", shape_str(v.shape()));
  EMBER_CHECK(k.shape() == v.shape(), "attention: k ", shape_str(k.shape()), " and v ",
              shape_str(v.shape()), " differ");
  EMBER_CHECK(k.size(0) == q.size(0) && k.size(3) == q.size(3) && k.size(2) > 0 &&
                  q.size(2) % k.size(2) == 0 && k.size(1) >= q.size(1),
              "attention: q ", shape_str(q.shape()), " does not fit k/v ", shape_str(k.shape()),
              " (same B and D, kv heads dividing query heads, at least as many keys as queries)");
  EMBER_CHECK(q.dtype() == k.dtype() && k.dtype() == v.dtype(), "attention: q, k, v dtypes differ");
  EMBER_CHECK(window >= 0 && softcap >= 0, "attention: window and softcap must be >= 0");
  const Tensor qc = with_contiguous_rows(q.data()), kc = with_contiguous_rows(k.data()),
               vc = with_contiguous_rows(v.data());
  const kernels::AttentionParams p{scale, window, softcap};
  kernels::AttentionResult r = kernels::attention_forward(qc, kc, vc, p);
  return record("attention", {q, k, v}, r.out,
                [qs = SavedTensor(qc), ks = SavedTensor(kc), vs = SavedTensor(vc),
                 os = SavedTensor(r.out), ls = SavedTensor(r.lse), p](const Tensor& g) -> Grads {
                  kernels::AttentionGrads d = kernels::attention_backward(
                      qs.get(), ks.get(), vs.get(), os.get(), ls.get(), with_contiguous_rows(g), p);
                  return {d.dq, d.dk, d.dv};
                });
}

}  // namespace ember
