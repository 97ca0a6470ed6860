// RL rollouts (inference/rollout/rollout.h): logp_old against a plain training forward of
// prompt + completion (plain, LoRA and QLoRA policies, the policy's weights read in place and
// as they are at the call); a completion the same alone, in its group, among many prompts and
// with fewer seats; each prompt prefilled once at G = 4; stop tokens; max_tokens; bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "inference/engine/engine.h"
#include "inference/model_runner/paged_forward.h"
#include "inference/rollout/rollout.h"
#include "nn/adapters/adapters.h"
#include "nn/transformer.h"

using namespace ember;
using namespace ember::nn;
using namespace ember::inference;

namespace {

ModelConfig test_config() {
  return ModelConfig::from_json(R"({"vocab_size": 61, "d_model": 32, "n_layers": 2, "n_heads": 4,
      "n_kv_heads": 2, "ffn_hidden": 48, "qk_norm": true, "max_seq_len": 80, "dropout": 0.0})",
                                "test config");
}

std::vector<int64_t> tokens_of(int64_t n, int64_t salt, int64_t vocab) {
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[i] = (i * 31 + salt * 17 + (i * i) % 13) % vocab;
  return t;
}

// log softmax(logits / T) of each completion token, from one training forward of
// prompt + completion: the token at position P + j is scored by the logits at P + j - 1.
std::vector<double> plain_logprobs(const Transformer& model, const std::vector<int64_t>& prompt,
                                   const std::vector<int64_t>& completion, double T) {
  NoGradGuard no_grad;
  std::vector<int64_t> all = prompt;
  all.insert(all.end(), completion.begin(), completion.end());
  const int64_t n = static_cast<int64_t>(all.size()), V = model.config().vocab_size;
  const Tensor logits =
      model.forward(Tensor::from_vector(all, {1, n})).logits.data().to(DType::Float64).contiguous();
  std::vector<double> out;
  for (size_t j = 0; j < completion.size(); ++j) {
    const double* x = logits.data<double>() + (static_cast<int64_t>(prompt.size() + j) - 1) * V;
    const double m = *std::max_element(x, x + V);
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += std::exp((x[v] - m) / T);
    out.push_back((x[completion[j]] - m) / T - std::log(s));
  }
  return out;
}

// The largest |rollout logp - plain logp| over every completion token.
double logprob_error(const Transformer& model, const std::vector<std::vector<int64_t>>& prompts,
                     const Rollout& r, double T) {
  double err = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (const Completion& c : r.groups[p]) {
      REQUIRE(c.logprobs.size() == c.tokens.size());
      const std::vector<double> ref = plain_logprobs(model, prompts[p], c.tokens, T);
      for (size_t j = 0; j < ref.size(); ++j) err = std::max(err, std::abs(c.logprobs[j] - ref[j]));
    }
  }
  return err;
}

// Gives LoRA's B matrices (zero at init) a visible effect.
void perturb_lora_b(Transformer& model, uint64_t seed, float scale) {
  NoGradGuard no_grad;
  for (auto& [name, p] : model.named_parameters()) {
    if (name.find("lora_B") == std::string::npos) continue;
    Tensor r = Tensor::randn(p.shape(), seed++);
    for (int64_t i = 0; i < r.numel(); ++i) r.data<float>()[i] *= scale;
    p.data().copy_(r);
  }
}

// Completion (p, g) of a rollout as one request of its own engine.
Completion alone(const Transformer& model, const std::vector<int64_t>& prompt,
                 const RolloutOptions& opt, int64_t p, int64_t g) {
  Engine engine(std::make_shared<const InferenceModel>(model), EngineOptions{});
  EngineRequest req;
  req.prompt = prompt;
  req.sampling.max_tokens = opt.max_tokens;
  req.sampling.temperature = opt.temperature;
  req.sampling.seed = completion_seed(opt.seed, p, g);
  req.stop_tokens = opt.stop_tokens;
  req.logprobs = 0;
  req.logprobs_at_temperature = true;
  req.output_stop_token = true;
  const std::shared_ptr<RequestHandle> h = engine.submit(std::move(req));
  Completion c;
  for (;;) {
    REQUIRE(engine.step());
    if (std::optional<EngineEvent> ev = h->next(std::chrono::milliseconds(0))) {
      c.tokens.insert(c.tokens.end(), ev->tokens.begin(), ev->tokens.end());
      for (const TokenLogprob& lp : ev->logprobs) c.logprobs.push_back(lp.logprob);
      if (ev->finished) {
        c.stopped = ev->reason == FinishReason::Stop;
        return c;
      }
    }
  }
}

bool same(const Completion& a, const Completion& b) {
  return a.tokens == b.tokens && a.logprobs == b.logprobs && a.stopped == b.stopped;
}

const std::vector<std::vector<int64_t>> kPrompts = {tokens_of(21, 1, 61), tokens_of(5, 2, 61),
                                                    tokens_of(34, 3, 61)};

}  // namespace

TEST_CASE("rollout: logp_old equals a plain forward of prompt and completion", "[rollout]") {
  RolloutOptions opt;
  opt.group_size = 3;
  opt.temperature = 0.7;
  opt.max_tokens = 16;
  opt.stop_tokens = {3, 7};  // some completions stop: the stop token is scored too
  opt.seed = 11;
  for (const std::string kind : {"plain", "lora", "qlora"}) {
    SECTION(kind) {
      Transformer model(test_config(), 5);
      if (kind != "plain") {
        LoRAConfig lora;
        lora.r = 4;
        lora.targets = {"q", "v", "up", "head"};
        add_adapters(model, lora, kind == "qlora" ? "nf4" : "none", 21);
        perturb_lora_b(model, 100, 0.05f);
      }
      const Rollout r = rollout(model, kPrompts, opt);
      CHECK(logprob_error(model, kPrompts, r, opt.temperature) < 2e-6);
      int64_t stopped = 0;
      for (const auto& group : r.groups) {
        for (const Completion& c : group) stopped += c.stopped;
      }
      CHECK(stopped > 0);
      // The weights as they are at the call: a changed adapter (or weight) changes logp_old.
      NoGradGuard no_grad;
      for (auto& [name, p] : model.named_parameters()) {
        if (name.find(kind == "plain" ? "up_proj.weight" : "lora_B") == std::string::npos) continue;
        Tensor d = p.data();
        for (int64_t i = 0; i < d.numel(); ++i) d.data<float>()[i] *= 1.5f;
      }
      const Rollout again = rollout(model, kPrompts, opt);
      CHECK(logprob_error(model, kPrompts, again, opt.temperature) < 2e-6);
      CHECK(again.groups[0][0].logprobs != r.groups[0][0].logprobs);
    }
  }
}

TEST_CASE("rollout: the policy's plain weights are read in place, adapters merged", "[rollout]") {
  Transformer model(test_config(), 5);
  LoRAConfig lora;
  lora.r = 4;
  lora.targets = {"q", "v"};
  add_adapters(model, lora, "none", 21);
  const InferenceModel im(model);
  const auto sd = model.state_dict();
  for (const std::string name : {"model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight",
                                 "model.layers.1.self_attn.k_proj.weight"}) {
    CHECK(im.weights().at(name).raw_data() == sd.at(name).raw_data());
  }
  CHECK(im.weights().count("model.layers.0.self_attn.q_proj.lora_A.weight") == 0);
}

TEST_CASE("rollout: a completion is the same alone, in its group and among many prompts",
          "[rollout]") {
  const Transformer model(test_config(), 6);
  RolloutOptions opt;
  opt.group_size = 3;
  opt.max_tokens = 10;
  opt.stop_tokens = {4};
  opt.seed = 2024;
  const Rollout all = rollout(model, kPrompts, opt);
  RolloutOptions last = opt;
  last.prompt_offset = 2;
  const Rollout one = rollout(model, {kPrompts[2]}, last);
  RolloutOptions few_seats = opt;
  few_seats.max_seqs = 2;
  few_seats.max_batch_tokens = 7;  // prompts in chunks beside the decodes
  const Rollout narrow = rollout(model, kPrompts, few_seats);
  for (int64_t g = 0; g < opt.group_size; ++g) {
    CHECK(same(one.groups[0][g], all.groups[2][g]));
    for (size_t p = 0; p < kPrompts.size(); ++p) {  // blocks shared or copied: as if alone
      CHECK(same(alone(model, kPrompts[p], opt, static_cast<int64_t>(p), g), all.groups[p][g]));
      CHECK(same(narrow.groups[p][g], all.groups[p][g]));
    }
  }
  CHECK(all.groups[2][0].tokens != all.groups[2][1].tokens);  // each completion its own seed
  RolloutOptions other = opt;
  other.seed = 2025;
  CHECK(rollout(model, kPrompts, other).groups[0][0].tokens != all.groups[0][0].tokens);
  CHECK(completion_seed(1, 2, 3) != completion_seed(1, 3, 2));
}

TEST_CASE("rollout: each prompt is prefilled once at G = 4", "[rollout]") {
  const Transformer model(test_config(), 7);
  // The first completion computes its prompt, each other one the last prompt token only
  // (40 tokens: 2 full blocks shared, the third copied; 16: one partial block; 33: 2 full).
  const std::vector<std::vector<int64_t>> prompts = {tokens_of(40, 4, 61), tokens_of(16, 5, 61),
                                                     tokens_of(33, 6, 61), tokens_of(5, 7, 61)};
  RolloutOptions opt;
  opt.group_size = 4;
  opt.max_tokens = 6;
  opt.seed = 3;
  const Rollout r = rollout(model, prompts, opt);
  CHECK(r.stats.prompt_tokens == 4 * (40 + 16 + 33 + 5));
  CHECK(r.stats.cached_prompt_tokens == 3 * (39 + 15 + 32 + 4));
  CHECK(r.stats.prefilled_tokens == (40 + 16 + 33 + 5) + 3 * 4);
  CHECK(r.stats.generated_tokens == 4 * 4 * 6);
  // The shared blocks change nothing: the same completions as with every prompt alone.
  for (int64_t p = 0; p < 4; ++p) {
    RolloutOptions at = opt;
    at.prompt_offset = p;
    const Rollout single = rollout(model, {prompts[p]}, at);
    for (int64_t g = 0; g < 4; ++g) CHECK(same(single.groups[0][g], r.groups[p][g]));
  }
}

TEST_CASE("rollout: a stop token ends a completion and is part of it, else max_tokens",
          "[rollout]") {
  const Transformer model(test_config(), 8);
  RolloutOptions opt;
  opt.group_size = 4;
  opt.max_tokens = 12;
  opt.stop_tokens = {1, 9, 30};
  opt.seed = 77;
  const Rollout r = rollout(model, kPrompts, opt);
  int64_t stopped = 0, full = 0, generated = 0;
  const auto is_stop = [&](int64_t t) {
    return std::find(opt.stop_tokens.begin(), opt.stop_tokens.end(), t) != opt.stop_tokens.end();
  };
  for (const auto& group : r.groups) {
    REQUIRE(group.size() == 4);
    for (const Completion& c : group) {
      REQUIRE(!c.tokens.empty());
      CHECK(c.tokens.size() <= 12);
      CHECK(std::none_of(c.tokens.begin(), c.tokens.end() - 1, is_stop));
      CHECK(c.stopped == is_stop(c.tokens.back()));
      if (!c.stopped) CHECK(c.tokens.size() == 12);
      stopped += c.stopped;
      full += !c.stopped;
      generated += static_cast<int64_t>(c.tokens.size());
    }
  }
  CHECK(stopped > 0);
  CHECK(full > 0);
  CHECK(r.stats.generated_tokens == generated);
  opt.stop_tokens.clear();
  opt.max_tokens = 7;
  const Rollout capped = rollout(model, kPrompts, opt);
  for (const auto& group : capped.groups) {
    for (const Completion& c : group) {
      CHECK(c.tokens.size() == 7);
      CHECK(!c.stopped);
    }
  }
}

TEST_CASE("rollout: bad input is one clear error", "[rollout]") {
  const Transformer model(test_config(), 9);
  RolloutOptions opt;
  opt.group_size = 4;
  opt.max_tokens = 8;
  const auto fails = [&](const std::vector<std::vector<int64_t>>& prompts, const RolloutOptions& o,
                         const std::string& says) {
    CHECK_THROWS_AS(rollout(model, prompts, o), Error);
    CHECK_THROWS_WITH(rollout(model, prompts, o), Catch::Contains(says));
  };
  RolloutOptions one = opt;
  one.group_size = 1;
  fails(kPrompts, one, "the group size must be >= 2");
  fails({kPrompts[0], {}}, opt, "prompt 1 is empty");
  fails({}, opt, "no prompts");
  fails({tokens_of(73, 1, 61)}, opt, "prompt 0 has 73 tokens; with max_tokens 8");  // 73 + 8 > 80
  fails({tokens_of(81, 1, 61)}, opt, "exceed the model's max_seq_len of 80");
  fails({{1, 61}}, opt, "holds token 61, outside the model's vocab of 61");
  RolloutOptions greedy = opt;
  greedy.temperature = 0;
  fails(kPrompts, greedy, "the temperature must be > 0");
  RolloutOptions bad_stop = opt;
  bad_stop.stop_tokens = {-1};
  fails(kPrompts, bad_stop, "stop token -1 is outside");
  CHECK_NOTHROW(rollout(model, {tokens_of(72, 1, 61)}, opt));  // 72 + 8 = 80 fits
}
