// The generation loop on nn::Engine: one request, synchronous steps, its tokens
// streamed as they come, the prefill (to the first token) and the decode steps
// timed separately.
#include "inference/generate.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "inference/engine/engine.h"

namespace ember::inference {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

void check_fresh_prompt(const nn::ModelConfig& cfg, const std::vector<int64_t>& prompt) {
  const int64_t P = static_cast<int64_t>(prompt.size()), L = cfg.max_seq_len;
  EMBER_CHECK(
      P > 0,
      "generate: the prompt is empty; start it with at least one token (e.g. <|endoftext|>)");
  EMBER_CHECK(P <= L, "generate: the prompt has ", P,
              " tokens, more than the model's max_seq_len of ", L, "; shorten it");
  for (const int64_t t : prompt) {
    EMBER_CHECK(t >= 0 && t < cfg.vocab_size, "generate: prompt token ", t,
                " is outside the model's vocab of ", cfg.vocab_size);
  }
}

std::string describe(StopReason reason, int64_t max_seq_len) {
  switch (reason) {
    case StopReason::MaxTokens:
      return "reached the maximum number of new tokens";
    case StopReason::StopToken:
      return "reached the end-of-text token";
    case StopReason::MaxSeqLen:
      return "reached max_seq_len (" + std::to_string(max_seq_len) +
             " tokens of context): the model cannot see further";
    case StopReason::Callback:
      return "stopped by the caller";
  }
  return "unknown stop reason";
}

// One request on the serving engine (synchronous steps), so `ember generate` draws what
// `ember serve` does.
GenerationResult generate(const nn::Transformer& model, const std::vector<int64_t>& prompt,
                          const SamplingOptions& opt, const TokenCallback& on_token,
                          DType kv_dtype, kernels::WeightType weights) {
  check_fresh_prompt(model.config(), prompt);
  check_sampling_options(opt);
  return generate(std::make_shared<const InferenceModel>(model, weights), prompt, opt, on_token, kv_dtype);
}

GenerationResult generate(std::shared_ptr<const InferenceModel> model, const std::vector<int64_t>& prompt,
                          const SamplingOptions& opt, const TokenCallback& on_token,
                          DType kv_dtype) {
  const nn::ModelConfig& cfg = model->config();
  const int64_t P = static_cast<int64_t>(prompt.size()), L = cfg.max_seq_len;
  check_fresh_prompt(cfg, prompt);
  check_sampling_options(opt);
  GenerationResult r;
  r.prompt_tokens = P;
  if (opt.max_tokens == 0) return r;
  EngineOptions eo;
  eo.max_seqs = 1;
  eo.kv_blocks = (L + kKVBlockSize - 1) / kKVBlockSize;
  eo.max_batch_tokens = P;  // the whole prompt in one step
  eo.max_queue = 1;
  eo.prefix_cache = false;
  eo.kv_dtype = kv_dtype;
  Engine engine(std::move(model), eo);
  EngineRequest req;
  req.prompt = prompt;
  req.sampling = opt;
  req.sampling.max_tokens = std::min(opt.max_tokens, L + 1 - P);  // the context's limit
  const std::shared_ptr<RequestHandle> handle = engine.submit(std::move(req));
  bool first_seen = false;
  for (;;) {
    const Clock::time_point t0 = Clock::now();
    EMBER_CHECK(engine.step(), "generate: the engine stopped before the request finished");
    std::optional<EngineEvent> ev = handle->next(std::chrono::milliseconds(0));
    if (!first_seen) {
      r.prefill_seconds += seconds_since(t0);
    } else {
      r.decode_seconds += seconds_since(t0);
      ++r.decode_steps;
    }
    if (!ev) continue;
    first_seen = true;
    for (const int64_t t : ev->tokens) {
      r.tokens.push_back(t);
      if (on_token && !on_token(t)) {
        r.stop_reason = StopReason::Callback;
        return r;  // the engine goes away with the request
      }
    }
    if (!ev->finished) continue;
    const bool all = static_cast<int64_t>(r.tokens.size()) >= opt.max_tokens;
    r.stop_reason = ev->reason == FinishReason::Stop ? StopReason::StopToken
                    : all                            ? StopReason::MaxTokens
                                                     : StopReason::MaxSeqLen;
    return r;
  }
}

}  // namespace ember::inference
