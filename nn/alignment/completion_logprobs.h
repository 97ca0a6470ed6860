// Per-token log-probabilities of completion tokens at a sampling temperature
// (docs/model.md#log-probabilities-at-a-temperature): log softmax(logits / tau)[target] at each
// scored position, kept per token (RL's ratios and k3 are per token), built on the fused
// token_logprobs (autograd/ops.h): no [B, T, V] log-softmax.
#pragma once
#include "autograd/variable.h"
#include "core/tensor.h"

namespace ember::nn {

// logits [B, T, V] (float32 or float64; position t predicts targets[b, t]), targets [B, T]
// (int), scored [B, T] (0 or 1, any dtype: 1 where targets[b, t] is a completion token),
// temperature tau > 0 -> [B, T] in the logits' dtype, differentiable:
//   out[b, t] = scored[b, t] log softmax(logits[b, t] / tau)[targets[b, t]]
// 0 at unscored positions, whose targets are not read (padding may hold any id).
Variable completion_logprobs(const Variable& logits, const Tensor& targets, const Tensor& scored,
                             double temperature);

}  // namespace ember::nn
