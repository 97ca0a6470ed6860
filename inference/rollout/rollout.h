// Rollouts for RL from a reward (docs/architecture.md#rollouts-for-rl): G sampled completions
// of each prompt from the policy as it is now, decoded as one continuous batch by the serving
// engine (inference/engine/engine.h), the G completions of a prompt sharing its prompt's KV
// blocks (prefilled once), each with the log-probabilities of its tokens under
// logits / temperature (logp_old) and a seed of its own, so that it never depends on the batch.
#pragma once
#include <cstdint>
#include <vector>

#include "nn/transformer.h"

namespace ember::inference {

struct RolloutOptions {
  int64_t group_size = 2;         // G >= 2 completions per prompt
  double temperature = 1.0;       // > 0: tokens drawn from softmax(logits / temperature)
  int64_t max_tokens = 64;        // new tokens per completion at most (stop token included)
  std::vector<int64_t> stop_tokens;  // drawing one ends a completion; it is part of it
  uint64_t seed = 0;
  int64_t prompt_offset = 0;  // the index of prompts[0] in the seeds (a rank's first prompt)
  int64_t max_seqs = 0;       // completions decoded at once; 0: every one of the call
  int64_t max_batch_tokens = 512;  // tokens one engine step computes at most
  // Only ids below it are drawn (0: every id of the logits): the tokenizer's vocabulary, when a
  // model's rows outnumber it (SamplingOptions::vocab_limit).
  int64_t vocab_limit = 0;
};

struct Completion {
  std::vector<int64_t> tokens;   // the sampled ids, the stop token last when it stopped
  std::vector<double> logprobs;  // per token: log softmax(logits / temperature) of the drawn id
  bool stopped = false;          // ended at a stop token; else it reached max_tokens
};

// What the engine computed: prompt tokens over all G * prompts requests, how many of them were
// shared (a sibling's blocks or the prefix cache: cached) and run through the model (prefilled).
struct RolloutStats {
  int64_t prompt_tokens = 0, cached_prompt_tokens = 0, prefilled_tokens = 0;
  int64_t generated_tokens = 0, steps = 0;
};

struct Rollout {
  std::vector<std::vector<Completion>> groups;  // [prompt][completion], G each
  RolloutStats stats;
};

// The seed of completion g of prompt p (p counted from prompt_offset):
// mix(mix(mix(seed) + p) + g), mix being splitmix64's finaliser. Completion (p, g) draws token i
// with Philox counter (that seed, i) (inference/sample/sampler.h), whatever else runs.
uint64_t completion_seed(uint64_t seed, int64_t prompt, int64_t completion);

// Throws an Error naming the first bad input: G < 2, temperature <= 0 or not finite,
// max_tokens < 1, no prompts, an empty prompt, a token outside the vocabulary, or a prompt
// whose tokens and max_tokens exceed max_seq_len (prompt + completion must fit the context
// for the training forward that recomputes their log-probabilities).
void check_rollout(const nn::ModelConfig& cfg, const std::vector<std::vector<int64_t>>& prompts,
                   const RolloutOptions& opt);

// Samples opt.group_size completions of every prompt with the policy's current weights (read in
// place: inference/model_runner/paged_forward.h's InferenceModel shares the plain weights and
// merges LoRA adapters, dequantizes NF4). The first completion of a prompt prefills it; the
// others are submitted once that prefill is done and share its KV blocks
// (EngineRequest::share_prompt_with), each computing the prompt's last token only. Runs under
// no-grad; the model is not modified.
Rollout rollout(const nn::Transformer& policy, const std::vector<std::vector<int64_t>>& prompts,
                const RolloutOptions& opt);

}  // namespace ember::inference

namespace ember::inference {

// The greedy completion (argmax at every position below vocab_limit (0: every id), ties: the
// lower id) of each prompt, at most
// max_tokens tokens, ending at a stop token (kept, last) — one continuous batch through the
// engine, so each completion is what it would be alone. An Error for a prompt check_rollout
// refuses (its G and temperature aside). Runs under no-grad.
std::vector<Completion> greedy_completions(const nn::Transformer& policy,
                                           const std::vector<std::vector<int64_t>>& prompts,
                                           int64_t max_tokens, const std::vector<int64_t>& stop_tokens,
                                           int64_t vocab_limit = 0);

}  // namespace ember::inference
