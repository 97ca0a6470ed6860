// The batching engine on a tiny random model: sixteen concurrent requests give
// bit-identical tokens and log-probabilities to each one alone (batch
// invariance, also under chunked prefill and preemption with a tiny block
// budget), greedy output equals the argmax of float64 training forwards,
// prefix reuse, cancellation frees blocks, stop tokens, the context limit,
// prompt scoring, queue limits and request errors; a bfloat16 KV cache keeps
// batch invariance (also under preemption) and equals generate's.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <thread>

#include "autograd/grad_mode.h"
#include "inference/engine/engine.h"
#include "inference/generate.h"
#include "nn/transformer.h"

using namespace ember;
using namespace ember::nn;
using namespace ember::inference;

namespace {

const char* kConfig =
    R"({"vocab_size": 61, "d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2,
        "ffn_hidden": 48, "max_seq_len": 96})";

std::vector<int64_t> random_tokens(int64_t n, int64_t V, uint64_t seed) {
  const Tensor u = Tensor::rand({n}, seed, 0, DType::Float64, 0, static_cast<double>(V));
  return u.to(DType::Int64).to_vector<int64_t>();
}

// Scales every matrix so that logits are far apart (greedy ties and near-ties vanish).
void sharpen(Transformer& model, float factor) {
  NoGradGuard no_grad;
  for (const Variable& p : model.parameters()) {
    if (p.dim() < 2) continue;
    float* w = p.data().data<float>();
    for (int64_t i = 0; i < p.data().numel(); ++i) w[i] *= factor;
  }
}

struct Fixture {
  Transformer model;
  std::shared_ptr<const InferenceModel> im;
  Fixture() : model(ModelConfig::from_json(kConfig), 11) {
    sharpen(model, 3);
    im = std::make_shared<const InferenceModel>(model);
  }
};

struct Outcome {
  std::vector<int64_t> tokens;
  std::vector<TokenLogprob> logprobs, prompt_logprobs;
  FinishReason reason = FinishReason::Length;
  int64_t cached = -1, events = 0;
  bool finished = false;
};

void absorb(Outcome& o, EngineEvent& ev) {
  ++o.events;
  o.tokens.insert(o.tokens.end(), ev.tokens.begin(), ev.tokens.end());
  o.logprobs.insert(o.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
  o.prompt_logprobs.insert(o.prompt_logprobs.end(), ev.prompt_logprobs.begin(),
                           ev.prompt_logprobs.end());
  o.cached = ev.cached_prompt_tokens;
  o.finished = ev.finished;
  o.reason = ev.reason;
}

// Steps `engine` synchronously until every handle finished.
std::vector<Outcome> run_all(Engine& engine,
                             const std::vector<std::shared_ptr<RequestHandle>>& hs) {
  std::vector<Outcome> out(hs.size());
  for (int guard = 0; guard < 100000; ++guard) {
    const bool ran = engine.step();
    bool all = true;
    for (size_t i = 0; i < hs.size(); ++i) {
      while (auto ev = hs[i]->next(std::chrono::milliseconds(0))) absorb(out[i], *ev);
      all = all && out[i].finished;
    }
    if (all) break;
    REQUIRE(ran);
  }
  return out;
}

std::vector<std::shared_ptr<RequestHandle>> submit_all(Engine& engine,
                                                       const std::vector<EngineRequest>& reqs) {
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (const EngineRequest& r : reqs) hs.push_back(engine.submit(r));
  return hs;
}

Outcome run_alone(std::shared_ptr<const InferenceModel> im, const EngineRequest& req,
                  EngineOptions opt = {}) {
  Engine engine(std::move(im), opt);
  return run_all(engine, {engine.submit(req)})[0];
}

EngineRequest make_request(std::vector<int64_t> prompt, int64_t max_tokens, double temperature,
                           uint64_t seed, int64_t logprobs = 3) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.sampling.max_tokens = max_tokens;
  r.sampling.temperature = temperature;
  r.sampling.top_k = temperature > 0 ? 20 : 0;
  r.sampling.seed = seed;
  r.logprobs = logprobs;
  return r;
}

// Same tokens, same log-probabilities bit for bit.
void check_same(const Outcome& a, const Outcome& b) {
  REQUIRE(a.tokens == b.tokens);
  CHECK(a.reason == b.reason);
  REQUIRE(a.logprobs.size() == b.logprobs.size());
  for (size_t i = 0; i < a.logprobs.size(); ++i) {
    CHECK(a.logprobs[i].logprob == b.logprobs[i].logprob);
    CHECK(a.logprobs[i].top == b.logprobs[i].top);
  }
}

std::vector<EngineRequest> sixteen_requests() {
  std::vector<EngineRequest> reqs;
  for (int64_t i = 0; i < 16; ++i) {
    const int64_t len = 3 + (i * 7) % 45;  // 3..45 tokens: some prompts need several chunks
    reqs.push_back(make_request(random_tokens(len, 61, 100 + static_cast<uint64_t>(i)),
                                8 + (i % 5) * 3, i % 2 ? 0.8 : 0.0, 7 * static_cast<uint64_t>(i)));
  }
  return reqs;
}

}  // namespace

TEST_CASE("sixteen concurrent requests equal each request alone, bit for bit", "[serving_engine]") {
  Fixture f;
  const std::vector<EngineRequest> reqs = sixteen_requests();
  EngineOptions opt;
  opt.max_batch_tokens = 40;  // chunked prefill beside the decodes
  Engine engine(f.im, opt);
  const std::vector<Outcome> together = run_all(engine, submit_all(engine, reqs));
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    const Outcome alone = run_alone(f.im, reqs[i]);
    CHECK(together[i].tokens.size() == static_cast<size_t>(reqs[i].sampling.max_tokens));
    check_same(together[i], alone);
  }
  const EngineStats s = engine.stats();
  CHECK(s.finished.at("length") == 16);
  CHECK(s.running == 0);
  CHECK(s.waiting == 0);
  CHECK(s.kv_blocks_used == 0);
  CHECK(s.ttft_seconds.counts.back() == 16);
  CHECK(s.generation_tokens == s.itl_seconds.counts.back() + 16);
}

TEST_CASE("sixteen sampled requests over a 2048-token vocab (draws split over threads) equal each "
          "alone", "[serving_engine]") {
  // 16 draws of 2048 logits a step: the engine draws them in parallel (Engine::Impl::draw_all).
  Transformer model(ModelConfig::from_json(
                        R"({"vocab_size": 2048, "d_model": 32, "n_layers": 1, "n_heads": 4,
                            "n_kv_heads": 2, "ffn_hidden": 48, "max_seq_len": 64})"),
                    5);
  const auto im = std::make_shared<const InferenceModel>(model);
  std::vector<EngineRequest> reqs;
  for (int64_t i = 0; i < 16; ++i) {
    EngineRequest r = make_request(random_tokens(4 + i % 5, 2048, 300 + static_cast<uint64_t>(i)), 12,
                                   1.0, 11 * static_cast<uint64_t>(i) + 1, 2);
    r.sampling.top_k = i % 3 ? 0 : 50;  // the full distribution and a top-k one
    reqs.push_back(r);
  }
  Engine engine(im, EngineOptions{});
  const std::vector<Outcome> together = run_all(engine, submit_all(engine, reqs));
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    CHECK(together[i].tokens.size() == 12);
    check_same(together[i], run_alone(im, reqs[i]));
  }
}

TEST_CASE("the background thread gives the same outputs, next() merges events",
          "[serving_engine]") {
  Fixture f;
  const std::vector<EngineRequest> reqs = sixteen_requests();
  Engine engine(f.im, {});
  engine.start();
  const std::vector<std::shared_ptr<RequestHandle>> hs = submit_all(engine, reqs);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (size_t i = 0; i < reqs.size(); ++i) {
    Outcome o;
    while (!o.finished) {
      auto ev = hs[i]->next(std::chrono::seconds(30));
      REQUIRE(ev);
      absorb(o, *ev);
    }
    CHECK(!hs[i]->next(std::chrono::milliseconds(1)));  // nothing after the finished event
    check_same(o, run_alone(f.im, reqs[i]));
  }
  engine.shutdown(std::chrono::milliseconds(1000));
  CHECK_THROWS_AS(engine.submit(reqs[0]), QueueFull);
}

TEST_CASE("a bfloat16 KV cache: batched equals alone bit for bit, greedy equals generate's, "
          "twice the blocks in the same memory",
          "[serving_engine]") {
  Fixture f;
  const std::vector<EngineRequest> reqs = sixteen_requests();
  EngineOptions opt;
  opt.kv_dtype = DType::BFloat16;
  opt.max_batch_tokens = 40;
  Engine engine(f.im, opt);
  const std::vector<Outcome> together = run_all(engine, submit_all(engine, reqs));
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    check_same(together[i], run_alone(f.im, reqs[i], opt));
    if (reqs[i].sampling.temperature > 0) continue;
    SamplingOptions greedy = reqs[i].sampling;
    const GenerationResult g = generate(f.model, reqs[i].prompt, greedy, {}, DType::BFloat16);
    CHECK(g.tokens == together[i].tokens);
  }
  EngineOptions sized;
  sized.kv_memory_bytes = 8 * PagedKVStore::bytes_per_block(f.model.config());
  CHECK(Engine(f.im, sized).stats().kv_blocks_total == 8);
  sized.kv_dtype = DType::BFloat16;
  CHECK(Engine(f.im, sized).stats().kv_blocks_total == 16);
  sized.kv_dtype = DType::Float64;
  CHECK_THROWS_WITH(Engine(f.im, sized), Catch::Contains("float32 or bfloat16"));
}

TEST_CASE("greedy output equals the argmax of float64 training forwards", "[serving_engine]") {
  Fixture f;
  // The fixture's float32 weights in a float64 model: the reference forward.
  Transformer ref(f.model.config(), 0, DType::Float64);
  ref.load_state_dict(f.model.state_dict());
  SamplingOptions opt;
  opt.temperature = 0;
  opt.max_tokens = 30;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    const std::vector<int64_t> prompt = random_tokens(5 + 9 * static_cast<int64_t>(seed), 61, seed);
    const GenerationResult paged = generate(f.model, prompt, opt);  // on the engine
    REQUIRE(paged.tokens.size() == 30);
    NoGradGuard no_grad;
    std::vector<int64_t> seq = prompt;
    for (const int64_t token : paged.tokens) {
      const int64_t T = static_cast<int64_t>(seq.size());
      const Tensor last = ref.forward(Tensor::from_vector(seq, {1, T})).logits.data().select(1, T - 1);
      std::vector<double> row = last.contiguous().to_vector<double>();
      const auto best = std::max_element(row.begin(), row.end());
      CHECK(token == best - row.begin());
      // Far from a tie: the lead over the runner-up exceeds the float32 paged path's error
      // (1e-5 of the logits' scale, test_generation.cpp) many times over.
      double scale = 0;
      for (const double x : row) scale = std::max(scale, std::abs(x));
      const double top = *best;
      *best = -INFINITY;
      CHECK(top - *std::max_element(row.begin(), row.end()) > 1e-3 * scale);
      seq.push_back(token);
    }
    CHECK(paged.stop_reason == StopReason::MaxTokens);
    CHECK(paged.decode_steps == 29);
    const Outcome served = run_alone(f.im, make_request(prompt, 30, 0, 0));
    CHECK(served.tokens == paged.tokens);
  }
}

TEST_CASE("a second request sharing a 40-token prefix reuses 32 cached tokens",
          "[serving_engine]") {
  Fixture f;
  const std::vector<int64_t> prefix = random_tokens(40, 61, 21);
  std::vector<int64_t> second = prefix;
  for (const int64_t t : random_tokens(9, 61, 22)) second.push_back(t);
  Engine engine(f.im, {});
  const Outcome first = run_all(engine, {engine.submit(make_request(prefix, 6, 0, 0))})[0];
  CHECK(first.cached == 0);
  const Outcome reused = run_all(engine, {engine.submit(make_request(second, 12, 0.7, 3, 5))})[0];
  CHECK(reused.cached == 32);
  EngineOptions no_cache;
  no_cache.prefix_cache = false;
  const Outcome fresh = run_alone(f.im, make_request(second, 12, 0.7, 3, 5), no_cache);
  CHECK(fresh.cached == 0);
  check_same(reused, fresh);
  const EngineStats s = engine.stats();
  CHECK(s.prefix_cache_queries == 40 + 49);
  CHECK(s.prefix_cache_hits == 32);
  CHECK(s.kv_blocks_used == 0);
}

TEST_CASE("cancellation frees every block and ends with Cancelled", "[serving_engine]") {
  Fixture f;
  EngineOptions opt;
  opt.prefix_cache = false;
  opt.max_seqs = 4;
  Engine engine(f.im, opt);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (int64_t i = 0; i < 6; ++i) {  // 4 run, 2 wait
    hs.push_back(engine.submit(make_request(random_tokens(30, 61, 40 + i), 60, 0.9, i)));
  }
  for (int i = 0; i < 3; ++i) REQUIRE(engine.step());
  EngineStats s = engine.stats();
  CHECK(s.running == 4);
  CHECK(s.waiting == 2);
  CHECK(s.kv_blocks_used == 8);
  for (auto& h : hs) h->cancel();
  CHECK(!engine.step());  // the step frees them all and has nothing left to run
  for (auto& h : hs) {
    Outcome o;
    while (auto ev = h->next(std::chrono::milliseconds(0))) absorb(o, *ev);
    CHECK(o.finished);
    CHECK(o.reason == FinishReason::Cancelled);
  }
  s = engine.stats();
  CHECK(s.kv_blocks_used == 0);
  CHECK(s.kv_blocks_free == s.kv_blocks_total);
  CHECK(s.finished.at("cancelled") == 6);
  CHECK(s.running + s.waiting == 0);
}

TEST_CASE("on the background thread a cancelled request ends and frees its blocks",
          "[serving_engine]") {
  Fixture f;
  Engine engine(f.im, {});
  engine.start();
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (int64_t i = 0; i < 6; ++i) {
    hs.push_back(engine.submit(make_request(random_tokens(30, 61, 40 + i), 60, 0.9, i)));
  }
  for (auto& h : hs) h->cancel();
  for (auto& h : hs) {
    Outcome o;
    while (!o.finished) {
      auto ev = h->next(std::chrono::seconds(30));
      REQUIRE(ev);
      absorb(o, *ev);
    }
    // Cancelled, unless all 60 tokens came before the engine saw the flag.
    CHECK((o.reason == FinishReason::Cancelled || o.tokens.size() == 60));
  }
  CHECK(engine.stats().kv_blocks_used == 0);
}

TEST_CASE("preemption with a tiny block budget leaves every output unchanged", "[serving_engine]") {
  Fixture f;
  EngineOptions tiny;
  tiny.kv_blocks = 6;  // 96 positions shared by 4 requests that need up to 4 blocks each
  tiny.max_batch_tokens = 24;
  Engine engine(f.im, tiny);
  std::vector<EngineRequest> reqs;
  for (int64_t i = 0; i < 4; ++i) {
    reqs.push_back(make_request(random_tokens(14 + 5 * i, 61, 60 + i), 30, i % 2 ? 1.0 : 0.0,
                                static_cast<uint64_t>(i), 2));
  }
  const std::vector<Outcome> out = run_all(engine, submit_all(engine, reqs));
  CHECK(engine.stats().preemptions > 0);
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    check_same(out[i], run_alone(f.im, reqs[i]));
  }
  CHECK(engine.stats().kv_blocks_used == 0);
}

TEST_CASE("stop tokens, the context limit and max_tokens end requests", "[serving_engine]") {
  Fixture f;
  const std::vector<int64_t> prompt = random_tokens(80, 61, 70);
  const Outcome full = run_alone(f.im, make_request(prompt, 17, 0, 0));  // 80 + 17 - 1 = 96
  REQUIRE(full.tokens.size() == 17);
  CHECK(full.reason == FinishReason::Length);
  EngineRequest stopped = make_request(prompt, 17, 0, 0);
  stopped.stop_tokens = {full.tokens[5]};
  size_t first = 0;
  while (full.tokens[first] != full.tokens[5]) ++first;
  const Outcome s = run_alone(f.im, stopped);
  CHECK(s.reason == FinishReason::Stop);
  CHECK(s.tokens == std::vector<int64_t>(full.tokens.begin(), full.tokens.begin() + first));
  stopped.stop_tokens.clear();
  stopped.sampling.stop_token = full.tokens[5];
  CHECK(run_alone(f.im, stopped).tokens == s.tokens);
  // generate: the context ends it (MaxSeqLen) when max_tokens asks for more.
  SamplingOptions opt;
  opt.temperature = 0;
  opt.max_tokens = 100;
  const GenerationResult g = generate(f.model, prompt, opt);
  CHECK(g.stop_reason == StopReason::MaxSeqLen);
  CHECK(g.tokens == full.tokens);
}

TEST_CASE("max_tokens 0 scores the prompt: log-softmax of a full forward", "[serving_engine]") {
  Fixture f;
  const std::vector<int64_t> prompt = random_tokens(37, 61, 80);
  EngineRequest req = make_request(prompt, 0, 0, 0, 2);
  req.prompt_logprobs = true;
  Engine engine(f.im, {});
  run_all(engine, {engine.submit(make_request(prompt, 2, 0, 0))});  // cache its blocks first
  const Outcome o = run_all(engine, {engine.submit(req)})[0];
  CHECK(o.tokens.empty());
  CHECK(o.reason == FinishReason::Length);
  CHECK(o.cached == 0);  // scoring skips the prefix cache: it needs every row
  REQUIRE(o.prompt_logprobs.size() == prompt.size());
  CHECK(std::isnan(o.prompt_logprobs[0].logprob));
  NoGradGuard no_grad;
  const int64_t T = static_cast<int64_t>(prompt.size());
  const Tensor logits = f.model.forward(Tensor::from_vector(prompt, {1, T})).logits.data();
  for (int64_t t = 1; t < T; ++t) {
    double m = -INFINITY, z = 0;
    for (int64_t v = 0; v < 61; ++v) m = std::max(m, logits.at({0, t - 1, v}));
    for (int64_t v = 0; v < 61; ++v) z += std::exp(logits.at({0, t - 1, v}) - m);
    const double expected = logits.at({0, t - 1, prompt[t]}) - m - std::log(z);
    const TokenLogprob& lp = o.prompt_logprobs[static_cast<size_t>(t)];
    CHECK(lp.token == prompt[t]);
    CHECK(lp.logprob == Approx(expected).margin(1e-3));
    REQUIRE(lp.top.size() == 2);
    CHECK(lp.top[0].second >= lp.top[1].second);
    CHECK(lp.top[0].second >= lp.logprob);
  }
}

TEST_CASE("queue limits and bad requests", "[serving_engine]") {
  Fixture f;
  EngineOptions opt;
  opt.max_queue = 2;
  Engine engine(f.im, opt);
  engine.submit(make_request({1, 2}, 4, 0, 0));
  engine.submit(make_request({1, 2}, 4, 0, 0));
  CHECK_THROWS_AS(engine.submit(make_request({1, 2}, 4, 0, 0)), QueueFull);
  CHECK(engine.stats().waiting == 2);
  CHECK_THROWS_WITH(engine.submit(make_request(random_tokens(97, 61, 1), 0, 0, 0)),
                    Catch::Contains("max_seq_len of 96"));
  CHECK_THROWS_WITH(engine.submit(make_request(random_tokens(90, 61, 1), 8, 0, 0)),
                    Catch::Contains("max_seq_len of 96"));
  CHECK_THROWS_WITH(engine.submit(make_request({}, 4, 0, 0)), Catch::Contains("empty"));
  CHECK_THROWS_WITH(engine.submit(make_request({1, 61}, 4, 0, 0)), Catch::Contains("vocab"));
  CHECK_THROWS_WITH(engine.submit(make_request({1}, 4, 0, 0, 6)), Catch::Contains("logprobs"));
  EngineOptions small;
  small.kv_blocks = 2;
  Engine tight(f.im, small);
  CHECK_THROWS_WITH(tight.submit(make_request(random_tokens(40, 61, 1), 1, 0, 0)),
                    Catch::Contains("3 KV blocks"));
  CHECK(engine.options().kv_blocks == 16 * 6);  // max_seqs full contexts by default
}

TEST_CASE("a mixed load with shared prefixes, preemption and random cancellations loses nothing",
          "[serving_engine]") {
  Fixture f;
  const DType kv_dtype = GENERATE(DType::Float32, DType::BFloat16);
  INFO(dtype_name(kv_dtype) << " KV cache");
  EngineOptions tight;
  tight.kv_dtype = kv_dtype;
  tight.kv_blocks = 10;  // preemptions happen
  tight.max_batch_tokens = 32;
  tight.max_seqs = 6;
  Engine engine(f.im, tight);
  const std::vector<int64_t> system = random_tokens(35, 61, 90);  // a shared "system prompt"
  std::vector<EngineRequest> reqs;
  for (int64_t i = 0; i < 20; ++i) {
    std::vector<int64_t> prompt = i % 3 ? system : std::vector<int64_t>{};
    for (const int64_t t : random_tokens(2 + i % 9, 61, 200 + i)) prompt.push_back(t);
    reqs.push_back(make_request(prompt, 5 + i % 13, i % 2 ? 0.9 : 0.0, 11 + i, 1));
  }
  const std::vector<std::shared_ptr<RequestHandle>> hs = submit_all(engine, reqs);
  std::vector<Outcome> out(hs.size());
  for (int step = 0; step < 100000; ++step) {
    if (step == 3) hs[4]->cancel();   // running
    if (step == 5) hs[17]->cancel();  // still waiting
    if (step == 9) hs[12]->cancel();
    const bool ran = engine.step();
    bool all = true;
    for (size_t i = 0; i < hs.size(); ++i) {
      while (auto ev = hs[i]->next(std::chrono::milliseconds(0))) absorb(out[i], *ev);
      all = all && out[i].finished;
    }
    if (all) break;
    REQUIRE(ran);
  }
  const EngineStats s = engine.stats();
  CHECK(s.preemptions > 0);
  CHECK(s.prefix_cache_hits > 0);
  CHECK(s.kv_blocks_used == 0);
  CHECK(s.finished.at("cancelled") + s.finished.at("length") == 20);
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    if (i == 4 || i == 17 || i == 12) {
      CHECK(out[i].reason == FinishReason::Cancelled);
      continue;
    }
    EngineOptions alone;
    alone.kv_dtype = kv_dtype;
    check_same(out[i], run_alone(f.im, reqs[i], alone));
  }
}
