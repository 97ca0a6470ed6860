// `ember bench-serve` (apps/serve_bench/): percentiles against hand values, the
// SSE parser on split and merged pieces, and the client against an in-process
// httplib server that streams OpenAI-style chunks with known sleeps (counts,
// TTFT at least the first sleep, ITL near the gaps), errors (500, 429, no
// [DONE]) counted as failed with their message, client drops counted apart,
// arrivals and soaks of the load generator, and the command's error lines.
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "apps/cli/commands.h"
#include "apps/serve_bench/bench_prompts.h"
#include "apps/serve_bench/completion_stream.h"
#include "apps/serve_bench/level_report.h"
#include "apps/serve_bench/load_generator.h"
#include "apps/serve_bench/percentiles.h"
#include "apps/serve_bench/sse_parser.h"
#include "apps/serve_bench/stream_request.h"
#include "core/error.h"

using namespace ember::apps;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// --- An OpenAI-like streaming server in this process --------------------------------------------
struct StreamScript {
  int chunks = 5;            // text chunks per response
  int first_delay_ms = 100;  // before the first chunk
  int gap_ms = 20;           // between text chunks
  int status = 200;          // != 200: an OpenAI error body with this status
  bool send_done = true;     // end with data: [DONE]
};

class TestServer {
 public:
  explicit TestServer(StreamScript script) : script_(script) {
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handle(req, res, false);
    });
    server_.Post(
        "/v1/chat/completions",
        [this](const httplib::Request& req, httplib::Response& res) { handle(req, res, true); });
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"tiny","object":"model","weights":"int8"}]})",
                      "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~TestServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<json> bodies() {
    std::lock_guard lock(mutex_);
    return bodies_;
  }

 private:
  void handle(const httplib::Request& req, httplib::Response& res, bool chat) {
    const json body = json::parse(req.body);
    {
      std::lock_guard lock(mutex_);
      bodies_.push_back(body);
    }
    if (script_.status != 200) {
      res.status = script_.status;
      res.set_content(R"({"error":{"message":"boom )" + std::to_string(script_.status) +
                          R"(","type":"x","param":null,"code":null}})",
                      "application/json");
      return;
    }
    const StreamScript s = script_;
    res.set_chunked_content_provider(
        "text/event-stream", [s, chat](size_t, httplib::DataSink& sink) {
          auto event = [&](const json& j) { return "data: " + j.dump() + "\n\n"; };
          auto pause = [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
          if (chat) {
            const std::string role =
                event({{"choices", {{{"index", 0}, {"delta", {{"role", "assistant"}}}}}}});
            sink.write(role.data(), role.size());
          }
          pause(s.first_delay_ms);
          for (int k = 0; k < s.chunks; ++k) {
            if (k > 0) pause(s.gap_ms);
            const json choice =
                chat ? json{{"index", 0}, {"delta", {{"content", " w" + std::to_string(k)}}}}
                     : json{{"index", 0}, {"text", " w" + std::to_string(k)}};
            const std::string e = event({{"object", "x"}, {"choices", {choice}}});
            const size_t half = e.size() / 2;  // an event split across two writes
            if (!sink.write(e.data(), half)) return false;
            pause(1);
            if (!sink.write(e.data() + half, e.size() - half)) return false;
          }
          // The finish chunk, the usage chunk and [DONE] merged in one write.
          std::string tail =
              event({{"choices", {{{"index", 0}, {"text", ""}, {"finish_reason", "length"}}}}}) +
              event({{"choices", json::array()},
                     {"usage",
                      {{"prompt_tokens", 7},
                       {"completion_tokens", s.chunks},
                       {"total_tokens", 7 + s.chunks}}}});
          if (s.send_done) tail += "data: [DONE]\n\n";
          sink.write(tail.data(), tail.size());
          sink.done();
          return true;
        });
  }

  StreamScript script_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<json> bodies_;
};

StreamRequest small_request(ServeEndpoint endpoint = ServeEndpoint::Completions) {
  StreamRequest r;
  r.endpoint = endpoint;
  r.model = "tiny";
  r.prompt = "one two three";
  r.max_tokens = 5;
  return r;
}

LevelRun run_against(const std::string& url, int concurrency, int64_t requests,
                     ServeEndpoint endpoint = ServeEndpoint::Completions) {
  LoadPlan plan;
  plan.concurrency = concurrency;
  plan.requests = requests;
  const ServerTarget target = parse_server_url(url);
  return run_load(plan,
                  [&](uint64_t) { return run_stream_request(target, small_request(endpoint)); });
}

// Runs `ember bench-serve ARGS` in-process; its stdout captured.
std::string run_command(const std::vector<std::string>& args) {
  CLI::App app;
  CommandRunner run = add_bench_serve_command(app);
  std::vector<std::string> argv = {"ember", "bench-serve"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<const char*> cargs;
  for (const std::string& a : argv) cargs.push_back(a.c_str());
  app.parse(static_cast<int>(cargs.size()), cargs.data());
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("bench_serve_" + std::to_string(getpid()));
  std::fflush(stdout);
  const int saved = dup(1);
  REQUIRE(std::freopen(out.c_str(), "w", stdout) != nullptr);
  try {
    run();
  } catch (...) {
    std::fflush(stdout);
    dup2(saved, 1);
    close(saved);
    throw;
  }
  std::fflush(stdout);
  dup2(saved, 1);
  close(saved);
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  std::filesystem::remove(out);
  return ss.str();
}

}  // namespace

TEST_CASE("percentiles interpolate linearly between closest ranks (numpy's default)") {
  REQUIRE(*percentile({4, 1, 3, 2}, 50) == Approx(2.5));
  REQUIRE(*percentile({4, 1, 3, 2}, 90) == Approx(3.7));  // h = 3 * 0.9 = 2.7: 3 + 0.7 * (4 - 3)
  REQUIRE(*percentile({4, 1, 3, 2}, 99) == Approx(3.97));
  REQUIRE(*percentile({4, 1, 3, 2}, 0) == 1);
  REQUIRE(*percentile({4, 1, 3, 2}, 100) == 4);
  REQUIRE(*percentile({10, 20}, 90) == Approx(19));
  REQUIRE(*percentile({5}, 99) == 5);
  REQUIRE_FALSE(percentile({}, 50).has_value());
  const SampleSummary s = summarize({10, 0, 30, 20, 40});  // sorted 0 10 20 30 40
  REQUIRE(s.count == 5);
  REQUIRE(s.mean == Approx(20));
  REQUIRE(s.p50 == Approx(20));
  REQUIRE(s.p90 == Approx(36));    // h = 3.6
  REQUIRE(s.p99 == Approx(39.6));  // h = 3.96
  REQUIRE(summarize({}).count == 0);
}

TEST_CASE("the SSE parser yields the same events however the bytes are split or merged") {
  const std::string stream =
      "data: {\"a\":1}\n\n: keep-alive comment\n\nevent: x\r\ndata: {\"b\":\r\ndata: 2}\r\n\r\n"
      "data:[DONE]\n\n";
  const std::vector<std::string> expected = {"{\"a\":1}", "{\"b\":\n2}", "[DONE]"};
  for (size_t piece : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, stream.size()}) {
    SseParser parser;
    std::vector<std::string> events;
    for (size_t at = 0; at < stream.size(); at += piece) {
      parser.feed(std::string_view(stream).substr(at, piece),
                  [&](const std::string& d) { events.push_back(d); });
    }
    REQUIRE(events == expected);
    REQUIRE_FALSE(parser.has_partial_event());
  }
  SseParser cut;
  cut.feed("data: {\"a\":", [](const std::string&) { FAIL("no event is complete"); });
  REQUIRE(cut.has_partial_event());
}

TEST_CASE("a completion stream times text chunks and reads usage and errors and DONE") {
  CompletionStream chat(ServeEndpoint::Chat);
  chat.receive("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n",
               0.1);  // no text: not timed
  chat.receive(
      "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"choices\":[{\"del", 0.2);
  chat.receive("ta\":{\"content\":\"!\"}}]}\n\n", 0.3);
  chat.receive(
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: "
      "[DONE]\n\n",
      0.4);
  REQUIRE(chat.content_times() == std::vector<double>{0.2, 0.3});
  REQUIRE(chat.output_tokens() == 2);
  REQUIRE(chat.prompt_tokens() == 3);
  REQUIRE(chat.done());
  REQUIRE_FALSE(chat.failed());

  CompletionStream bad(ServeEndpoint::Completions);
  bad.receive("data: {\"error\":{\"message\":\"engine died\"}}\n\n", 0.1);
  REQUIRE_THAT(bad.error(), Contains("engine died"));
  CompletionStream garbage(ServeEndpoint::Completions);
  garbage.receive("data: not json\n\n", 0.1);
  REQUIRE_THAT(garbage.error(), Contains("not a JSON object"));
}

TEST_CASE("a server URL is an http or https origin with an optional path prefix") {
  ServerTarget t = parse_server_url("http://127.0.0.1:8000");
  REQUIRE(t.origin == "http://127.0.0.1:8000");
  REQUIRE(t.path_prefix.empty());
  REQUIRE(parse_server_url("http://localhost:8000/v1/").path_prefix.empty());
  REQUIRE(parse_server_url("https://example.org/api/v1").path_prefix == "/api");
  REQUIRE_THROWS_WITH(parse_server_url("localhost:8000"),
                      Contains("--url must look like http://HOST:PORT"));
  REQUIRE_THROWS_WITH(parse_server_url("ftp://host:21"), Contains("--url must look like"));
  REQUIRE_THROWS_WITH(parse_server_url("http://host:70000"),
                      Contains("port must be between 1 and 65535"));
}

TEST_CASE("the request body asks for a stream with usage, max_tokens and temperature 0") {
  const json chat = json::parse(stream_request_body(small_request(ServeEndpoint::Chat)));
  REQUIRE(chat["stream"] == true);
  REQUIRE(chat["stream_options"]["include_usage"] == true);
  REQUIRE(chat["max_tokens"] == 5);
  REQUIRE(chat["temperature"] == 0);
  REQUIRE(chat["model"] == "tiny");
  REQUIRE(chat["messages"][0]["content"] == "one two three");
  REQUIRE_FALSE(chat.contains("seed"));
  const json completion = json::parse(stream_request_body(small_request()));
  REQUIRE(completion["prompt"] == "one two three");
  REQUIRE_FALSE(completion.contains("messages"));
}

TEST_CASE("prompts have P words and depend only on the seed and the index") {
  const BenchPrompts prompts(32, 7, "");
  const std::string p = prompts.prompt(3);
  REQUIRE(std::count(p.begin(), p.end(), ' ') == 31);
  REQUIRE(p == BenchPrompts(32, 7, "").prompt(3));
  REQUIRE(p != prompts.prompt(4));
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("bench_words_" + std::to_string(getpid()));
  std::ofstream(file) << "alpha beta\ngamma\n";
  const std::string cut = BenchPrompts(5, 1, file.string()).prompt(0);  // wraps around the 3 words
  std::filesystem::remove(file);
  REQUIRE(std::count(cut.begin(), cut.end(), ' ') == 4);
  REQUIRE((cut.rfind("alpha beta gamma alpha", 0) == 0 ||
           cut.rfind("beta gamma alpha beta", 0) == 0 ||
           cut.rfind("gamma alpha beta gamma", 0) == 0));
}

TEST_CASE("a streaming server's chunks are counted and timed") {
  TestServer server({5, 100, 20, 200, true});
  const LevelRun run = run_against(server.url(), 2, 4);
  const LevelReport r = level_report(2, run);
  REQUIRE(r.ok == 4);
  REQUIRE(r.failed == 0);
  REQUIRE(r.dropped == 0);
  REQUIRE(r.output_tokens == 20);  // usage.completion_tokens 5 per request
  REQUIRE(r.prompt_tokens == 28);
  for (const RequestRecord& rec : run.records) REQUIRE(rec.content_times.size() == 5);
  REQUIRE(r.ttft_ms.count == 4);
  REQUIRE(r.ttft_ms.p50 >= 100);  // the server's first sleep
  REQUIRE(r.ttft_ms.p99 < 5000);
  REQUIRE(r.itl_ms.count == 16);  // 4 gaps per request
  REQUIRE(r.itl_ms.p50 >= 15);  // 20 ms sleeps (+1 ms for the split write), less scheduling jitter
  REQUIRE(r.itl_ms.p50 < 1000);
  REQUIRE(r.tpot_ms.count == 4);
  REQUIRE(r.tpot_ms.mean >= 15);  // (E2E - TTFT) / 4 spans the 4 gaps of 21 ms
  REQUIRE(r.e2e_ms.p50 >= 180);   // 100 + 4 x 20
  REQUIRE(r.duration_s >= 0.36);  // two rounds of two concurrent requests
  REQUIRE(r.request_throughput == Approx(4 / r.duration_s));
  REQUIRE(r.output_throughput == Approx(20 / r.duration_s));
  const json j = level_report_json(r);
  REQUIRE(j["ok"] == 4);
  REQUIRE(j["first_error"].is_null());
  REQUIRE(j["ttft_ms"]["p50"].get<double>() >= 100);
  const std::string row = level_table_row(r);
  const std::string header = level_table_header();
  REQUIRE(row.size() == header.substr(header.find('\n') + 1).size());  // columns line up
}

TEST_CASE("chat streams time content deltas, not the role chunk") {
  TestServer server({3, 50, 10, 200, true});
  const LevelReport r = level_report(1, run_against(server.url(), 1, 2, ServeEndpoint::Chat));
  REQUIRE(r.ok == 2);
  REQUIRE(r.itl_ms.count == 4);
  REQUIRE(r.ttft_ms.mean >= 50);
  REQUIRE(server.bodies()[0]["messages"][0]["role"] == "user");
}

TEST_CASE("HTTP errors and a stream without DONE are failures with their message") {
  for (int status : {500, 429}) {
    TestServer server({5, 0, 0, status, true});
    const LevelReport r = level_report(2, run_against(server.url(), 2, 3));
    REQUIRE(r.ok == 0);
    REQUIRE(r.failed == 3);
    REQUIRE(r.first_error == "HTTP " + std::to_string(status) + ": boom " + std::to_string(status));
    REQUIRE(r.ttft_ms.count == 0);
    REQUIRE(level_report_json(r)["ttft_ms"]["p50"].is_null());
    REQUIRE_THAT(level_table_row(r), Contains("-"));
  }
  TestServer cut({2, 0, 0, 200, false});
  const LevelReport r = level_report(1, run_against(cut.url(), 1, 1));
  REQUIRE(r.failed == 1);
  REQUIRE_THAT(r.first_error, Contains("without data: [DONE]"));
  const RequestRecord refused =
      run_stream_request(parse_server_url("http://127.0.0.1:1"), small_request());
  REQUIRE(refused.outcome == RequestOutcome::Failed);
  REQUIRE_THAT(refused.error, Contains("could not connect"));
}

TEST_CASE("a stream the client closes is dropped, not failed") {
  TestServer server({5, 10, 300, 200, true});  // the whole stream takes 1.2 s
  StreamRequest request = small_request();
  request.drop_after_chunks = 2;
  const RequestRecord rec = run_stream_request(parse_server_url(server.url()), request);
  REQUIRE(rec.outcome == RequestOutcome::Dropped);
  REQUIRE(rec.content_times.size() == 2);
  REQUIRE(rec.latency() < 0.9);  // closed after ~0.31 s, not waiting for the rest
  // The server keeps serving the next requests.
  REQUIRE(run_stream_request(parse_server_url(server.url()), small_request()).outcome ==
          RequestOutcome::Ok);
}

TEST_CASE(
    "open-loop arrivals are paced by the rate and a soak keeps starting requests until its "
    "duration") {
  std::mutex m;
  std::set<uint64_t> seen;
  const auto runner = [&](uint64_t index) {
    RequestRecord r;
    r.sent = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    r.ended = std::chrono::steady_clock::now();
    r.outcome = RequestOutcome::Ok;
    std::lock_guard lock(m);
    seen.insert(index);
    return r;
  };
  LoadPlan fixed;
  fixed.concurrency = 2;
  fixed.requests = 5;
  fixed.rate = 20;  // 50 ms apart: the last starts at 200 ms
  const LevelRun paced = run_load(fixed, runner);
  REQUIRE(paced.records.size() == 5);
  REQUIRE(seen == std::set<uint64_t>{0, 1, 2, 3, 4});
  REQUIRE(paced.wall_seconds >= 0.2);
  const double last_start =
      std::chrono::duration<double>(paced.records.back().sent - paced.records.front().sent).count();
  REQUIRE(last_start >= 0.1);  // paced (unpaced, all five start at once)

  LoadPlan poisson = fixed;
  poisson.poisson = true;
  poisson.rate = 1000;
  poisson.requests = 20;
  REQUIRE(run_load(poisson, runner).records.size() == 20);

  LoadPlan soak;
  soak.concurrency = 2;
  soak.duration_s = 0.3;
  int reports = 0;
  const LevelRun run = run_load(
      soak, runner, [&](double, int64_t, int64_t, int64_t) { ++reports; },
      std::chrono::milliseconds(50));
  REQUIRE(run.records.size() >= 20);  // ~2 x 300 / 10, less the threads' overhead
  REQUIRE(run.wall_seconds >= 0.3);
  REQUIRE(run.wall_seconds < 2.0);
  REQUIRE(reports >= 2);
}

TEST_CASE("ember bench-serve prints one JSON object with a level per concurrency") {
  TestServer server({3, 20, 5, 200, true});
  const json j =
      json::parse(run_command({"--url", server.url(), "--concurrency", "1,2", "--requests", "3",
                               "--prompt-tokens", "16", "--output-tokens", "3", "--json"}));
  REQUIRE(j["model"] == "tiny");  // the first of /v1/models
  REQUIRE(j["weights"] == "int8");  // as the server names them
  REQUIRE(j["levels"].size() == 2);
  REQUIRE(j["levels"][0]["concurrency"] == 1);
  REQUIRE(j["levels"][1]["concurrency"] == 2);
  REQUIRE(j["levels"][1]["ok"] == 3);
  REQUIRE(j["levels"][1]["failed"] == 0);
  const std::vector<json> bodies = server.bodies();
  REQUIRE(bodies.size() == 6);
  std::set<std::string> prompts;
  for (const json& b : bodies) {
    const std::string p = b["prompt"].get<std::string>();
    REQUIRE(std::count(p.begin(), p.end(), ' ') == 15);
    REQUIRE(b["max_tokens"] == 3);
    prompts.insert(p);
  }
  REQUIRE(prompts.size() == 6);  // no prompt repeats across levels

  const std::string table = run_command({"--url", server.url() + "/v1", "--requests", "2",
                                         "--output-tokens", "3", "--disconnect-fraction", "1"});
  REQUIRE_THAT(table, Contains("TTFT ms"));
  REQUIRE_THAT(table, Contains("closed loop"));
}

TEST_CASE("ember bench-serve's error lines name the option") {
  REQUIRE_THROWS_WITH(run_command({"--url", "localhost:8000"}),
                      Contains("--url must look like http://HOST:PORT"));
  REQUIRE_THROWS_WITH(run_command({"--url", "http://127.0.0.1:1"}),
                      Contains("cannot reach the server at http://127.0.0.1:1: could not connect"));
  for (const char* bad : {"1,x", "0", "1,,4", "4,", "2000", ""}) {
    REQUIRE_THROWS_WITH(
        run_command({"--url", "http://127.0.0.1:1", "--concurrency", bad}),
        Contains("--concurrency must be a comma-separated list of integers from 1 to 1024"));
  }
  REQUIRE_THROWS_WITH(run_command({"--url", "http://127.0.0.1:1", "--arrival", "poisson"}),
                      Contains("--arrival poisson needs a --rate"));
  REQUIRE_THROWS_WITH(
      run_command({"--url", "http://127.0.0.1:1", "--requests", "4", "--duration", "10"}),
      Contains("give --requests or --duration, not both"));
  REQUIRE_THROWS_WITH(run_command({"--url", "http://127.0.0.1:1", "--disconnect-fraction", "1.5"}),
                      Contains("--disconnect-fraction must be between 0 and 1"));
}
