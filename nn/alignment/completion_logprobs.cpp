// completion_logprobs: logits scaled by 1 / tau (no copy at tau = 1), viewed as [B T, V], through
// token_logprobs weighted by the scored mask, back to [B, T].
#include "nn/alignment/completion_logprobs.h"

#include <cmath>
#include <string>

#include "autograd/ops.h"
#include "nn/alignment/token_values.h"

namespace ember::nn {

Variable completion_logprobs(const Variable& logits, const Tensor& targets, const Tensor& scored,
                             double temperature) {
  EMBER_CHECK(std::isfinite(temperature) && temperature > 0,
              "completion_logprobs: the temperature must be > 0, got ", temperature);
  EMBER_CHECK(logits.defined() && logits.dim() == 3,
              "completion_logprobs: logits must be [B, T, V], got ",
              logits.defined() ? shape_str(logits.shape()) : std::string("none"));
  const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
  EMBER_CHECK(targets.shape() == Shape({B, T}) && scored.shape() == Shape({B, T}),
              "completion_logprobs: targets ", shape_str(targets.shape()), " and scored mask ",
              shape_str(scored.shape()), " must both be [B, T] = ", shape_str(Shape({B, T})),
              " for logits ", shape_str(logits.shape()));
  const Tensor w = Tensor::from_vector<double>(token_mask("completion_logprobs", scored, {B, T}));
  const Variable flat = reshape(logits, {B * T, V});
  const Variable scaled = temperature == 1 ? flat : flat * (1.0 / temperature);
  return reshape(token_logprobs(scaled, targets.reshape({B * T}), w), {B, T});
}

}  // namespace ember::nn
