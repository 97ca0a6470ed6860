// `ember serve` request handling without the engine: the field-by-field
// validation of completion and chat bodies (every refusal is a 400 naming its
// field) and the plan that follows (prompt tokens by the byte tokenizer, ChatML
// ids, max_tokens defaults, the cap and the context check, stop tokens, seeds).
#include <catch2/catch.hpp>

#include "apps/serve/api_error.h"
#include "apps/serve/request_parse.h"
#include "apps/serve/request_plan.h"
#include "data/chat.h"

using namespace ember;
using namespace ember::apps::serve;

namespace {

constexpr int64_t kEot = 256, kImStart = 257, kImEnd = 258;

ApiError error_of(const std::string& body, Endpoint endpoint = Endpoint::Completions) {
  try {
    parse_request(body, endpoint);
  } catch (const ApiError& e) {
    return e;
  }
  FAIL("accepted: " << body);
  return ApiError(0, "");
}

void check_refused(const std::string& body, const std::string& param,
                   Endpoint endpoint = Endpoint::Completions) {
  INFO(body);
  const ApiError e = error_of(body, endpoint);
  CHECK(e.status() == 400);
  CHECK(e.type() == "invalid_request_error");
  CHECK(e.param() == param);
}

ApiRequest chat(const std::string& extra = "") {
  return parse_request(
      R"({"model": "m", "messages": [{"role": "user", "content": "hi"}])" + extra + "}",
      Endpoint::Chat);
}

struct Served {
  data::Tokenizer tok = data::Tokenizer::bytes({"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
  ServedModel m;
  // vocab_size 300: a padded vocabulary, rows past the tokenizer's 259.
  Served(int64_t max_seq_len = 32, int64_t cap = 0)
      : m{std::string("m"), 0, &tok, max_seq_len, 300, cap} {}
};

ApiError plan_error(const ApiRequest& r, const ServedModel& m) {
  try {
    plan_request(r, m, 7);
  } catch (const ApiError& e) {
    return e;
  }
  FAIL("planned");
  return ApiError(0, "");
}

}  // namespace

TEST_CASE("serve: a minimal completion request takes the defaults", "[serve]") {
  const ApiRequest r = parse_request(R"({"model": "m", "prompt": "hello"})", Endpoint::Completions);
  CHECK(r.model == std::optional<std::string>("m"));
  CHECK(r.prompt == "hello");
  CHECK(!r.prompt_ids);
  CHECK(!r.max_tokens);
  CHECK(r.temperature == 1.0);
  CHECK(r.top_p == 1.0);
  CHECK(r.top_k == 0);
  CHECK(!r.seed);
  CHECK(r.stop.empty());
  CHECK(!r.stream);
  CHECK(r.logprobs == -1);
  CHECK(!r.echo);
}

TEST_CASE("serve: every field of a completion request is read", "[serve]") {
  const ApiRequest r = parse_request(
      R"({"model": "m", "prompt": ["x"], "max_tokens": 5, "temperature": 0, "top_p": 0.5, "top_k": -1,
          "seed": -3, "stop": ["a", "bc"], "stream": true, "stream_options": {"include_usage": true},
          "echo": true, "logprobs": 5, "n": 1, "user": "u", "presence_penalty": 0, "frequency_penalty": 0,
          "logit_bias": {}, "best_of": 1, "suffix": null})",
      Endpoint::Completions);
  CHECK(r.prompt == "x");
  CHECK(r.max_tokens == std::optional<int64_t>(5));
  CHECK(r.temperature == 0);
  CHECK(r.top_p == 0.5);
  CHECK(r.top_k == -1);
  CHECK(r.seed == std::optional<int64_t>(-3));
  CHECK(r.stop == std::vector<std::string>{"a", "bc"});
  CHECK(r.stream);
  CHECK(r.include_usage);
  CHECK(r.echo);
  CHECK(r.logprobs == 5);
}

TEST_CASE("serve: null counts as absent, and a prompt may be token ids", "[serve]") {
  const ApiRequest r =
      parse_request(R"({"prompt": [1, 2, 3], "stop": null, "seed": null, "max_tokens": null})",
                    Endpoint::Completions);
  CHECK(!r.model);
  CHECK(r.prompt_ids == std::optional<std::vector<int64_t>>({1, 2, 3}));
  CHECK(!r.seed);
  CHECK(!r.max_tokens);
  CHECK(parse_request(R"({"prompt": [[4, 5]]})", Endpoint::Completions).prompt_ids ==
        std::optional<std::vector<int64_t>>({4, 5}));
  CHECK(parse_request(R"({"prompt": "a", "stop": "x"})", Endpoint::Completions).stop ==
        std::vector<std::string>{"x"});
}

TEST_CASE("serve: bad completion requests are 400 naming the field", "[serve]") {
  check_refused(R"({"prompt": "a", "foo": 1})", "foo");
  check_refused(R"({"prompt": "a", "max_tokens": "5"})", "max_tokens");
  check_refused(R"({"prompt": "a", "max_tokens": 1.5})", "max_tokens");
  check_refused(R"({"prompt": "a", "max_tokens": -1})", "max_tokens");
  check_refused(R"({"prompt": "a", "max_tokens": true})", "max_tokens");
  check_refused(R"({"prompt": "a", "temperature": -0.1})", "temperature");
  check_refused(R"({"prompt": "a", "temperature": "1"})", "temperature");
  check_refused(R"({"prompt": "a", "top_p": 0})", "top_p");
  check_refused(R"({"prompt": "a", "top_p": 1.01})", "top_p");
  check_refused(R"({"prompt": "a", "top_k": -2})", "top_k");
  check_refused(R"({"prompt": "a", "logprobs": 6})", "logprobs");
  check_refused(R"({"prompt": "a", "logprobs": -1})", "logprobs");
  check_refused(R"({"prompt": "a", "logprobs": true})", "logprobs");
  check_refused(R"({"prompt": "a", "n": 2})", "n");
  check_refused(R"({"prompt": "a", "best_of": 3})", "best_of");
  check_refused(R"({"prompt": "a", "presence_penalty": 0.5})", "presence_penalty");
  check_refused(R"({"prompt": "a", "logit_bias": {"5": 1}})", "logit_bias");
  check_refused(R"({"prompt": "a", "stop": ["a", "b", "c", "d", "e"]})", "stop");
  check_refused(R"({"prompt": "a", "stop": ""})", "stop");
  check_refused(R"({"prompt": "a", "stop": [1]})", "stop[0]");
  check_refused(R"({"prompt": "a", "stop": ")" + std::string(257, 'x') + R"("})", "stop");
  check_refused(R"({"prompt": "a", "stream": "yes"})", "stream");
  check_refused(R"({"prompt": "a", "stream_options": {"include_usage": true}})", "stream_options");
  check_refused(R"({"prompt": "a", "stream": true, "stream_options": {"x": 1}})",
                "stream_options.x");
  check_refused(R"({"prompt": "a", "messages": []})", "messages");
  check_refused(R"({"prompt": ["a", "b"]})", "prompt");
  check_refused(R"({"prompt": []})", "prompt");
  check_refused(R"({"prompt": [1, -2]})", "prompt[1]");
  check_refused(R"({"prompt": null})", "prompt");
  check_refused(R"({"max_tokens": 3})", "prompt");
  check_refused(R"({"prompt": "a", "model": 5})", "model");
  check_refused(R"({"prompt": "a", "max_tokens": 99999999999999999999})", "max_tokens");
  CHECK(error_of("not json").code() == "invalid_json");
  CHECK(error_of("[1, 2]").status() == 400);
}

TEST_CASE("serve: an integer past 64 bits is out of range, with the range", "[serve]") {
  // 2^63 (an unsigned 64-bit integer to the JSON parser) and 10^20 (past 64 bits: a float).
  for (const char* n : {"9223372036854775808", "99999999999999999999"}) {
    INFO(n);
    ApiError e = error_of(std::string(R"({"prompt": "a", "max_tokens": )") + n + "}");
    CHECK(e.code() == "invalid_value");
    CHECK(std::string(e.what()).find("max_tokens must be between 0 and 9223372036854775807, got") ==
          0);
    e = error_of(std::string(R"({"prompt": "a", "seed": )") + n + "}");
    CHECK(std::string(e.what()).find(
              "seed must be between -9223372036854775808 and 9223372036854775807") == 0);
  }
  CHECK(std::string(error_of(R"({"prompt": "a", "max_tokens": -1})").what()) ==
        "max_tokens must be >= 0, got -1");
  CHECK(std::string(error_of(R"({"prompt": "a", "max_tokens": 1.5})").what()) ==
        "max_tokens must be an integer, got a number");
  CHECK(error_of(R"({"prompt": "a", "foo": 1})").code() == "unknown_field");
}

TEST_CASE("serve: chat requests: messages, logprobs and max_completion_tokens", "[serve]") {
  const ApiRequest r = parse_request(
      R"({"messages": [{"role": "system", "content": "be brief"},
                       {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                       {"role": "assistant", "content": "c"}],
          "logprobs": true, "top_logprobs": 3, "max_completion_tokens": 9})",
      Endpoint::Chat);
  REQUIRE(r.messages.size() == 3);
  CHECK(r.messages[0].role == "system");
  CHECK(r.messages[1].content == "ab");
  CHECK(r.messages[2].role == "assistant");
  CHECK(r.logprobs == 3);
  CHECK(r.max_tokens == std::optional<int64_t>(9));
  CHECK(chat(R"(, "logprobs": true)").logprobs == 0);
  CHECK(chat(R"(, "logprobs": false)").logprobs == -1);
}

TEST_CASE("serve: bad chat requests are 400 naming the field", "[serve]") {
  const Endpoint c = Endpoint::Chat;
  check_refused(R"({"messages": []})", "messages", c);
  check_refused(R"({"model": "m"})", "messages", c);
  check_refused(R"({"messages": "hi"})", "messages", c);
  check_refused(R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0].role", c);
  check_refused(R"({"messages": [{"role": "user"}]})", "messages[0]", c);
  check_refused(R"({"messages": [{"content": "x"}]})", "messages[0]", c);
  check_refused(R"({"messages": [{"role": "user", "content": "x", "name": "n"}]})",
                "messages[0].name", c);
  check_refused(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                "messages[0].content", c);
  check_refused(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
                "top_logprobs", c);
  check_refused(
      R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 6})",
      "top_logprobs", c);
  check_refused(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 2})", "logprobs",
                c);
  check_refused(R"({"messages": [{"role": "user", "content": "x"}], "echo": true})", "echo", c);
  check_refused(R"({"messages": [{"role": "user", "content": "x"}], "prompt": "x"})", "prompt", c);
  check_refused(
      R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 3, "max_completion_tokens": 4})",
      "max_completion_tokens", c);
}

TEST_CASE("serve: a completion's plan: byte tokens, default max_tokens 16, <|endoftext|> stops",
          "[serve]") {
  Served s;
  const PlannedRequest p = plan_request(
      parse_request(R"({"prompt": "abc", "temperature": 0, "top_k": -1})", Endpoint::Completions),
      s.m, 42);
  CHECK(p.engine.prompt == std::vector<int64_t>{'a', 'b', 'c'});
  CHECK(p.prompt_tokens == 3);
  CHECK(p.engine.sampling.max_tokens == 16);
  CHECK(p.engine.sampling.temperature == 0);
  CHECK(p.engine.sampling.top_k == 0);
  CHECK(p.engine.sampling.seed == 42);  // no seed given: the random one
  CHECK(p.engine.stop_tokens == std::vector<int64_t>{kEot});
  CHECK(p.engine.logprobs == -1);
  CHECK(!p.engine.prompt_logprobs);
  CHECK(p.echo_text.empty());
  const PlannedRequest seeded =
      plan_request(parse_request(R"({"prompt": "abc", "seed": 5, "logprobs": 2, "echo": true})",
                                 Endpoint::Completions),
                   s.m, 42);
  CHECK(seeded.engine.sampling.seed == 5);
  CHECK(seeded.engine.logprobs == 2);
  CHECK(seeded.engine.prompt_logprobs);
  CHECK(seeded.echo_text == "abc");
}

TEST_CASE(
    "a chat's plan: ChatML ids, stops at <|im_end|>, <|im_start|> and <|endoftext|>, the rest of the context",
    "[serve]") {
  Served s(64);
  const ApiRequest r = chat();
  const PlannedRequest p = plan_request(r, s.m, 1);
  const std::vector<uint32_t> expect = data::chat_generation_prompt(s.tok, r.messages);
  CHECK(p.engine.prompt == std::vector<int64_t>(expect.begin(), expect.end()));
  CHECK(p.engine.prompt.front() == kImStart);
  CHECK(p.engine.stop_tokens == std::vector<int64_t>{kImEnd, kImStart, kEot});
  CHECK(p.engine.sampling.max_tokens == 64 - static_cast<int64_t>(expect.size()));
  data::Tokenizer plain = data::Tokenizer::bytes();
  s.m.tokenizer = &plain;
  const ApiError e = plan_error(r, s.m);
  CHECK(e.status() == 400);
  CHECK(e.code() == "chat_unavailable");
}

TEST_CASE("serve: prompt plus max_tokens over the context is 400, never clamped", "[serve]") {
  Served s(32);
  auto completion = [](const std::string& prompt, const std::string& extra) {
    return parse_request(R"({"prompt": ")" + prompt + "\"" + extra + "}", Endpoint::Completions);
  };
  CHECK(
      plan_request(completion("abc", R"(, "max_tokens": 29)"), s.m, 1).engine.sampling.max_tokens ==
      29);
  ApiError e = plan_error(completion("abc", R"(, "max_tokens": 30)"), s.m);
  CHECK(e.status() == 400);
  CHECK(e.code() == "context_length_exceeded");
  CHECK(e.param() == "max_tokens");
  CHECK(std::string(e.what()).find("32") != std::string::npos);
  e = plan_error(completion(std::string(33, 'x'), ""), s.m);
  CHECK(e.code() == "context_length_exceeded");
  CHECK(e.param() == "prompt");
  // The default shrinks to what fits; a prompt that fills the context leaves no room for one.
  CHECK(plan_request(completion(std::string(20, 'x'), ""), s.m, 1).engine.sampling.max_tokens ==
        12);
  CHECK(plan_error(completion(std::string(32, 'x'), ""), s.m).code() == "context_length_exceeded");
  CHECK(plan_request(completion(std::string(32, 'x'), R"(, "max_tokens": 0)"), s.m, 1)
            .engine.sampling.max_tokens == 0);
}

TEST_CASE("serve: the server's max_tokens cap refuses more and bounds the default", "[serve]") {
  Served s(64, 8);
  CHECK(plan_request(chat(R"(, "max_tokens": 8)"), s.m, 1).engine.sampling.max_tokens == 8);
  const ApiError e = plan_error(chat(R"(, "max_tokens": 9)"), s.m);
  CHECK(e.status() == 400);
  CHECK(e.param() == "max_tokens");
  CHECK(plan_request(chat(), s.m, 1).engine.sampling.max_tokens == 8);
}

TEST_CASE("serve: prompts of token ids, and an empty prompt", "[serve]") {
  Served s;
  const PlannedRequest p = plan_request(
      parse_request(R"({"prompt": [104, 105], "echo": true})", Endpoint::Completions), s.m, 1);
  CHECK(p.engine.prompt == std::vector<int64_t>{104, 105});
  CHECK(p.echo_text == "hi");
  // 259 is a row of the model's padded vocabulary but no token of the tokenizer.
  CHECK(plan_error(parse_request(R"({"prompt": [1, 259]})", Endpoint::Completions), s.m).param() ==
        "prompt");
  // Nothing is prepended to a prompt: an empty one is a 400 naming the <|endoftext|> id to send.
  const std::string message =
      plan_error(parse_request(R"({"prompt": ""})", Endpoint::Completions), s.m).what();
  CHECK(message.find("send the prompt [256]") != std::string::npos);  // kEot
  data::Tokenizer plain = data::Tokenizer::bytes();
  s.m.tokenizer = &plain;
  CHECK(plan_error(parse_request(R"({"prompt": ""})", Endpoint::Completions), s.m).param() ==
        "prompt");
}

TEST_CASE("serve: a default max_tokens fits a small KV cache, a given one is not lowered",
          "[serve]") {
  Served s(64);
  auto completion = [](const std::string& prompt, const std::string& extra) {
    return parse_request(R"({"prompt": ")" + prompt + "\"" + extra + "}", Endpoint::Completions);
  };
  s.m.kv_tokens =
      32;  // two blocks: a 20-token prompt leaves 13 (the last token drawn is not stored)
  CHECK(plan_request(completion(std::string(20, 'x'), ""), s.m, 1).engine.sampling.max_tokens ==
        13);
  s.m.kv_tokens = 24;
  CHECK(plan_request(completion(std::string(20, 'x'), ""), s.m, 1).engine.sampling.max_tokens == 5);
  // Given: passed on as asked when the cache holds it (20 + 5 - 1 positions), else refused.
  CHECK(plan_request(completion(std::string(20, 'x'), R"(, "max_tokens": 5)"), s.m, 1)
            .engine.sampling.max_tokens == 5);
  const ApiError e = plan_error(completion(std::string(20, 'x'), R"(, "max_tokens": 40)"), s.m);
  CHECK(e.status() == 400);
  CHECK(e.code() == "context_length_exceeded");
  CHECK(e.param() == "max_tokens");
  CHECK(std::string(e.what()) ==
        "this request needs 59 tokens of KV cache (the prompt's 20 tokens and max_tokens 40, "
        "less the last token drawn), more than the server's whole cache of 24 tokens: lower "
        "max_tokens or shorten the prompt, or restart the server with a larger --kv-blocks or "
        "--kv-memory");
  // A prompt longer than the whole cache, without max_tokens.
  CHECK(plan_error(completion(std::string(30, 'x'), ""), s.m).param() == "prompt");
  const PlannedRequest c = plan_request(chat(), s.m, 1);  // chat's default: the rest, within 24
  CHECK(c.engine.sampling.max_tokens == 24 - c.prompt_tokens + 1);
}
