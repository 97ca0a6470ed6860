// `ember serve` responses without the engine: the OpenAI JSON shapes (whole
// responses, streamed chunks, the usage chunk, both logprobs shapes, errors,
// models), SSE framing, JSON text of bytes that are not UTF-8, the Prometheus
// text of /metrics, the API-key check, and the option helpers (memory sizes,
// the served name, engine options).
#include <catch2/catch.hpp>
#include <cmath>

#include "apps/serve/api_error.h"
#include "apps/serve/auth.h"
#include "apps/serve/metrics.h"
#include "apps/serve/response_json.h"
#include "apps/serve/serve_options.h"
#include "apps/serve/sse.h"
#include "core/error.h"

using namespace ember;
using namespace ember::apps::serve;
using json = nlohmann::json;

namespace {

ResponseMeta meta(Endpoint e) {
  return {e, response_id(e, 255), 1700000000, "tiny"};
}

std::vector<LogprobEntry> entries() {
  LogprobEntry first{"He", std::nullopt, {}, 0};
  LogprobEntry second{"llo", -0.5, {{"llo", -0.5}, {"y", -1.25}}, 2};
  return {first, second};
}

}  // namespace

TEST_CASE("serve: ids, usage and whole responses in the OpenAI shape", "[serve]") {
  CHECK(response_id(Endpoint::Completions, 255) == "cmpl-0000000000000000000000ff");
  CHECK(response_id(Endpoint::Chat, 1).rfind("chatcmpl-", 0) == 0);
  const json usage = json::parse(json_text(usage_json(5, 3)));
  CHECK(usage == json{{"prompt_tokens", 5}, {"completion_tokens", 3}, {"total_tokens", 8}});

  const json c = json::parse(json_text(
      response_json(meta(Endpoint::Completions), "hi", "length", nullptr, usage_json(5, 3))));
  CHECK(c["id"] == "cmpl-0000000000000000000000ff");
  CHECK(c["object"] == "text_completion");
  CHECK(c["created"] == 1700000000);
  CHECK(c["model"] == "tiny");
  CHECK(
      c["choices"] ==
      json::parse(R"([{"index": 0, "text": "hi", "logprobs": null, "finish_reason": "length"}])"));
  CHECK(c["usage"]["total_tokens"] == 8);

  const std::string text =
      json_text(response_json(meta(Endpoint::Chat), "yo", "stop", nullptr, usage_json(1, 1)));
  CHECK(text.rfind(R"({"id":"chatcmpl-)", 0) == 0);  // keys in OpenAI's order
  const json chat = json::parse(text);
  CHECK(chat["object"] == "chat.completion");
  CHECK(chat["choices"][0]["message"] == json{{"role", "assistant"}, {"content", "yo"}});
  CHECK(chat["choices"][0]["finish_reason"] == "stop");
}

TEST_CASE("serve: streamed chunks: the role first, deltas, the finish, the usage chunk", "[serve]") {
  const json role = json::parse(
      json_text(chunk_json(meta(Endpoint::Chat), "", nullptr, std::nullopt, true, false)));
  CHECK(role["object"] == "chat.completion.chunk");
  CHECK(role["choices"][0]["delta"] == json{{"role", "assistant"}, {"content", ""}});
  CHECK(role["choices"][0]["finish_reason"].is_null());
  CHECK(!role.contains("usage"));

  const json delta = json::parse(
      json_text(chunk_json(meta(Endpoint::Chat), "ab", nullptr, std::nullopt, false, true)));
  CHECK(delta["choices"][0]["delta"] == json{{"content", "ab"}});
  CHECK(delta.contains("usage"));
  CHECK(delta["usage"].is_null());

  const json last =
      json::parse(json_text(chunk_json(meta(Endpoint::Chat), "", nullptr, "stop", false, false)));
  CHECK(last["choices"][0]["delta"] == json::object());
  CHECK(last["choices"][0]["finish_reason"] == "stop");

  const json text_chunk = json::parse(
      json_text(chunk_json(meta(Endpoint::Completions), "x", nullptr, "length", false, false)));
  CHECK(text_chunk["object"] == "text_completion");
  CHECK(text_chunk["choices"][0]["text"] == "x");
  CHECK(text_chunk["choices"][0]["finish_reason"] == "length");

  const json usage =
      json::parse(json_text(usage_chunk_json(meta(Endpoint::Chat), usage_json(2, 4))));
  CHECK(usage["choices"] == json::array());
  CHECK(usage["usage"]["completion_tokens"] == 4);
}

TEST_CASE("serve: logprobs in the legacy completions shape and the chat shape", "[serve]") {
  const json legacy = json::parse(json_text(completion_logprobs_json(entries())));
  CHECK(legacy["tokens"] == json{"He", "llo"});
  CHECK(legacy["token_logprobs"] == json::parse("[null, -0.5]"));
  CHECK(legacy["top_logprobs"] == json::parse(R"([null, {"llo": -0.5, "y": -1.25}])"));
  CHECK(legacy["text_offset"] == json{0, 2});

  std::vector<LogprobEntry> out = entries();
  out.erase(out.begin());
  const json chat = json::parse(json_text(chat_logprobs_json(out)));
  const json expect =
      json::parse(R"({"content": [{"token": "llo", "logprob": -0.5, "bytes": [108, 108, 111],
      "top_logprobs": [{"token": "llo", "logprob": -0.5, "bytes": [108, 108, 111]},
                       {"token": "y", "logprob": -1.25, "bytes": [121]}]}]})");
  CHECK(chat == expect);
  CHECK(logprobs_json(Endpoint::Chat, false, out).is_null());
  // A token holding part of a character: bytes exact, text with U+FFFD.
  const json partial = json::parse(json_text(chat_logprobs_json({{"\xE2\x82", -1.0, {}, 0}})));
  CHECK(partial["content"][0]["bytes"] == json{226, 130});
  CHECK(partial["content"][0]["token"] == "\xEF\xBF\xBD");
}

TEST_CASE("serve: errors, models, SSE framing", "[serve]") {
  const json e = json::parse(
      json_text(error_json(bad_request("top_p must be in (0, 1]", "top_p", "invalid_value"))));
  CHECK(e ==
        json::parse(
            R"({"error": {"message": "top_p must be in (0, 1]", "type": "invalid_request_error",
                                        "param": "top_p", "code": "invalid_value"}})"));
  const json nulls = json::parse(json_text(error_json(ApiError(429, "busy"))));
  CHECK(nulls["error"]["type"] == "rate_limit_exceeded");
  CHECK(nulls["error"]["param"].is_null());
  CHECK(nulls["error"]["code"].is_null());
  CHECK(error_type_for(503) == "server_error");
  CHECK(error_type_for(401) == "invalid_request_error");

  const json models = json::parse(json_text(model_list_json("tiny", 5, "int8")));
  CHECK(models ==
        json::parse(R"({"object": "list", "data": [{"id": "tiny", "object": "model", "created": 5,
                                  "owned_by": "ember", "weights": "int8"}]})"));
  const ojson chunk = {{"a", "x\ny"}};
  CHECK(sse_event(chunk) == "data: {\"a\":\"x\\ny\"}\n\n");
  CHECK(std::string(kSseDone) == "data: [DONE]\n\n");
  CHECK(std::string(kSseKeepAlive).front() == ':');
}

TEST_CASE("serve: /metrics is Prometheus text with HELP and TYPE and cumulative histograms", "[serve]") {
  inference::EngineStats e;
  e.prompt_tokens = 120;
  e.generation_tokens = 40;
  e.running = 2;
  e.waiting = 1;
  e.kv_blocks_total = 10;
  e.kv_blocks_used = 3;
  e.kv_blocks_free = 7;
  e.prefix_cache_queries = 64;
  e.prefix_cache_hits = 32;
  e.ttft_seconds.bounds = {0.01, 0.1};
  e.ttft_seconds.counts = {1, 3, 4};
  e.ttft_seconds.sum = 0.75;
  ServerMetrics m;
  m.count_response(200);
  m.count_response(200);
  m.count_response(429);
  m.count_finish("stop");
  const std::string text = prometheus_text(e, m.snapshot(), "bf16");
  auto has = [&](const std::string& line) {
    INFO(line);
    CHECK(text.find(line + "\n") != std::string::npos);
  };
  has("# TYPE ember_weights_info gauge");
  has("ember_weights_info{weights=\"bf16\"} 1");
  has("# HELP ember_requests_total HTTP responses by status code.");
  has("# TYPE ember_requests_total counter");
  has("ember_requests_total{status=\"200\"} 2");
  has("ember_requests_total{status=\"429\"} 1");
  has("ember_requests_finished_total{reason=\"stop\"} 1");
  has("ember_prompt_tokens_total 120");
  has("ember_generation_tokens_total 40");
  has("# TYPE ember_requests_running gauge");
  has("ember_requests_running 2");
  has("ember_requests_waiting 1");
  has("ember_kv_blocks_used 3");
  has("ember_kv_blocks_free 7");
  has("ember_prefix_cache_hits_total 32");
  has("ember_prefix_cache_queries_total 64");
  has("ember_preemptions_total 0");
  has("# TYPE ember_time_to_first_token_seconds histogram");
  has("ember_time_to_first_token_seconds_bucket{le=\"0.01\"} 1");
  has("ember_time_to_first_token_seconds_bucket{le=\"0.1\"} 3");
  has("ember_time_to_first_token_seconds_bucket{le=\"+Inf\"} 4");
  has("ember_time_to_first_token_seconds_sum 0.75");
  has("ember_time_to_first_token_seconds_count 4");
  has("ember_inter_token_latency_seconds_count 0");
}

TEST_CASE("serve: the API key: Bearer, compared in full", "[serve]") {
  CHECK(constant_time_equal("secret", "secret"));
  CHECK(!constant_time_equal("secret", "secreT"));
  CHECK(!constant_time_equal("secret", "secret2"));
  CHECK(!constant_time_equal("", "x"));
  CHECK(constant_time_equal("", ""));
  CHECK(authorized("Bearer secret", "secret"));
  CHECK(authorized("bearer  secret ", "secret"));
  CHECK(!authorized("Bearer wrong", "secret"));
  CHECK(!authorized("Basic secret", "secret"));
  CHECK(!authorized("", "secret"));
  CHECK(!authorized("Bearer ", "secret"));
  CHECK(authorized("", ""));  // no key set: nothing needed
}

TEST_CASE("serve: serve options: memory sizes, the served name, engine options", "[serve]") {
  CHECK(parse_memory_size("2GiB") == (size_t{2} << 30));
  CHECK(parse_memory_size("512MiB") == (size_t{512} << 20));
  CHECK(parse_memory_size("1.5g") == (size_t{3} << 29));
  CHECK(parse_memory_size("64k") == 65536);
  CHECK(parse_memory_size("1000") == 1000);
  CHECK(parse_memory_size("1000B") == 1000);
  for (const char* bad : {"", "GiB", "-1", "2XB", "1.2.3G", "0", "2 GiB"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_memory_size(bad),
                      Catch::Contains("--kv-memory") && Catch::Contains("memory size"));
  }
  CHECK(default_served_name("/models/fortunes.h5") == "fortunes");
  CHECK(default_served_name("/runs/tiny/step_00000020.h5") == "tiny-step_00000020");
  CHECK(default_served_name("step_x.h5") == "step_x");

  ServeOptions o;
  o.kv_memory = "1MiB";
  const inference::EngineOptions e = engine_options(o);
  CHECK(e.kv_memory_bytes == (size_t{1} << 20));
  CHECK(e.max_seqs == 16);
  CHECK(e.prefix_cache);
  CHECK(e.max_batch_tokens == 256);
  CHECK(e.max_prefill_with_decodes == 32);
  CHECK(e.kv_dtype == DType::Float32);
  CHECK(worker_threads(o) == 16 + 256 + 8);
  o.kv_cache_dtype = "bfloat16";
  CHECK(engine_options(o).kv_dtype == DType::BFloat16);
  o.kv_cache_dtype = "float16";
  CHECK_THROWS_WITH(check_serve_options(o), Catch::Contains("--kv-cache-dtype must be float32 or bfloat16"));
  o.kv_cache_dtype = "float32";
  o.kv_blocks = 4;
  CHECK_THROWS_WITH(check_serve_options(o), Catch::Contains("not both"));
  o = ServeOptions();
  o.max_seqs = 0;
  CHECK_THROWS_WITH(check_serve_options(o), Catch::Contains("--max-seqs"));
  o = ServeOptions();
  o.max_prefill_with_decodes = -1;
  CHECK_THROWS_WITH(check_serve_options(o), Catch::Contains("--max-prefill-with-decodes must be >= 0"));
  o.max_prefill_with_decodes = 0;  // no cap: up to --max-batch-tokens
  CHECK_NOTHROW(check_serve_options(o));
  o = ServeOptions();
  CHECK(o.request_timeout_seconds == 30);
  o.request_timeout_seconds = 0;
  CHECK_THROWS_WITH(check_serve_options(o), Catch::Contains("--request-timeout"));
  o.request_timeout_seconds = 0.5;
  CHECK_NOTHROW(check_serve_options(o));
}
