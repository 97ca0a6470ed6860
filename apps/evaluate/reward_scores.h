// Scores of a reward model (`ember reward --score`, docs/cli.md#scoring-with-a-reward-model):
// every line of a file to score (data::parse_scored_line: a pair, or a prompt with one
// completion) rendered into its sides as `ember reward` renders a pair's, each cut to the model's
// max_seq_len T + 1 ids and scored as training scores it: Transformer::scores at the side's last
// input position min(L, T) - 1, in eval mode, without a graph, in batches of padded sides.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer/tokenizer.h"
#include "apps/common/side_scores.h"
#include "nn/transformer.h"

namespace ember::apps {

// One scored line: a pair's chosen and rejected scores, or a completion's reward (in chosen).
struct RewardLineScore {
  int64_t line = 0;  // 1-based, as the errors count
  bool pair = false;
  float chosen = 0, rejected = 0;
};
// Every non-blank line of `path` parsed and rendered (an Error naming the file, the line and the
// field at fault, before anything is scored), then scored.
std::vector<RewardLineScore> score_reward_file(const nn::Transformer& model,
                                               const data::Tokenizer& tokenizer,
                                               const std::string& path, int64_t batch_size);
// {"line": i, "chosen": r_c, "rejected": r_r} or {"line": i, "reward": r} (floats printed exactly).
std::string reward_score_json(const RewardLineScore& s);

struct RewardScoreOptions {
  std::string checkpoint, data, base;  // base: a fine-tune checkpoint's moved base (--base)
  int64_t batch_size = 8;
};
// The command: the reward checkpoint (load_reward_model: LoRA or full), then one JSON line per
// scored line on stdout. Returns 0.
int run_reward_score(const RewardScoreOptions& o);

}  // namespace ember::apps
