// KV-cache inference and the generation loop: cached logits equal a full
// forward (float64 to 1e-10, float32 to 1e-4) for dense, GQA, MQA, MoE,
// sliding-window and GPT-2-style configs, by prefill + single steps and by
// uneven chunks; no graph is recorded; greedy and seeded generation repeat;
// stop reasons; cache sizes; a too-long prompt is a clear error.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "nn/generate.h"
#include "nn/model_stats.h"

using namespace ember;
using namespace ember::nn;

namespace {

std::vector<int64_t> random_tokens(int64_t n, int64_t V, uint64_t seed) {
  const Tensor u = Tensor::rand({n}, seed, 0, DType::Float64, 0, static_cast<double>(V));
  return u.to(DType::Int64).to_vector<int64_t>();
}

// Scales every matrix by `factor` so that attention is sharp: a wrong position,
// mask or cache slot then moves the logits by far more than the tolerance.
void sharpen(Transformer& model, double factor) {
  NoGradGuard no_grad;
  for (const Variable& p : model.parameters()) {
    if (p.dim() < 2) continue;
    const Tensor d = p.data();
    dispatch_float(d.dtype(), "sharpen", [&](auto tag) {
      using T = decltype(tag);
      T* w = d.data<T>();
      for (int64_t i = 0; i < d.numel(); ++i) w[i] *= static_cast<T>(factor);
    });
  }
}

// Max |cached - full| over rows [t0, t0 + n) of batch row b; cached is [1 or B, n, V].
double max_diff(const Tensor& full, const Tensor& cached, int64_t t0) {
  double err = 0;
  const int64_t B = cached.size(0), n = cached.size(1), V = cached.size(2);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t v = 0; v < V; ++v) {
        err = std::max(err, std::abs(full.at({b, t0 + t, v}) - cached.at({b, t, v})));
      }
    }
  }
  return err;
}

// Runs ids [B, L] through the cache in the given chunk sizes and compares every
// position's logits with one full forward.
double cached_vs_full(const Transformer& model, const Tensor& ids,
                      const std::vector<int64_t>& chunks) {
  NoGradGuard no_grad;
  const Tensor full = model.forward(ids).logits.data();
  KVCache cache = model.make_cache(ids.size(0));
  double err = 0;
  int64_t t0 = 0;
  for (const int64_t n : chunks) {
    const Tensor part = ids.narrow(1, t0, n).contiguous();
    err = std::max(err, max_diff(full, model.forward_cached(part, cache).data(), t0));
    t0 += n;
  }
  REQUIRE(cache.length() == t0);
  return err;
}

const std::string kBase =
    R"("vocab_size": 37, "d_model": 32, "n_layers": 3, "n_heads": 4, "ffn_hidden": 48, "max_seq_len": 24)";

struct Case {
  const char* name;
  std::string extra;
};

const std::vector<Case> kCases = {
    {"dense MHA", ""},
    {"GQA + qk_norm", R"(, "n_kv_heads": 2, "qk_norm": true)"},
    {"MQA", R"(, "n_kv_heads": 1)"},
    {"MoE every 2 with a shared expert",
     R"(, "n_kv_heads": 2, "moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 16, "n_shared": 1, "every": 2})"},
    {"sliding window 5, global every 3, attn softcap",
     R"(, "n_kv_heads": 2, "sliding_window": 5, "global_every": 3, "attn_softcap": 5.0)"},
    {"sliding window 3 on every layer, MQA", R"(, "n_kv_heads": 1, "sliding_window": 3)"},
    {"GPT-2 style: layernorm, learned positions, bias, untied, final softcap",
     R"(, "norm": "layernorm", "pos": "learned", "bias": true, "ffn_act": "gelu_tanh", "tie_embeddings": false, "final_softcap": 3.0)"},
    {"sinusoidal positions, parallel block", R"(, "pos": "sinusoidal", "parallel_block": true)"},
    {"no positions", R"(, "pos": "none", "ffn_act": "relu")"},
};

}  // namespace

TEST_CASE("cached decoding gives the logits of a full forward (float64, 1e-10)", "[generation]") {
  for (const Case& c : kCases) {
    INFO(c.name);
    const ModelConfig cfg = ModelConfig::from_json("{" + kBase + c.extra + "}");
    Transformer model(cfg, 4, DType::Float64);
    sharpen(model, 8);
    const Tensor one = Tensor::from_vector(random_tokens(24, 37, 1), {1, 24});
    std::vector<int64_t> steps = {9};  // prefill longer than the windows, then one token at a time
    steps.resize(16, 1);
    CHECK(cached_vs_full(model, one, steps) < 1e-10);
    // Uneven chunks: a conversation appending prompts to a wrapped ring.
    CHECK(cached_vs_full(model, one, {1, 3, 7, 2, 6, 4, 1}) < 1e-10);
    CHECK(cached_vs_full(model, one, {24}) < 1e-10);
    // Two rows at once (the cache prefix is then a strided view).
    const Tensor two = Tensor::from_vector(random_tokens(48, 37, 2), {2, 24});
    CHECK(cached_vs_full(model, two, {5, 1, 1, 8, 1, 1, 1, 6}) < 1e-10);
  }
}

TEST_CASE("cached decoding gives the logits of a full forward (float32, 1e-4)", "[generation]") {
  for (const Case& c : kCases) {
    INFO(c.name);
    const ModelConfig cfg = ModelConfig::from_json("{" + kBase + c.extra + "}");
    Transformer model(cfg, 4, DType::Float32);
    sharpen(model, 8);
    const Tensor ids = Tensor::from_vector(random_tokens(24, 37, 3), {1, 24});
    std::vector<int64_t> steps = {7};
    steps.resize(18, 1);
    CHECK(cached_vs_full(model, ids, steps) < 1e-4);
    CHECK(cached_vs_full(model, ids, {2, 5, 1, 9, 7}) < 1e-4);
  }
}

TEST_CASE("cached inference records no graph and leaves grad mode as it was", "[generation]") {
  const ModelConfig cfg = ModelConfig::from_json("{" + kBase + R"(, "n_kv_heads": 2})");
  Transformer model(cfg, 1);
  KVCache cache = model.make_cache();
  REQUIRE(grad_enabled());
  const Variable prefill =
      model.forward_cached(Tensor::from_vector(random_tokens(6, 37, 4), {1, 6}), cache, true);
  const Variable step =
      model.forward_cached(Tensor::from_vector(std::vector<int64_t>{3}, {1, 1}), cache);
  CHECK(prefill.grad_fn() == nullptr);
  CHECK(step.grad_fn() == nullptr);
  CHECK(!prefill.requires_grad());
  CHECK(prefill.shape() == Shape{1, 1, 37});  // last position only
  CHECK(step.shape() == Shape{1, 1, 37});
  CHECK(grad_enabled());
  CHECK(cache.length() == 7);
}

TEST_CASE("the cache stores n_kv_heads heads and a window-sized ring", "[generation]") {
  const ModelConfig cfg = ModelConfig::from_json(
      "{" + kBase + R"(, "n_kv_heads": 1, "sliding_window": 5, "global_every": 3})");
  KVCache cache(cfg, 1, DType::Float32);
  CHECK(cache.layer(0).keys().shape() == Shape{1, 5, 1, 8});  // ring of the window
  CHECK(cache.layer(1).values().shape() == Shape{1, 5, 1, 8});
  CHECK(cache.layer(2).keys().shape() == Shape{1, 24, 1, 8});  // global layer: max_seq_len
  CHECK(cache.bytes() == static_cast<size_t>(2 * (5 + 5 + 24) * 8 * 4));
  // Without windows: max_seq_len * the per-token figure of `ember info`.
  for (const char* name : {"dense-small", "gpt2-small", "moe-small"}) {
    const std::string here = __FILE__;  // configs/ sits next to tests/
    const ModelConfig preset =
        ModelConfig::from_file(here.substr(0, here.rfind("tests/")) + "configs/" + name + ".json");
    INFO(name);
    CHECK(KVCache(preset).bytes() ==
          static_cast<size_t>(preset.max_seq_len * model_stats(preset).kv_cache_bytes_per_token));
  }
}

TEST_CASE("greedy generation is deterministic and equals argmax of full forwards", "[generation]") {
  const ModelConfig cfg =
      ModelConfig::from_json("{" + kBase + R"(, "n_kv_heads": 2, "sliding_window": 4})");
  Transformer model(cfg, 5, DType::Float64);
  sharpen(model, 8);
  SamplingOptions opt;
  opt.temperature = 0;
  opt.max_tokens = 12;
  const std::vector<int64_t> prompt = random_tokens(6, 37, 6);
  const GenerationResult a = generate(model, prompt, opt), b = generate(model, prompt, opt);
  REQUIRE(a.tokens.size() == 12);
  CHECK(a.tokens == b.tokens);
  CHECK(a.stop_reason == StopReason::MaxTokens);
  // Reference: the argmax of a full forward over everything so far, token by token.
  NoGradGuard no_grad;
  std::vector<int64_t> seq = prompt;
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    const int64_t T = static_cast<int64_t>(seq.size());
    const Tensor logits =
        model.forward(Tensor::from_vector(seq, {1, T})).logits.data().select(1, T - 1);
    int64_t best = 0;
    for (int64_t v = 1; v < 37; ++v) best = logits.at({0, v}) > logits.at({0, best}) ? v : best;
    CHECK(a.tokens[i] == best);
    seq.push_back(a.tokens[i]);
  }
}

TEST_CASE("seeded sampling is reproducible, streaming sees every token", "[generation]") {
  const ModelConfig cfg = ModelConfig::from_json("{" + kBase + "}");
  Transformer model(cfg, 6);
  sharpen(model, 4);
  SamplingOptions opt;
  opt.temperature = 0.9;
  opt.top_k = 20;
  opt.top_p = 0.95;
  opt.repetition_penalty = 1.3;
  opt.max_tokens = 15;
  opt.seed = 42;
  const std::vector<int64_t> prompt = {1, 2, 3};
  std::vector<int64_t> streamed;
  const GenerationResult a = generate(model, prompt, opt, [&](int64_t t) {
    streamed.push_back(t);
    return true;
  });
  const GenerationResult b = generate(model, prompt, opt);
  CHECK(a.tokens == b.tokens);
  CHECK(streamed == a.tokens);
  opt.seed = 43;
  const GenerationResult c = generate(model, prompt, opt);
  CHECK(c.tokens != a.tokens);
  CHECK(a.prompt_tokens == 3);
  CHECK(a.decode_steps == 14);
  CHECK(a.prefill_seconds > 0);
  CHECK(a.decode_tokens_per_second() > 0);
}

TEST_CASE("several samples after one prefill: clone the cache, continue each copy",
          "[generation]") {
  const ModelConfig cfg = ModelConfig::from_json("{" + kBase + R"(, "sliding_window": 4})");
  Transformer model(cfg, 8, DType::Float64);
  sharpen(model, 8);
  const std::vector<int64_t> prompt = random_tokens(7, 37, 13);
  SamplingOptions opt;
  opt.max_tokens = 10;
  opt.seed = 5;
  const GenerationResult direct = generate(model, prompt, opt);
  KVCache shared = model.make_cache();
  model.forward_cached(
      Tensor::from_vector(std::vector<int64_t>(prompt.begin(), prompt.end() - 1), {1, 6}), shared);
  for (int sample = 0; sample < 2; ++sample) {
    KVCache copy = shared.clone();
    const GenerationResult r = generate(model, copy, {prompt.back()}, opt);
    CHECK(r.tokens == direct.tokens);  // same seed, same logits
    CHECK(copy.length() == 7 + 9);
    CHECK(shared.length() == 6);
  }
}

TEST_CASE("generation stops at the stop token, at max_seq_len and when the callback says so",
          "[generation]") {
  const ModelConfig cfg = ModelConfig::from_json("{" + kBase + "}");
  Transformer model(cfg, 7, DType::Float64);
  sharpen(model, 8);
  SamplingOptions opt;
  opt.temperature = 0;
  opt.max_tokens = 100;
  const std::vector<int64_t> prompt = random_tokens(5, 37, 8);
  const GenerationResult full = generate(model, prompt, opt);
  // max_seq_len 24: the prompt's 5 + 19 fed tokens fill the context; the 20th is drawn from it.
  CHECK(full.stop_reason == StopReason::MaxSeqLen);
  CHECK(full.tokens.size() == 20);
  CHECK(describe(full.stop_reason, 24).find("max_seq_len (24") != std::string::npos);

  opt.stop_token = full.tokens[3];
  size_t first = 0;
  while (full.tokens[first] != opt.stop_token) ++first;
  const GenerationResult stopped = generate(model, prompt, opt);
  CHECK(stopped.stop_reason == StopReason::StopToken);
  CHECK(stopped.tokens == std::vector<int64_t>(full.tokens.begin(), full.tokens.begin() + first));

  opt.stop_token = -1;
  int calls = 0;
  const GenerationResult cut = generate(model, prompt, opt, [&](int64_t) { return ++calls < 2; });
  CHECK(cut.stop_reason == StopReason::Callback);
  CHECK(cut.tokens.size() == 2);

  opt.max_tokens = 0;
  CHECK(generate(model, prompt, opt).tokens.empty());
}

TEST_CASE("a prompt longer than max_seq_len is a clear error", "[generation]") {
  const ModelConfig cfg = ModelConfig::from_json("{" + kBase + "}");
  Transformer model(cfg, 1);
  SamplingOptions opt;
  CHECK_THROWS_WITH(generate(model, random_tokens(25, 37, 9), opt),
                    Catch::Contains("25 tokens") && Catch::Contains("max_seq_len of 24"));
  CHECK_THROWS_WITH(generate(model, {}, opt), Catch::Contains("prompt is empty"));
  CHECK_THROWS_WITH(generate(model, {1, 40}, opt), Catch::Contains("outside the model's vocab"));
  KVCache cache = model.make_cache();
  model.forward_cached(Tensor::from_vector(random_tokens(20, 37, 10), {1, 20}), cache);
  CHECK_THROWS_WITH(
      model.forward_cached(Tensor::from_vector(random_tokens(5, 37, 11), {1, 5}), cache),
      Catch::Contains("exceed max_seq_len 24"));
  CHECK_THROWS_WITH(generate(model, cache, random_tokens(5, 37, 12), opt),
                    Catch::Contains("after 20 in the cache make 25"));
}
