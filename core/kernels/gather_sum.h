// Weighted gather-sum: the combine step of a mixture of experts, where row
// slots[n, s] of src is token n's output from its s-th chosen expert and
//   out[n] = sum_s weights[n, s] src[slots[n, s]].
// Every src row belongs to at most one (n, s), so the gradients are gathers and
// scatters without collisions, parallel over tokens and independent of the
// thread count:
//   d_src[slots[n, s]] = weights[n, s] g[n]   (zero on rows no slot names)
//   d_weights[n, s]    = g[n] . src[slots[n, s]]
// Shapes: src [R, C], slots int64 (or int32) [N, S], weights [N, S], out and g [N, C].
#pragma once
#include "core/tensor.h"

namespace ember::kernels {

Tensor gather_weighted_sum(const Tensor& src, const Tensor& slots, const Tensor& weights);

struct GatherSumGrads {
  Tensor src, weights;  // undefined when not asked for
};
GatherSumGrads gather_weighted_sum_backward(const Tensor& g, const Tensor& src, const Tensor& slots,
                                            const Tensor& weights, bool need_src,
                                            bool need_weights);

}  // namespace ember::kernels
