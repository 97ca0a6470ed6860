// OpenAI response bodies (apps/serve/response_json.h).
#include "apps/serve/response_json.h"

#include <cstdio>

namespace ember::apps::serve {
namespace {

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::Completions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

ojson head(const ResponseMeta& m, bool chunk) {
  ojson j;
  j["id"] = m.id;
  j["object"] = object_name(m.endpoint, chunk);
  j["created"] = m.created;
  j["model"] = m.model;
  return j;
}

ojson bytes_json(const std::string& s) {
  ojson b = ojson::array();
  for (char c : s) b.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return b;
}

ojson chat_token(const std::string& token, double logprob) {
  ojson t;
  t["token"] = token;
  t["logprob"] = logprob;
  t["bytes"] = bytes_json(token);
  return t;
}

}  // namespace

std::string response_id(Endpoint endpoint, uint64_t n) {
  char hex[32];
  std::snprintf(hex, sizeof hex, "%024llx", static_cast<unsigned long long>(n));
  return std::string(endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + hex;
}

ojson usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  ojson u;
  u["prompt_tokens"] = prompt_tokens;
  u["completion_tokens"] = completion_tokens;
  u["total_tokens"] = prompt_tokens + completion_tokens;
  return u;
}

ojson completion_logprobs_json(const std::vector<LogprobEntry>& entries) {
  ojson tokens = ojson::array(), logprobs = ojson::array(), tops = ojson::array(),
        offsets = ojson::array();
  for (const LogprobEntry& e : entries) {
    tokens.push_back(e.token);
    logprobs.push_back(e.logprob ? ojson(*e.logprob) : ojson());
    if (!e.logprob) {
      tops.push_back(nullptr);  // the prompt's first token: nothing was predicted
    } else {
      ojson top = ojson::object();
      for (const auto& [text, lp] : e.top) {
        if (!top.contains(text)) top[text] = lp;  // two ids with the same text: the likelier one
      }
      tops.push_back(std::move(top));
    }
    offsets.push_back(e.text_offset);
  }
  ojson j;
  j["tokens"] = std::move(tokens);
  j["token_logprobs"] = std::move(logprobs);
  j["top_logprobs"] = std::move(tops);
  j["text_offset"] = std::move(offsets);
  return j;
}

ojson chat_logprobs_json(const std::vector<LogprobEntry>& entries) {
  ojson content = ojson::array();
  for (const LogprobEntry& e : entries) {
    ojson t = chat_token(e.token, e.logprob.value_or(0.0));
    ojson top = ojson::array();
    for (const auto& [text, lp] : e.top) top.push_back(chat_token(text, lp));
    t["top_logprobs"] = std::move(top);
    content.push_back(std::move(t));
  }
  ojson j;
  j["content"] = std::move(content);
  return j;
}

ojson logprobs_json(Endpoint endpoint, bool wanted, const std::vector<LogprobEntry>& entries) {
  if (!wanted) return nullptr;
  return endpoint == Endpoint::Chat ? chat_logprobs_json(entries)
                                    : completion_logprobs_json(entries);
}

ojson response_json(const ResponseMeta& m, const std::string& text,
                    const std::string& finish_reason, const ojson& logprobs, const ojson& usage) {
  ojson j = head(m, false);
  ojson choice;
  choice["index"] = 0;
  if (m.endpoint == Endpoint::Chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_reason;
  j["choices"] = ojson::array({std::move(choice)});
  j["usage"] = usage;
  return j;
}

ojson chunk_json(const ResponseMeta& m, const std::string& text, const ojson& logprobs,
                 const std::optional<std::string>& finish_reason, bool role_chunk,
                 bool with_usage) {
  ojson j = head(m, true);
  ojson choice;
  choice["index"] = 0;
  if (m.endpoint == Endpoint::Chat) {
    ojson delta = ojson::object();
    if (role_chunk) {
      delta["role"] = "assistant";
      delta["content"] = text;
    } else if (!text.empty() || !finish_reason) {
      delta["content"] = text;
    }
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_reason ? ojson(*finish_reason) : ojson();
  j["choices"] = ojson::array({std::move(choice)});
  if (with_usage) j["usage"] = nullptr;
  return j;
}

ojson usage_chunk_json(const ResponseMeta& m, const ojson& usage) {
  ojson j = head(m, true);
  j["choices"] = ojson::array();
  j["usage"] = usage;
  return j;
}

ojson model_json(const std::string& name, int64_t created, const std::string& weights) {
  ojson j;
  j["id"] = name;
  j["object"] = "model";
  j["created"] = created;
  j["owned_by"] = "ember";
  j["weights"] = weights;
  return j;
}

ojson model_list_json(const std::string& name, int64_t created, const std::string& weights) {
  ojson j;
  j["object"] = "list";
  j["data"] = ojson::array({model_json(name, created, weights)});
  return j;
}

}  // namespace ember::apps::serve
