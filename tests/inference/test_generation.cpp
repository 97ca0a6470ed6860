// Inference over the paged KV cache (inference/model_runner/paged_forward.h, the one inference
// forward) and the generation loop: every position's logits equal the training
// forward's for dense, GQA, MQA, MoE, sliding-window, soft-capped, learned,
// sinusoidal and no-position configs, by prefill + single steps, by uneven
// chunks and two sequences at once (float32 paged against the float64 forward
// of the same weights; and against the float32 forward); grad mode is left as
// it was; the cache's size per token; greedy and seeded generation repeat;
// samples sharing a prompt's blocks; stop reasons; a too-long prompt or
// context is a clear error.
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "inference/engine/engine.h"
#include "inference/generate.h"
#include "nn/sizing/model_stats.h"
#include "inference/model_runner/paged_forward.h"

using namespace ember;
using namespace ember::nn;
using namespace ember::inference;

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

// A float64 model holding exactly the float32 model's weights: its training forward is the
// reference the float32 paged path is measured against.
Transformer float64_copy(const Transformer& model) {
  Transformer copy(model.config(), 0, DType::Float64);
  copy.load_state_dict(model.state_dict());
  return copy;
}

// Runs the rows of ids [B, L] through the paged forward together, B sequences with blocks
// of their own, in the given chunk sizes (every position's logits), and returns the largest
// |paged - full| over every position, relative to max |full|, where full [B, L, V] is a
// training forward's logits.
double paged_vs_full(const InferenceModel& im, const Tensor& ids, const Tensor& full,
                     const std::vector<int64_t>& chunks) {
  const int64_t B = ids.size(0), L = ids.size(1), V = im.config().vocab_size;
  const int64_t per_seq = (L + kKVBlockSize - 1) / kKVBlockSize;
  PagedKVStore kv(im.config(), B * per_seq);
  std::vector<std::vector<int64_t>> toks(static_cast<size_t>(B));
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    toks[b] = ids.select(0, b).contiguous().to_vector<int64_t>();
    tables[b].resize(static_cast<size_t>(per_seq));
    std::iota(tables[b].begin(), tables[b].end(), static_cast<int32_t>(b * per_seq));
  }
  const Tensor ref = full.to(DType::Float64).contiguous();
  double scale = 0, err = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) scale = std::max(scale, std::abs(ref.data<double>()[i]));
  int64_t t0 = 0;
  for (const int64_t n : chunks) {
    std::vector<SeqChunk> step;
    for (int64_t b = 0; b < B; ++b) step.push_back({toks[b].data() + t0, n, t0, &tables[b], true});
    const Tensor logits = im.forward(step, kv);  // [B n, V]
    REQUIRE(logits.shape() == Shape({B * n, V}));
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t v = 0; v < V; ++v) {
          const double got = logits.data<float>()[(b * n + t) * V + v];
          err = std::max(err, std::abs(got - ref.data<double>()[(b * L + t0 + t) * V + v]));
        }
      }
    }
    t0 += n;
  }
  REQUIRE(t0 == L);
  return err / scale;
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

// The index of the largest value of row [V], and its lead over the runner-up relative to
// max |row|.
int64_t argmax(const Tensor& row, double& lead) {
  const std::vector<double> r = row.contiguous().to_vector<double>();
  int64_t best = 0;
  double scale = 0, second = -INFINITY;
  for (size_t v = 0; v < r.size(); ++v) {
    scale = std::max(scale, std::abs(r[v]));
    if (r[v] > r[static_cast<size_t>(best)]) best = static_cast<int64_t>(v);
  }
  for (size_t v = 0; v < r.size(); ++v) {
    if (static_cast<int64_t>(v) != best) second = std::max(second, r[v]);
  }
  lead = (r[static_cast<size_t>(best)] - second) / scale;
  return best;
}

}  // namespace

// The paged forward is float32 only (its weights and kernels), so it runs against the float64
// training forward of the same (float32) weights: the difference is float32 arithmetic alone.
// Each float32 operation rounds by at most 2^-24 (6e-8) of its result; over sums of up to 48
// products, 3 blocks and attention sharpened 8x this came to at most 4.6e-7 of the logits'
// scale (max |logit|) over these configs and chunkings. The bound 1e-5 leaves 20x, while a
// wrong position, window or block moves the logits by a good part of the scale.
TEST_CASE("paged decoding gives the logits of a float64 training forward (float32 paged, 1e-5)",
          "[generation]") {
  for (const Case& c : kCases) {
    INFO(c.name);
    const ModelConfig cfg = ModelConfig::from_json("{" + kBase + c.extra + "}");
    Transformer model(cfg, 4);
    sharpen(model, 8);
    const InferenceModel im(model);
    const Transformer ref = float64_copy(model);
    NoGradGuard no_grad;
    const Tensor one = Tensor::from_vector(random_tokens(24, 37, 1), {1, 24});
    const Tensor full = ref.forward(one).logits.data();
    std::vector<int64_t> steps = {9};  // prefill longer than the windows, then one token at a time
    steps.resize(16, 1);
    CHECK(paged_vs_full(im, one, full, steps) < 1e-5);
    // Uneven chunks: a conversation appending prompts, across a block boundary.
    CHECK(paged_vs_full(im, one, full, {1, 3, 7, 2, 6, 4, 1}) < 1e-5);
    CHECK(paged_vs_full(im, one, full, {24}) < 1e-5);
    // Two sequences in one batch, each with its own blocks.
    const Tensor two = Tensor::from_vector(random_tokens(48, 37, 2), {2, 24});
    CHECK(paged_vs_full(im, two, ref.forward(two).logits.data(), {5, 1, 1, 8, 1, 1, 1, 6}) < 1e-5);
  }
}

// Against the float32 training forward both sides round: at most 8.4e-7 of the scale here,
// within the same bound.
TEST_CASE("paged decoding gives the logits of the float32 training forward (1e-5)",
          "[generation]") {
  for (const Case& c : kCases) {
    INFO(c.name);
    const ModelConfig cfg = ModelConfig::from_json("{" + kBase + c.extra + "}");
    Transformer model(cfg, 4);
    sharpen(model, 8);
    const InferenceModel im(model);
    NoGradGuard no_grad;
    const Tensor ids = Tensor::from_vector(random_tokens(24, 37, 3), {1, 24});
    const Tensor full = model.forward(ids).logits.data();
    std::vector<int64_t> steps = {7};
    steps.resize(18, 1);
    CHECK(paged_vs_full(im, ids, full, steps) < 1e-5);
    CHECK(paged_vs_full(im, ids, full, {2, 5, 1, 9, 7}) < 1e-5);
  }
}

TEST_CASE("paged inference leaves grad mode as it was, last-position logits unless asked",
          "[generation]") {
  const ModelConfig cfg = ModelConfig::from_json("{" + kBase + R"(, "n_kv_heads": 2})");
  Transformer model(cfg, 1);
  const InferenceModel im(model);
  PagedKVStore kv(cfg, 2);
  const std::vector<int32_t> table{0, 1};
  const std::vector<int64_t> prompt = random_tokens(6, 37, 4), next{3};
  REQUIRE(grad_enabled());
  const Tensor prefill = im.forward({{prompt.data(), 6, 0, &table, false}}, kv);
  const Tensor step = im.forward({{next.data(), 1, 6, &table, false}}, kv);
  CHECK(prefill.shape() == Shape{1, 37});  // last position only
  CHECK(step.shape() == Shape{1, 37});
  CHECK(im.forward({{prompt.data(), 6, 0, &table, true}}, kv).shape() == Shape{6, 37});
  CHECK(grad_enabled());
  SamplingOptions opt;
  opt.max_tokens = 3;
  CHECK(generate(model, prompt, opt).tokens.size() == 3);
  CHECK(grad_enabled());
}

TEST_CASE("the paged cache stores n_kv_heads heads per position, ember info's bytes per token",
          "[generation]") {
  const ModelConfig cfg = ModelConfig::from_json(
      "{" + kBase + R"(, "n_kv_heads": 1, "sliding_window": 5, "global_every": 3})");
  PagedKVStore kv(cfg, 3);
  for (int64_t layer = 0; layer < 3; ++layer) {  // windowed or not: every position has a slot
    CHECK(kv.k(layer).shape() == Shape{3, 16, 1, 8});
    CHECK(kv.v(layer).shape() == Shape{3, 16, 1, 8});
  }
  CHECK(PagedKVStore::bytes_per_block(cfg) == static_cast<size_t>(3 * 2 * 16 * 8 * 4));
  for (const char* name : {"dense-small", "gpt2-small", "moe-small"}) {
    const std::string here = __FILE__;  // configs/ sits next to tests/
    const ModelConfig preset =
        ModelConfig::from_file(here.substr(0, here.rfind("tests/")) + "configs/" + name + ".json");
    INFO(name);
    CHECK(PagedKVStore::bytes_per_block(preset) ==
          static_cast<size_t>(kKVBlockSize * model_stats(preset).kv_cache_bytes_per_token));
  }
}

TEST_CASE("greedy generation is deterministic and equals argmax of full forwards", "[generation]") {
  const ModelConfig cfg =
      ModelConfig::from_json("{" + kBase + R"(, "n_kv_heads": 2, "sliding_window": 4})");
  Transformer model(cfg, 5);
  sharpen(model, 8);
  SamplingOptions opt;
  opt.temperature = 0;
  opt.max_tokens = 12;
  const std::vector<int64_t> prompt = random_tokens(6, 37, 6);
  const GenerationResult a = generate(model, prompt, opt), b = generate(model, prompt, opt);
  REQUIRE(a.tokens.size() == 12);
  CHECK(a.tokens == b.tokens);
  CHECK(a.stop_reason == StopReason::MaxTokens);
  // Reference: the argmax of a float64 forward over everything so far, token by token, each
  // ahead of the runner-up by far more than the float32 paged path's error (1e-5 of the scale).
  const Transformer ref = float64_copy(model);
  NoGradGuard no_grad;
  std::vector<int64_t> seq = prompt;
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    const int64_t T = static_cast<int64_t>(seq.size());
    const Tensor logits = ref.forward(Tensor::from_vector(seq, {1, T})).logits.data().select(1, T - 1);
    double lead = 0;  // 0.016 of the scale at the least here
    CHECK(a.tokens[i] == argmax(logits.select(0, 0), lead));
    CHECK(lead > 1e-3);
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

namespace {

// Runs one request on `engine` to its end: its tokens and how many prompt tokens were cached.
std::pair<std::vector<int64_t>, int64_t> run_request(Engine& engine,
                                                     const std::shared_ptr<RequestHandle>& h) {
  std::vector<int64_t> tokens;
  int64_t cached = -1;
  for (;;) {
    const bool ran = engine.step();
    while (auto ev = h->next(std::chrono::milliseconds(0))) {
      tokens.insert(tokens.end(), ev->tokens.begin(), ev->tokens.end());
      if (cached < 0) cached = ev->cached_prompt_tokens;
      if (ev->finished) return {tokens, cached};
    }
    REQUIRE(ran);
  }
}

}  // namespace

TEST_CASE("several samples after one prompt share its cached blocks, each as if alone",
          "[generation]") {
  const ModelConfig cfg = ModelConfig::from_json("{" + kBase + R"(, "sliding_window": 4})");
  Transformer model(cfg, 8);
  sharpen(model, 8);
  const std::vector<int64_t> prompt = random_tokens(17, 37, 13);  // one full block to share
  SamplingOptions opt;
  opt.max_tokens = 8;  // 17 + 8 - 1 positions: the whole context
  opt.seed = 5;
  const GenerationResult direct = generate(model, prompt, opt);
  SamplingOptions other = opt;
  other.seed = 6;
  const GenerationResult direct6 = generate(model, prompt, other);
  REQUIRE(direct.tokens != direct6.tokens);
  Engine engine(std::make_shared<const InferenceModel>(model), EngineOptions{});
  const auto submit = [&](const SamplingOptions& s) {
    EngineRequest req;
    req.prompt = prompt;
    req.sampling = s;
    return engine.submit(std::move(req));
  };
  const auto first = run_request(engine, submit(opt));
  CHECK(first.first == direct.tokens);
  CHECK(first.second == 0);
  for (int sample = 0; sample < 2; ++sample) {  // each continues the shared block unchanged
    const auto again = run_request(engine, submit(sample == 0 ? other : opt));
    CHECK(again.second == 16);
    CHECK(again.first == (sample == 0 ? direct6.tokens : direct.tokens));
  }
}

TEST_CASE("generation stops at the stop token, at max_seq_len and when the callback says so",
          "[generation]") {
  const ModelConfig cfg = ModelConfig::from_json("{" + kBase + "}");
  Transformer model(cfg, 7, DType::Float64);  // the engine runs its weights in float32
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
  // Continuing a context of 20 tokens with 5 more.
  const InferenceModel im(model);
  PagedKVStore kv(cfg, 2);
  const std::vector<int32_t> table{0, 1};
  const std::vector<int64_t> context = random_tokens(20, 37, 10), more = random_tokens(5, 37, 11);
  im.forward({{context.data(), 20, 0, &table, false}}, kv);
  CHECK_THROWS_WITH(im.forward({{more.data(), 5, 20, &table, false}}, kv),
                    Catch::Contains("25 positions exceed max_seq_len 24"));
}
