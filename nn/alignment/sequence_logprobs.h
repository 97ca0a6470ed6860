// The log-probability of a side of a preference pair (docs/model.md#log-probabilities-of-a-side):
// per row, the sum over its scored positions of log softmax(logits)[next token], and their
// number, built on the fused token_logprobs (autograd/ops.h): one pass over [B T, V], no
// [B, T, V] log-softmax and no loop per token in Variables. Every pair loss reads these sums.
#pragma once
#include "autograd/variable.h"
#include "core/tensor.h"

namespace ember::nn {

struct SequenceLogprobs {
  Variable logp;  // [B]: sum over scored t of log softmax(logits[b, t])[targets[b, t]]
  Tensor n;       // [B], the logits' dtype: the number of scored positions of each row
};

// logits [B, T, V] (float32 or float64; position t predicts targets[b, t], the id at t + 1),
// targets [B, T] (int), scored [B, T] (0 or 1, any dtype: 1 where targets[b, t] is a scored
// completion token). Unscored targets are not read (padding may hold any id).
SequenceLogprobs sequence_logprobs(const Variable& logits, const Tensor& targets,
                                   const Tensor& scored);

}  // namespace ember::nn
