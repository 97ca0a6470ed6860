// Textbook causal attention, forward and backward, in straight loops with the
// whole [T, S] score matrix of a head materialised: the kernel to read first,
// and the reference the flash kernels (core/kernels/attention/attention.h) are tested
// against. Same contract, shapes and conventions as those (GQA head mapping,
// causal mask with the query offset S - T, sliding window, softcap); the math
// is stated once in reference.cpp. float and double; memory O(T S) per head.
#pragma once
#include "core/kernels/attention/attention.h"

namespace ember::kernels {

// out [B, T, Hq, D] and lse [B, Hq, T] of q [B, T, Hq, D], k, v [B, S, Hkv, D].
AttentionResult attention_reference_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const AttentionParams& p);

// dq, dk, dv for the upstream gradient dout [B, T, Hq, D]; recomputes P and O
// from q, k, v (it needs nothing saved).
AttentionGrads attention_reference_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const Tensor& dout, const AttentionParams& p);

}  // namespace ember::kernels
