// Autoregressive generation on the serving engine (inference/engine/engine.h, its paged KV
// cache): one batched prefill of the prompt, then one token per step, each
// drawn by a TokenSampler and handed to a callback as soon as it exists (for
// streaming). Stops at the stop token, at max_tokens, when the context reaches
// max_seq_len, or when the callback says so. Works in token ids only (the
// tokenizer is the caller's).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <memory>

#include "core/kernels/packed_weights.h"
#include "inference/sample/sampler.h"
#include "nn/transformer.h"

namespace ember::inference {

enum class StopReason {
  MaxTokens,  // max_tokens were generated
  StopToken,  // the stop token was drawn (it is not part of the output)
  MaxSeqLen,  // the context is full: prompt + generated tokens reached max_seq_len
  Callback,   // the callback returned false
};

// One line for users, e.g. "reached max_seq_len (1024 tokens of context)".
std::string describe(StopReason reason, int64_t max_seq_len);

struct GenerationResult {
  std::vector<int64_t> tokens;  // generated ids: no prompt, no stop token
  StopReason stop_reason = StopReason::MaxTokens;
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;  // forward over the prompt and the first draw (time to first token)
  int64_t decode_steps = 0;    // one-token forward passes after the prefill
  double decode_seconds = 0;   // those passes and the draws from their logits
  double prefill_tokens_per_second() const {
    return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0;
  }
  double decode_tokens_per_second() const {
    return decode_seconds > 0 ? static_cast<double>(decode_steps) / decode_seconds : 0;
  }
};

// Called with each generated token as soon as it is drawn (never the stop
// token); returning false ends generation (StopReason::Callback).
using TokenCallback = std::function<bool(int64_t token)>;

// Throws Error unless `prompt` can start a fresh generation: at least one token, ids in the
// vocab, no more than max_seq_len tokens (what generate below checks first).
void check_fresh_prompt(const nn::ModelConfig& cfg, const std::vector<int64_t>& prompt);

// Generates after `prompt` (at least one token; a prompt that does not fit in
// max_seq_len is an Error) as one request of a fresh engine, whose paged cache holds
// kv_dtype (Float32 or BFloat16). The engine runs the model's Linear weights in `weights`
// (inference/model_runner/paged_forward.h: InferenceModel), whatever the model's dtype.
GenerationResult generate(const nn::Transformer& model, const std::vector<int64_t>& prompt,
                          const SamplingOptions& opt, const TokenCallback& on_token = {},
                          DType kv_dtype = DType::Float32,
                          kernels::WeightType weights = kernels::WeightType::Float32);

class InferenceModel;
// The same on an InferenceModel already built (its weights converted once, reused across calls).
GenerationResult generate(std::shared_ptr<const InferenceModel> model, const std::vector<int64_t>& prompt,
                          const SamplingOptions& opt, const TokenCallback& on_token = {},
                          DType kv_dtype = DType::Float32);

}  // namespace ember::inference
