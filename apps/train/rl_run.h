// `ember rl`'s part of a run (docs/cli.md#rl-from-a-reward; math: docs/model.md#rl-from-a-reward):
// the prompts rendered and split into training and held-out ones, their order, the reward (the
// rule "match" or a reward model), the reference for LoRA's adapters-off or --full's copy of the
// base, the stop tokens, and --rollouts-out. setup_rl.cpp fills it; rl_step.cpp takes a step
// (rollouts, scores, the reference and old passes, advantages, --iterations updates);
// rl_rewards.cpp scores completions; rl_validation.cpp rates the held-out prompts' greedy
// completions.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "apps/train/run.h"
#include "data/epoch_shuffle.h"
#include "data/rl_prompts.h"
#include "nn/alignment/rl_loss.h"

namespace ember::apps {

// A prompt as the policy continues it.
struct RlItem {
  std::vector<int64_t> ids;
  std::optional<std::string> answer;
  data::RlPrompt source;  // for the reward model's rendering of prompt then completion
  int64_t index = 0;      // its place among the file's prompts (0-based)
};

struct RlState {
  std::vector<RlItem> train, held_out;
  std::optional<data::EpochShuffle> order;  // none with --sequential
  nn::RlOptions loss;
  std::vector<int64_t> stop_tokens;  // <|im_end|> and <|endoftext|>, those the tokenizer has
  // The reward model (--reward-model: eval mode) with its tokenizer; none for --reward match.
  std::unique_ptr<nn::Transformer> reward_model;
  std::optional<data::Tokenizer> reward_tokenizer;
  // --full: the starting model, frozen (a LoRA run's reference is its base with adapters off).
  std::unique_ptr<nn::Transformer> reference;
  std::string rollouts_out;  // --rollouts-out (rank 0 writes it)
};

// The training prompt read by prompt b of `step` on this rank: slot ((step W + r) B + b) of the
// prompts' order (data/epoch_shuffle.h; file order with --sequential).
int64_t rl_prompt_at(const TrainRun& run, int64_t step, int64_t b);

// setup_rl.cpp: the prompts (before --out is claimed: a bad line writes nothing), the reward's
// checks; after the model: the reward model, the reference, --rollouts-out trimmed to the step.
void open_rl_prompts(TrainRun& run);
void prepare_rl(TrainRun& run);
// "rl" of the config (docs/formats.md#fine-tune-checkpoints): the algorithm and its options.
nlohmann::json rl_config(const TrainOptions& o);
// build_finetune_model: a new PPO run's value head (the reward model's score head, else drawn).
std::shared_ptr<nn::ValueHead> new_value_head(const TrainRun& run);

// rl_step.cpp: one step; `update` takes one optimizer update on the gradients (clip, check,
// AdamW), --iterations times. Fills s (lr is set by the caller) and run.tokens_per_step.
void rl_step(TrainRun& run, StepResult& s, const std::function<void(StepResult&)>& update);

// rl_rewards.cpp: the score of each completion (tokens, the stop token last when it stopped) of
// prompt `item`: 1 or 0 under --reward match, else the reward model's.
std::vector<double> rl_rewards(const TrainRun& run, const std::vector<const RlItem*>& items,
                               const std::vector<std::vector<int64_t>>& completions);
// The completion's text without its stop token.
std::string completion_text(const TrainRun& run, const std::vector<int64_t>& completion);

// rl_validation.cpp: the held-out prompts' greedy completions (rank 0): val_reward (their mean
// reward) and val_exact (the share whose text, trimmed, is the answer; prompts with an answer).
std::vector<std::pair<std::string, double>> rl_validation(TrainRun& run);

}  // namespace ember::apps
