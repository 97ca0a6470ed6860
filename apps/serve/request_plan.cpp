// Tokens, limits and sampling options of a request (apps/serve/request_plan.h).
#include "apps/serve/request_plan.h"

#include <algorithm>

#include "apps/serve/api_error.h"
#include "data/chat.h"

namespace ember::apps::serve {
namespace {

std::vector<int64_t> widen(const std::vector<uint32_t>& ids) {
  return {ids.begin(), ids.end()};
}

std::vector<int64_t> chat_prompt(const ApiRequest& r, const data::Tokenizer& tok) {
  if (!tok.find_special(data::kImStart) || !tok.find_special(data::kImEnd)) {
    throw bad_request(
        "this model's tokenizer has no <|im_start|> and <|im_end|> tokens, which chat needs; "
        "use /v1/completions",
        "messages", "chat_unavailable");
  }
  return widen(data::chat_generation_prompt(tok, r.messages));
}

std::vector<int64_t> completion_prompt(const ApiRequest& r, const ServedModel& m) {
  const data::Tokenizer& tok = *m.tokenizer;
  if (r.prompt_ids) {
    const int64_t vocab = std::min<int64_t>(m.vocab_size, static_cast<int64_t>(tok.vocab_size()));
    for (size_t i = 0; i < r.prompt_ids->size(); ++i) {
      const int64_t id = (*r.prompt_ids)[i];
      if (id < 0 || id >= vocab) {
        throw bad_request("prompt token " + std::to_string(i) + " (" + std::to_string(id) +
                              ") is outside the vocabulary (" + std::to_string(vocab) + " tokens)",
                          "prompt", "invalid_value");
      }
    }
    if (r.prompt_ids->empty()) throw bad_request("prompt is empty", "prompt", "invalid_value");
    return *r.prompt_ids;
  }
  std::vector<int64_t> ids = widen(tok.encode(r.prompt));
  // Nothing is prepended (usage counts the prompt as encoded, docs/cli.md#serving), so an empty
  // prompt has nothing to continue; a new document is the prompt [id of <|endoftext|>].
  if (ids.empty()) {
    const std::optional<uint32_t> eot = tok.find_special(data::kEndOfText);
    std::string message = "prompt is empty";
    if (eot) {
      message += ": to start a new document, send the prompt [" + std::to_string(*eot);
      message += "] (the id of <|endoftext|>)";
    }
    throw bad_request(message, "prompt", "invalid_value");
  }
  return ids;
}

std::vector<int64_t> stop_tokens(Endpoint endpoint, const data::Tokenizer& tok) {
  std::vector<int64_t> out;
  if (endpoint == Endpoint::Chat) {
    out.push_back(tok.special_id(data::kImEnd));
    out.push_back(tok.special_id(data::kImStart));  // ChatML starts a message only after one ended
  }
  if (const std::optional<uint32_t> eot = tok.find_special(data::kEndOfText)) out.push_back(*eot);
  return out;
}

// The KV cache holds every position but the last token drawn: a request needing more than
// the whole cache could never run.
void check_kv_cache(const ApiRequest& r, const ServedModel& m, int64_t n_prompt,
                    int64_t max_tokens) {
  const int64_t need = std::max(n_prompt, n_prompt + max_tokens - 1);
  if (m.kv_tokens <= 0 || need <= m.kv_tokens) return;
  const std::string prompt_field = r.endpoint == Endpoint::Chat ? "messages" : "prompt";
  throw bad_request("this request needs " + std::to_string(need) + " tokens of KV cache (the " +
                        prompt_field + "'s " + std::to_string(n_prompt) +
                        " tokens and max_tokens " + std::to_string(max_tokens) +
                        ", less the last token drawn), more than the "
                        "server's whole cache of " +
                        std::to_string(m.kv_tokens) + " tokens: lower max_tokens or shorten the " +
                        prompt_field +
                        ", or restart the server with a larger --kv-blocks or --kv-memory",
                    max_tokens > 1 ? "max_tokens" : prompt_field, "context_length_exceeded");
}

// max_tokens given: checked against the cap and the context; absent: the default that fits.
int64_t max_tokens(const ApiRequest& r, const ServedModel& m, int64_t n_prompt) {
  const std::string prompt_field = r.endpoint == Endpoint::Chat ? "messages" : "prompt";
  const int64_t room = m.max_seq_len - n_prompt;
  if (room < 0 || (room == 0 && !r.max_tokens)) {
    throw bad_request("this model's context holds " + std::to_string(m.max_seq_len) +
                          " tokens; the " + prompt_field + " has " + std::to_string(n_prompt) +
                          " tokens, which leaves no room" + (room == 0 ? " for a completion" : ""),
                      prompt_field, "context_length_exceeded");
  }
  const int64_t cap = m.max_tokens_cap > 0 ? m.max_tokens_cap : m.max_seq_len;
  if (!r.max_tokens) {
    int64_t wanted = r.endpoint == Endpoint::Chat ? room : kDefaultCompletionTokens;
    // A default also fits the KV cache (the last token drawn is never stored): a small
    // --kv-blocks must not turn a request without max_tokens into an error.
    if (m.kv_tokens > 0)
      wanted = std::min(wanted, std::max<int64_t>(1, m.kv_tokens - n_prompt + 1));
    const int64_t n = std::min({wanted, room, cap});
    check_kv_cache(r, m, n_prompt, n);  // a prompt longer than the whole cache
    return n;
  }
  const int64_t n = *r.max_tokens;
  if (n > room) {
    throw bad_request("this model's context holds " + std::to_string(m.max_seq_len) +
                          " tokens; the " + prompt_field + " has " + std::to_string(n_prompt) +
                          " tokens and max_tokens asks for " + std::to_string(n) +
                          " more (at most " + std::to_string(room) + " fit)",
                      "max_tokens", "context_length_exceeded");
  }
  if (n > cap) {
    throw bad_request("max_tokens must be at most " + std::to_string(cap) +
                          " on this server (--max-tokens-cap), got " + std::to_string(n),
                      "max_tokens", "invalid_value");
  }
  check_kv_cache(r, m, n_prompt, n);
  return n;
}

}  // namespace

std::vector<int64_t> prompt_tokens(const ApiRequest& r, const ServedModel& m) {
  return r.endpoint == Endpoint::Chat ? chat_prompt(r, *m.tokenizer) : completion_prompt(r, m);
}

PlannedRequest plan_request(const ApiRequest& r, const ServedModel& m, uint64_t random_seed) {
  PlannedRequest p;
  inference::EngineRequest& e = p.engine;
  e.prompt = prompt_tokens(r, m);
  p.prompt_tokens = static_cast<int64_t>(e.prompt.size());
  e.sampling.max_tokens = max_tokens(r, m, p.prompt_tokens);
  e.sampling.temperature = r.temperature;
  e.sampling.top_p = r.top_p;
  e.sampling.top_k = std::max<int64_t>(r.top_k, 0);
  e.sampling.seed = r.seed ? static_cast<uint64_t>(*r.seed) : random_seed;
  e.sampling.vocab_limit = static_cast<int64_t>(m.tokenizer->vocab_size());  // only ids it decodes
  e.stop_tokens = stop_tokens(r.endpoint, *m.tokenizer);
  e.logprobs = r.logprobs;
  if (r.echo) {
    e.prompt_logprobs = r.logprobs >= 0;
    if (r.prompt_ids) {
      const std::vector<uint32_t> ids(r.prompt_ids->begin(), r.prompt_ids->end());
      p.echo_text = m.tokenizer->decode(ids);
    } else {
      p.echo_text = r.prompt;
    }
  }
  return p;
}

}  // namespace ember::apps::serve
