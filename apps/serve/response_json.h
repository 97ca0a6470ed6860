// The JSON bodies of the OpenAI API (docs/cli.md#serving), keys in OpenAI's
// order: whole completions and chat completions, their streamed chunks, the
// usage chunk, logprobs in the legacy completions shape ({tokens,
// token_logprobs, top_logprobs, text_offset}) and the chat shape ({content:
// [{token, logprob, bytes, top_logprobs}]}), and the model list.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "apps/serve/output_assembler.h"
#include "apps/serve/request_parse.h"

namespace ember::apps::serve {

using ojson = nlohmann::ordered_json;

struct ResponseMeta {
  Endpoint endpoint = Endpoint::Completions;
  std::string id;  // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;
  std::string model;
};

// "cmpl-" or "chatcmpl-" and 24 hex digits of n.
std::string response_id(Endpoint endpoint, uint64_t n);

ojson usage_json(int64_t prompt_tokens, int64_t completion_tokens);
ojson completion_logprobs_json(const std::vector<LogprobEntry>& entries);
ojson chat_logprobs_json(const std::vector<LogprobEntry>& entries);
// The endpoint's logprobs shape, or null when logprobs were not asked for.
ojson logprobs_json(Endpoint endpoint, bool wanted, const std::vector<LogprobEntry>& entries);

// A whole response: "text_completion" with choices[0].text, or "chat.completion"
// with choices[0].message {role "assistant", content}.
ojson response_json(const ResponseMeta& m, const std::string& text,
                    const std::string& finish_reason, const ojson& logprobs, const ojson& usage);

// A streamed chunk ("text_completion" / "chat.completion.chunk"). Chat: role_chunk
// gives the delta {role: "assistant", content: ""}; a chunk with finish_reason has an
// empty delta unless text is not empty. with_usage adds "usage": null (include_usage).
ojson chunk_json(const ResponseMeta& m, const std::string& text, const ojson& logprobs,
                 const std::optional<std::string>& finish_reason, bool role_chunk, bool with_usage);
// The last chunk when include_usage: empty choices and the usage.
ojson usage_chunk_json(const ResponseMeta& m, const ojson& usage);

// weights: the inference weights' type (--weights), an ember field past OpenAI's.
ojson model_json(const std::string& name, int64_t created, const std::string& weights = "float32");
ojson model_list_json(const std::string& name, int64_t created, const std::string& weights = "float32");

}  // namespace ember::apps::serve
