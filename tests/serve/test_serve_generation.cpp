// `ember serve`'s generation runs against the real engine on a tiny random model
// (byte tokenizer with the ChatML specials), written to a capturing writer instead
// of a socket: the SSE sequence (role chunk, deltas, finish, usage, [DONE]) gives
// the same text as the whole response; echo with max_tokens 0 scores the prompt;
// a stop string cuts the text where the first occurrence in the whole output is;
// a writer that fails (the client went away) cancels the request and frees its blocks;
// the body made whole without writing (HTTP/1.0) is the written one, and a liveness
// probe that finds the client gone cancels it the same way.
#include <catch2/catch.hpp>
#include <thread>

#include "apps/serve/generation_run.h"
#include "apps/serve/request_plan.h"
#include "nn/transformer.h"

using namespace ember;
using namespace ember::apps::serve;
using json = nlohmann::json;

namespace {

struct Server {
  data::Tokenizer tok = data::Tokenizer::bytes({"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
  nn::Transformer model{
      nn::ModelConfig::from_json(R"({"vocab_size": 259, "d_model": 32, "n_layers": 2,
      "n_heads": 4, "ffn_hidden": 48, "max_seq_len": 96})"),
      5};
  inference::Engine engine{std::make_shared<const inference::InferenceModel>(model), inference::EngineOptions{}};
  ServeState state;
  Server() {
    state.model = ServedModel{std::string("tiny"), 1, &tok, 96, 259, 0};
    state.engine = &engine;
    engine.start();
  }
  ~Server() { engine.shutdown(std::chrono::milliseconds(0)); }

  // The whole body of a request made without writing, asking `alive` at each keep-alive.
  std::optional<GenerationRun::WholeBody> whole_body(const std::string& body,
                                                     const GenerationRun::Probe& alive) {
    const ApiRequest r = parse_request(body, Endpoint::Completions);
    PlannedRequest plan = plan_request(r, state.model, 1);
    GenerationRun run(engine.submit(plan.engine), r, plan.echo_text, plan.prompt_tokens,
                      ResponseMeta{Endpoint::Completions, response_id(Endpoint::Completions, 1), 1,
                                   "tiny"},
                      state);
    return run.whole_body(alive);
  }

  // Waits until no sequence runs and no KV block is held (or 2 s pass).
  inference::EngineStats settled() {
    inference::EngineStats st = engine.stats();
    for (int i = 0; i < 200 && (st.running > 0 || st.kv_blocks_used > 0); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      st = engine.stats();
    }
    return st;
  }

  // The writes of one request (false: the run reported the client gone).
  std::pair<std::vector<std::string>, bool> run(const std::string& body, Endpoint endpoint,
                                                size_t fail_after = SIZE_MAX) {
    const ApiRequest r = parse_request(body, endpoint);
    PlannedRequest plan = plan_request(r, state.model, 1);
    auto handle = engine.submit(plan.engine);
    GenerationRun run(handle, r, plan.echo_text, plan.prompt_tokens,
                      ResponseMeta{endpoint, response_id(endpoint, 1), 1, "tiny"}, state);
    std::vector<std::string> writes;
    const GenerationRun::Writer write = [&](const std::string& s) {
      if (writes.size() >= fail_after) return false;
      writes.push_back(s);
      return true;
    };
    const bool ok = r.stream ? run.stream(write) : run.whole(write);
    return {writes, ok};
  }
};

std::string completion_text(const json& body) {
  return body["choices"][0]["text"];
}

}  // namespace

TEST_CASE("serve: a streamed chat gives the whole response's text, chunk by chunk", "[serve]") {
  Server s;
  const std::string messages = R"("messages": [{"role": "user", "content": "hi"}], "max_tokens": 12,
                                  "temperature": 0)";
  const auto [whole, whole_ok] = s.run("{" + messages + "}", Endpoint::Chat);
  REQUIRE(whole_ok);
  REQUIRE(whole.size() == 1);
  const json body = json::parse(whole[0]);
  CHECK(body["object"] == "chat.completion");
  CHECK(body["usage"]["prompt_tokens"] ==
        body["usage"]["total_tokens"].get<int>() - body["usage"]["completion_tokens"].get<int>());

  const auto [chunks, ok] =
      s.run("{" + messages + R"(, "stream": true, "stream_options": {"include_usage": true}})",
            Endpoint::Chat);
  REQUIRE(ok);
  REQUIRE(chunks.size() >= 4);
  CHECK(chunks.back() == "data: [DONE]\n\n");
  std::string text;
  std::vector<json> events;
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    REQUIRE(chunks[i].rfind("data: ", 0) == 0);
    REQUIRE(chunks[i].size() > 8);
    REQUIRE(chunks[i].substr(chunks[i].size() - 2) == "\n\n");
    events.push_back(json::parse(chunks[i].substr(6)));
  }
  CHECK(events.front()["choices"][0]["delta"] == json{{"role", "assistant"}, {"content", ""}});
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    const json& delta = events[i]["choices"][0]["delta"];
    if (delta.contains("content")) text += delta["content"].get<std::string>();
  }
  const json& last = events[events.size() - 2];
  CHECK(last["choices"][0]["finish_reason"] == body["choices"][0]["finish_reason"]);
  CHECK(events.back()["choices"] == json::array());
  CHECK(events.back()["usage"] == body["usage"]);
  CHECK(text == body["choices"][0]["message"]["content"]);
}

TEST_CASE("serve: echo with max_tokens 0 scores the prompt", "[serve]") {
  Server s;
  const auto [writes, ok] =
      s.run(R"({"prompt": "scored", "max_tokens": 0, "echo": true, "logprobs": 2})",
            Endpoint::Completions);
  REQUIRE(ok);
  const json body = json::parse(writes.back());
  CHECK(completion_text(body) == "scored");
  const json& lp = body["choices"][0]["logprobs"];
  CHECK(lp["tokens"] == json{"s", "c", "o", "r", "e", "d"});
  CHECK(lp["token_logprobs"][0].is_null());
  CHECK(lp["top_logprobs"][0].is_null());
  for (int i = 1; i < 6; ++i) {
    CHECK(lp["token_logprobs"][i].get<double>() < 0);
    CHECK(lp["top_logprobs"][i].size() == 2);
  }
  CHECK(lp["text_offset"] == json{0, 1, 2, 3, 4, 5});
  CHECK(body["usage"]["completion_tokens"] == 0);
}

TEST_CASE("serve: a stop string cuts the output at its first occurrence", "[serve]") {
  Server s;
  const std::string greedy = R"("prompt": "abc", "max_tokens": 40, "temperature": 0)";
  const auto [whole, ok] = s.run("{" + greedy + "}", Endpoint::Completions);
  REQUIRE(ok);
  const std::string full = completion_text(json::parse(whole.back()));
  // A printable ASCII character after the start of the output, as the stop string.
  size_t at = 1;
  while (at < full.size() && !(full[at] >= 'a' && full[at] <= 'z')) ++at;
  REQUIRE(at < full.size());
  const std::string stop(1, full[at]);
  const auto [cut, cut_ok] =
      s.run("{" + greedy + R"(, "stop": ")" + stop + "\"}", Endpoint::Completions);
  REQUIRE(cut_ok);
  const json body = json::parse(cut.back());
  CHECK(completion_text(body) == full.substr(0, full.find(stop)));
  CHECK(body["choices"][0]["finish_reason"] == "stop");
}

TEST_CASE("serve: a client gone mid-stream cancels the request and frees its blocks", "[serve]") {
  Server s;
  // The second write fails: usually mid-stream; should the engine have finished all 80 tokens
  // before the first poll (one merged event), it is the closing [DONE] that fails, the same
  // cancellation. (Failing the third write instead passed whenever the engine was that fast.)
  const auto [writes, ok] = s.run(R"({"prompt": "abc", "max_tokens": 80, "stream": true})",
                                  Endpoint::Completions, /*fail_after=*/1);
  CHECK(!ok);
  CHECK(writes.size() == 1);
  inference::EngineStats st = s.engine.stats();
  for (int i = 0; i < 200 && (st.running > 0 || st.kv_blocks_used > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    st = s.engine.stats();
  }
  CHECK(st.running == 0);
  CHECK(st.kv_blocks_used == 0);
  CHECK(s.state.metrics.snapshot().finished == std::map<std::string, uint64_t>{{"cancelled", 1}});
}

TEST_CASE("serve: a body made whole without writing is the written one", "[serve]") {
  Server s;
  const std::string request = R"({"prompt": "abc", "max_tokens": 12, "temperature": 0})";
  const auto [writes, ok] = s.run(request, Endpoint::Completions);
  REQUIRE(ok);
  int probes = 0;
  s.state.keep_alive_interval = std::chrono::milliseconds(0);  // asked before every output
  const std::optional<GenerationRun::WholeBody> body = s.whole_body(request, [&] {
    ++probes;
    return true;
  });
  REQUIRE(body);
  CHECK(body->status == 200);
  CHECK(probes > 0);
  CHECK(body->json == writes.back());
  CHECK(completion_text(json::parse(body->json)).size() > 0);
}

TEST_CASE("serve: a probe that finds the client gone cancels a whole body's request", "[serve]") {
  Server s;
  s.state.keep_alive_interval = std::chrono::milliseconds(0);
  // With keep_alive_interval 0 the probe runs before every poll, the first before any event is
  // taken, so a client gone at the first probe is found whatever the engine's speed (a client
  // gone at the third probe passed whenever the engine finished all 80 tokens in fewer polls).
  int probes = 0;
  const std::optional<GenerationRun::WholeBody> body =
      s.whole_body(R"({"prompt": "abc", "max_tokens": 80})", [&] { return ++probes < 1; });
  CHECK_FALSE(body);
  CHECK(probes == 1);
  const inference::EngineStats st = s.settled();
  CHECK(st.running == 0);
  CHECK(st.kv_blocks_used == 0);
  CHECK(s.state.metrics.snapshot().finished == std::map<std::string, uint64_t>{{"cancelled", 1}});
}
