// A reward model's scores of rendered sides (docs/model.md#reward-model): each side's ids, cut to the
// model's max_seq_len T + 1, read at its last input position min(L, T) - 1 by Transformer::scores,
// in batches of padded sides, without a graph. Shared by `ember reward --score`
// (apps/evaluate/reward_scores.h) and `ember rl --reward-model` (apps/train/rl_rewards.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "nn/transformer.h"

namespace ember::apps {

// The score of each side (ids, at most T + 1 of them, T = model.config().max_seq_len; at least
// one), batch_size sides per forward, each row padded after its first min(L, T) ids.
std::vector<float> score_sides(const nn::Transformer& model,
                               const std::vector<std::vector<uint32_t>>& sides, int64_t batch_size);

}  // namespace ember::apps
