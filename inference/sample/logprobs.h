// Log-probabilities for the engine's logprobs and prompt_logprobs:
// log p_t = x_t / T - (max x / T + log sum_j exp((x_j - max x) / T)) over one row of logits x,
// in double, at temperature T (1: the raw logits); the top n alternatives most likely first,
// ties by lower id.
#pragma once
#include <cstdint>

#include "inference/engine/engine.h"

namespace ember::inference {

TokenLogprob token_logprob(const float* logits, int64_t vocab, int64_t token, int64_t top_n,
                           double temperature = 1);

}  // namespace ember::inference
