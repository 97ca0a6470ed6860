// The body of POST /v1/completions and /v1/chat/completions parsed and checked
// field by field (docs/cli.md#serving): an unknown field, a wrong type or a value
// out of range is an ApiError 400 naming the field. Nothing here needs the model:
// request_plan.h turns the result into tokens and an engine request.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat.h"

namespace ember::apps::serve {

enum class Endpoint { Completions, Chat };

// Caps the server puts on every request (docs/cli.md#serving states them).
inline constexpr size_t kMaxStopStrings = 4;
inline constexpr size_t kMaxStopBytes = 256;
inline constexpr int64_t kMaxLogprobs = 5;

struct ApiRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::optional<std::string> model;  // absent or null: the served model
  // completions: the prompt as text, or as token ids (prompt_ids set)
  std::string prompt;
  std::optional<std::vector<int64_t>> prompt_ids;
  bool echo = false;
  // chat
  std::vector<data::ChatMessage> messages;
  // both
  std::optional<int64_t> max_tokens;  // absent: request_plan.h's default
  double temperature = 1.0, top_p = 1.0;
  int64_t top_k = 0;            // 0 or -1: off
  std::optional<int64_t> seed;  // absent: a random one
  std::vector<std::string> stop;
  bool stream = false, include_usage = false;
  // -1: none; else each token's logprob and this many alternatives (completions: logprobs N;
  // chat: logprobs true and top_logprobs N)
  int64_t logprobs = -1;
};

// Throws ApiError 400 for anything docs/cli.md#serving refuses.
ApiRequest parse_request(std::string_view body, Endpoint endpoint);

}  // namespace ember::apps::serve
