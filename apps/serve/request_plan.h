// From a parsed request to what the engine runs: the prompt's tokens (text
// encoded with the checkpoint's tokenizer, or ChatML for chat as
// docs/formats.md#chat-data-jsonl), max_tokens (its default, the cap, the context check: nothing is
// clamped), sampling options, the stop tokens (completions <|endoftext|>; chat
// <|im_end|>, <|im_start|> and <|endoftext|>) and logprobs. Errors are ApiError 400.
#pragma once
#include <cstdint>
#include <string>

#include "apps/serve/request_parse.h"
#include "data/tokenizer/tokenizer.h"
#include "inference/engine/engine.h"

namespace ember::apps::serve {

inline constexpr int64_t kDefaultCompletionTokens = 16;  // OpenAI's default for /v1/completions

// What the server knows about the model it serves.
struct ServedModel {
  std::string name;
  int64_t created = 0;  // Unix time the server started ("created" of /v1/models)
  const data::Tokenizer* tokenizer = nullptr;
  int64_t max_seq_len = 0, vocab_size = 0;
  int64_t max_tokens_cap = 0;  // a request's max_tokens at most; 0: the context length
  int64_t kv_tokens = 0;       // the KV cache's size in tokens (defaults fit in it); 0: unbounded
  std::string weights = "float32";  // the inference weights' type (--weights)
};

struct PlannedRequest {
  inference::EngineRequest engine;
  int64_t prompt_tokens = 0;
  std::string echo_text;  // the prompt's text, when echo
};

// random_seed is used when the request gives no seed.
PlannedRequest plan_request(const ApiRequest& r, const ServedModel& m, uint64_t random_seed);

// The prompt's tokens alone (ChatML for chat).
std::vector<int64_t> prompt_tokens(const ApiRequest& r, const ServedModel& m);

}  // namespace ember::apps::serve
