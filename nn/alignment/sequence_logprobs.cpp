// sequence_logprobs: logits [B, T, V] viewed as [B T, V], token_logprobs weighted by the scored
// mask, then summed over T; the counts are the mask's row sums.
#include "nn/alignment/sequence_logprobs.h"

#include <vector>

#include "autograd/ops.h"

namespace ember::nn {

SequenceLogprobs sequence_logprobs(const Variable& logits, const Tensor& targets,
                                   const Tensor& scored) {
  EMBER_CHECK(logits.dim() == 3, "sequence_logprobs: logits must be [B, T, V], got ",
              shape_str(logits.shape()));
  const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
  EMBER_CHECK(targets.shape() == Shape({B, T}) && scored.shape() == Shape({B, T}),
              "sequence_logprobs: targets ", shape_str(targets.shape()), " and scored mask ",
              shape_str(scored.shape()), " must both be [B, T] = ", shape_str(Shape({B, T})),
              " for logits ", shape_str(logits.shape()));
  const Tensor w = scored.to(DType::Float64).contiguous();
  const double* wp = w.data<double>();
  std::vector<double> n(B, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const double v = wp[b * T + t];
      EMBER_CHECK(v == 0 || v == 1, "sequence_logprobs: the scored mask holds ", v, " at [", b,
                  ", ", t, "]; expected 0 or 1");
      n[b] += v;
    }
  }
  const Variable lp =
      token_logprobs(reshape(logits, {B * T, V}), targets.reshape({B * T}), w.reshape({B * T}));
  SequenceLogprobs out;
  out.logp = sum(reshape(lp, {B, T}), {1});
  out.n = Tensor::from_vector<double>(n, {B}).to(logits.dtype());
  return out;
}

}  // namespace ember::nn
