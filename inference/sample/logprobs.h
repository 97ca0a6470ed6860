// Log-probabilities for the engine's logprobs and prompt_logprobs:
// log p_t = x_t - max x - log sum_j exp(x_j - max x) over one row of raw logits,
// in double; the top n alternatives most likely first, ties by lower id.
#pragma once
#include <cstdint>

#include "inference/engine/engine.h"

namespace ember::inference {

TokenLogprob token_logprob(const float* logits, int64_t vocab, int64_t token, int64_t top_n);

}  // namespace ember::inference
