// Causal scaled dot-product attention kernels, FlashAttention-2 style: tiles of
// query rows x key columns, S = Q K^T per tile by a register-blocked SIMD
// kernel, online softmax keeping only the row max / logsumexp, and a backward
// that recomputes P per tile from the saved logsumexp. Memory is linear in the
// sequence length: no [T, S] buffer exists, only tile-sized scratch per thread.
//
// Shapes: q [B, T, Hq, D]; k, v [B, S, Hkv, D] (S >= T, Hkv divides Hq; query
// head j reads kv head j / (Hq / Hkv)); out [B, T, Hq, D]; lse [B, Hq, T].
// Query t sits at position p = S - T + t and sees key s when s <= p and
// (window == 0 or p - s < window). Scores s = scale q.k, with softcap c > 0
// replaced by c tanh(s / c) before the mask. q, k, v, dout may be strided
// views as long as the D axis is contiguous (stride 1).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace ember::kernels {

struct AttentionParams {
  double scale = 1;
  int64_t window = 0;
  double softcap = 0;
};

struct AttentionResult {
  Tensor out;  // [B, T, Hq, D], contiguous
  Tensor lse;  // [B, Hq, T], logsumexp of each query row's visible scores
};

struct AttentionGrads {
  Tensor dq, dk, dv;  // contiguous, shaped like q, k, v
};

// Forward: P = softmax over visible keys of the scores, out = P v.
AttentionResult attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const AttentionParams& p);

// Backward, with P recomputed from lse and delta_t = dO_t . O_t:
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - delta) (* (1 - tanh^2) with softcap),
//   dQ = scale dS K,  dK = scale dS^T Q.
AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& dout,
                                  const AttentionParams& p);

}  // namespace ember::kernels
