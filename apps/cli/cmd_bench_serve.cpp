// `ember bench-serve --url URL`: a load generator for an OpenAI-compatible
// server (ember serve, vLLM, llama-server), as vLLM's benchmark_serving: per
// --concurrency level, streamed requests of --prompt-tokens words and
// max_tokens --output-tokens, closed loop or at --rate (fixed or Poisson
// arrivals), or a --duration soak with --disconnect-fraction of the streams
// closed mid-way; one table row per level (req/s, output tok/s, TTFT, TPOT,
// ITL, E2E at mean/p50/p90/p99), or --json.
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "apps/cli/commands.h"
#include "apps/serve_bench/bench_prompts.h"
#include "apps/serve_bench/level_report.h"
#include "apps/serve_bench/load_generator.h"
#include "apps/serve_bench/stream_request.h"
#include "core/error.h"

namespace ember::apps {

namespace {

using nlohmann::json;

constexpr int kMaxConcurrency = 1024;  // one thread per client

struct BenchServeOptions {
  std::string url, api_key, model, endpoint = "completions", concurrency = "1", arrival = "fixed",
                                   prompt_file;
  int64_t requests = 0, prompt_tokens = 128, output_tokens = 128;
  double rate = std::numeric_limits<double>::infinity(), duration = 0, disconnect_fraction = 0,
         temperature = 0;
  uint64_t seed = 0;
  int timeout = 300;
  bool json = false;
};

// "1,4,16" as positive integers.
std::vector<int> parse_concurrency_list(const std::string& text) {
  std::vector<int> levels;
  std::stringstream in(text);
  std::string item;
  const std::string usage = "--concurrency must be a comma-separated list of integers from 1 to " +
                            std::to_string(kMaxConcurrency) + ", got '" + text + "'";
  while (std::getline(in, item, ',')) {
    EMBER_CHECK(!item.empty() && item.size() <= 5 &&
                    item.find_first_not_of("0123456789") == std::string::npos,
                usage);
    const int level = std::stoi(item);
    EMBER_CHECK(level >= 1 && level <= kMaxConcurrency, usage);
    levels.push_back(level);
  }
  EMBER_CHECK(!levels.empty() && text.back() != ',', usage);
  return levels;
}

// Each option's range, each error naming its option, before anything is sent.
void check_bench_serve_options(const BenchServeOptions& o) {
  EMBER_CHECK(o.requests >= 0, "--requests must be positive (or 0: 4 x the concurrency), got ",
              o.requests);
  EMBER_CHECK(o.duration >= 0 && std::isfinite(o.duration),
              "--duration must be a number of seconds, got ", o.duration);
  EMBER_CHECK(o.requests == 0 || o.duration == 0, "give --requests or --duration, not both");
  EMBER_CHECK(o.prompt_tokens >= 1, "--prompt-tokens must be positive, got ", o.prompt_tokens);
  EMBER_CHECK(o.output_tokens >= 1, "--output-tokens must be positive, got ", o.output_tokens);
  EMBER_CHECK(o.rate > 0, "--rate must be positive (requests/s; inf: closed loop), got ", o.rate);
  EMBER_CHECK(o.arrival == "fixed" || std::isfinite(o.rate),
              "--arrival poisson needs a --rate (the mean "
              "requests/s)");
  EMBER_CHECK(o.disconnect_fraction >= 0 && o.disconnect_fraction <= 1,
              "--disconnect-fraction must be between 0 and 1, got ", o.disconnect_fraction);
  EMBER_CHECK(o.temperature >= 0 && std::isfinite(o.temperature),
              "--temperature must be >= 0, got ", o.temperature);
  EMBER_CHECK(o.timeout >= 1, "--timeout must be at least 1 second, got ", o.timeout);
}

// The request of index i: its prompt, sampling seed and whether the client drops it (and when).
StreamRequest request_for(const BenchServeOptions& o, const std::string& model,
                          const BenchPrompts& prompts, uint64_t index) {
  StreamRequest r;
  r.endpoint = o.endpoint == "chat" ? ServeEndpoint::Chat : ServeEndpoint::Completions;
  r.model = model;
  r.prompt = prompts.prompt(index);
  r.max_tokens = o.output_tokens;
  r.temperature = o.temperature;
  if (o.temperature > 0)
    r.seed = request_seed(o.seed, index) >> 33;  // fits any server's integer seed
  std::mt19937_64 rng(request_seed(o.seed ^ 0xD15C0ULL, index));
  if (std::uniform_real_distribution<double>(0, 1)(rng) < o.disconnect_fraction) {
    const int64_t last = std::max<int64_t>(1, o.output_tokens - 1);  // before the stream's end
    r.drop_after_chunks = static_cast<size_t>(std::uniform_int_distribution<int64_t>(1, last)(rng));
  }
  return r;
}

std::string load_description(const BenchServeOptions& o) {
  char buf[160];
  if (!std::isfinite(o.rate)) {
    std::snprintf(buf, sizeof buf, "closed loop");
  } else {
    std::snprintf(buf, sizeof buf, "%s arrivals at %s%g req/s",
                  o.arrival == "poisson" ? "Poisson" : "fixed",
                  o.arrival == "poisson" ? "a mean " : "", o.rate);
  }
  std::string text = buf;
  if (o.duration > 0) {
    std::snprintf(buf, sizeof buf, ", a %g s soak per level", o.duration);
  } else {
    std::snprintf(buf, sizeof buf, ", %s requests per level",
                  o.requests > 0 ? std::to_string(o.requests).c_str() : "4 x concurrency");
  }
  return text + buf;
}

json run_header_json(const BenchServeOptions& o, const std::string& model) {
  return {{"url", o.url},
          {"endpoint", o.endpoint},
          {"model", model},
          {"prompt_words", o.prompt_tokens},
          {"max_tokens", o.output_tokens},
          {"temperature", o.temperature},
          {"arrival", std::isfinite(o.rate) ? o.arrival : "closed"},
          {"rate", std::isfinite(o.rate) ? json(o.rate) : json(nullptr)},
          {"duration_s", o.duration},
          {"disconnect_fraction", o.disconnect_fraction},
          {"seed", o.seed},
          {"levels", json::array()}};
}

LevelReport run_level(const BenchServeOptions& o, const ServerTarget& target,
                      const std::string& model, const BenchPrompts& prompts, int concurrency,
                      uint64_t& next_index) {
  LoadPlan plan;
  plan.concurrency = concurrency;
  plan.requests = o.requests > 0 ? o.requests : 4 * static_cast<int64_t>(concurrency);
  plan.duration_s = o.duration;
  plan.rate = o.rate;
  plan.poisson = o.arrival == "poisson";
  plan.seed = request_seed(o.seed, next_index);
  const uint64_t first =
      next_index;  // every level sends prompts of its own (no prefix shared across levels)
  const auto progress = [&](double elapsed, int64_t ok, int64_t failed, int64_t dropped) {
    std::fprintf(stderr,
                 "bench-serve: concurrency %d: %.0f s, %lld ok, %lld failed, %lld dropped\n",
                 concurrency, elapsed, static_cast<long long>(ok), static_cast<long long>(failed),
                 static_cast<long long>(dropped));
  };
  const LevelRun run = run_load(
      plan,
      [&](uint64_t i) {
        return run_stream_request(target, request_for(o, model, prompts, first + i));
      },
      o.duration > 0 ? ProgressReport(progress) : nullptr);
  next_index += run.records.size();
  return level_report(concurrency, run);
}

int run_bench_serve(const BenchServeOptions& o) {
  check_bench_serve_options(o);
  const std::vector<int> levels = parse_concurrency_list(o.concurrency);
  ServerTarget target = parse_server_url(o.url);
  target.api_key = o.api_key;
  target.timeout_s = o.timeout;
  const BenchPrompts prompts(o.prompt_tokens, o.seed, o.prompt_file);
  const std::string model = o.model.empty() ? first_served_model(target) : o.model;
  json report = run_header_json(o, model);
  const std::string weights = served_weights(target);  // ember serve's --weights
  if (!weights.empty()) report["weights"] = weights;
  if (!o.json) {
    std::printf(
        "ember bench-serve: %s%s/v1/%s, model %s%s%s, prompts of %lld words, max_tokens %lld, "
        "temperature %g, "
        "%s\n%s\n",
        target.origin.c_str(), target.path_prefix.c_str(),
        o.endpoint == "chat" ? "chat/completions" : "completions", model.c_str(),
        weights.empty() ? "" : " (weights ", weights.empty() ? "" : (weights + ")").c_str(),
        static_cast<long long>(o.prompt_tokens), static_cast<long long>(o.output_tokens),
        o.temperature, load_description(o).c_str(), level_table_header().c_str());
    std::fflush(stdout);
  }
  uint64_t next_index = 0;
  for (const int concurrency : levels) {
    const LevelReport r = run_level(o, target, model, prompts, concurrency, next_index);
    report["levels"].push_back(level_report_json(r));
    if (o.json) continue;
    std::printf("%s\n", level_table_row(r).c_str());
    if (r.failed > 0) std::printf("      first error: %s\n", r.first_error.c_str());
    std::fflush(stdout);
  }
  if (o.json) std::printf("%s\n", report.dump(2).c_str());
  return 0;
}

}  // namespace

CommandRunner add_bench_serve_command(CLI::App& app) {
  auto o = std::make_shared<BenchServeOptions>();
  CLI::App* sub =
      app.add_subcommand("bench-serve",
                         "Load-test an OpenAI-compatible server with streamed requests: "
                         "req/s, output tok/s, TTFT, TPOT, ITL and E2E per concurrency");
  sub->add_option("--url", o->url, "the server, http://HOST:PORT")->required();
  sub->add_option("--api-key", o->api_key, "sent as 'Authorization: Bearer KEY'");
  sub->add_option("--model", o->model,
                  "model name in the requests (default: the first of GET /v1/models)");
  sub->add_option("--endpoint", o->endpoint,
                  "completions (/v1/completions) or chat (/v1/chat/completions)")
      ->capture_default_str()
      ->check(CLI::IsMember({"completions", "chat"}));
  sub->add_option("--concurrency", o->concurrency,
                  "comma-separated concurrency levels, one table row each")
      ->capture_default_str();
  sub->add_option("--requests", o->requests, "requests per level (0: 4 x the concurrency)")
      ->capture_default_str();
  sub->add_option("--prompt-tokens", o->prompt_tokens,
                  "words per prompt (a word is ~1 GPT-2 token)")
      ->capture_default_str();
  sub->add_option("--output-tokens", o->output_tokens, "max_tokens of each request")
      ->capture_default_str();
  sub->add_option("--arrival", o->arrival, "fixed or poisson arrivals at --rate")
      ->capture_default_str()
      ->check(CLI::IsMember({"fixed", "poisson"}));
  sub->add_option("--rate", o->rate,
                  "requests/s (poisson: the mean; inf: closed loop at the concurrency)")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "seed of the prompts, arrivals, disconnects and sampling")
      ->capture_default_str();
  sub->add_option("--prompt-file", o->prompt_file,
                  "text to cut prompts from (default: generated words)")
      ->check(CLI::ExistingFile);
  sub->add_option("--duration", o->duration,
                  "a soak: keep the concurrency busy this many seconds per level "
                  "(instead of --requests)")
      ->capture_default_str();
  sub->add_option("--disconnect-fraction", o->disconnect_fraction,
                  "share of requests the client closes mid-stream "
                  "(counted as dropped)")
      ->capture_default_str();
  sub->add_option("--temperature", o->temperature, "sampling temperature of the requests")
      ->capture_default_str();
  sub->add_option("--timeout", o->timeout, "seconds of silence before a request counts as failed")
      ->capture_default_str();
  sub->add_flag("--json", o->json,
                "print the results as one JSON object {levels: [...]} instead of the table");
  return [o] { return run_bench_serve(*o); };
}

}  // namespace ember::apps
