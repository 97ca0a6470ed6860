// The whole Transformer: parameter names and shapes against docs/model.md#parameter-names,
// float64 gradchecks of a tiny model for each feature combination, float32 vs
// float64 agreement, and overfitting one batch with a hand-written SGD loop.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "autograd/gradcheck.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/sizing/model_stats.h"
#include "nn/transformer.h"
#include "random_ids.h"

using namespace ember;
using namespace ember::nn;

using ember::testing::random_ids;

TEST_CASE("parameter names and shapes follow the documented names", "[transformer]") {
  const ModelConfig c = ModelConfig::from_json(R"({"vocab_size": 50, "d_model": 16, "n_layers": 2,
    "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 24, "qk_norm": true, "tie_embeddings": false,
    "moe": {"n_experts": 3, "top_k": 2, "expert_hidden": 8, "n_shared": 1, "every": 2}})");
  Transformer model(c, 1);
  std::map<std::string, Shape> got;
  for (const auto& [name, v] : model.named_parameters()) got[name] = v.shape();
  std::map<std::string, Shape> want = {
      {"model.embed_tokens.weight", {50, 16}},
      {"model.norm.weight", {16}},
      {"lm_head.weight", {50, 16}},
  };
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    want[p + "input_layernorm.weight"] = {16};
    want[p + "post_attention_layernorm.weight"] = {16};
    want[p + "self_attn.q_proj.weight"] = {16, 16};
    want[p + "self_attn.k_proj.weight"] = {8, 16};
    want[p + "self_attn.v_proj.weight"] = {8, 16};
    want[p + "self_attn.o_proj.weight"] = {16, 16};
    want[p + "self_attn.q_norm.weight"] = {4};
    want[p + "self_attn.k_norm.weight"] = {4};
  }
  // Layer 0 is dense, layer 1 is MoE (every = 2).
  want["model.layers.0.mlp.gate_proj.weight"] = {24, 16};
  want["model.layers.0.mlp.up_proj.weight"] = {24, 16};
  want["model.layers.0.mlp.down_proj.weight"] = {16, 24};
  want["model.layers.1.mlp.gate.weight"] = {3, 16};
  for (const std::string e : {"experts.0", "experts.1", "experts.2", "shared_experts.0"}) {
    want["model.layers.1.mlp." + e + ".gate_proj.weight"] = {8, 16};
    want["model.layers.1.mlp." + e + ".up_proj.weight"] = {8, 16};
    want["model.layers.1.mlp." + e + ".down_proj.weight"] = {16, 8};
  }
  CHECK(got == want);
}

TEST_CASE("GPT-2 family names: layernorm biases, learned positions, Linear biases, tied head",
          "[transformer]") {
  const ModelConfig c = ModelConfig::from_json(R"({"vocab_size": 20, "d_model": 8, "n_layers": 1,
    "n_heads": 2, "norm": "layernorm", "ffn_act": "gelu_tanh", "pos": "learned", "bias": true,
    "max_seq_len": 12})");
  Transformer model(c, 1);
  std::map<std::string, Shape> got;
  for (const auto& [name, v] : model.named_parameters()) got[name] = v.shape();
  const std::string p = "model.layers.0.";
  std::map<std::string, Shape> want = {
      {"model.embed_tokens.weight", {20, 8}},
      {"model.embed_positions.weight", {12, 8}},
      {"model.norm.weight", {8}},
      {"model.norm.bias", {8}},
      {p + "input_layernorm.weight", {8}},
      {p + "input_layernorm.bias", {8}},
      {p + "post_attention_layernorm.weight", {8}},
      {p + "post_attention_layernorm.bias", {8}},
      {p + "self_attn.q_proj.weight", {8, 8}},
      {p + "self_attn.q_proj.bias", {8}},
      {p + "self_attn.k_proj.weight", {8, 8}},
      {p + "self_attn.k_proj.bias", {8}},
      {p + "self_attn.v_proj.weight", {8, 8}},
      {p + "self_attn.v_proj.bias", {8}},
      {p + "self_attn.o_proj.weight", {8, 8}},
      {p + "self_attn.o_proj.bias", {8}},
      {p + "mlp.up_proj.weight", {32, 8}},
      {p + "mlp.up_proj.bias", {32}},
      {p + "mlp.down_proj.weight", {8, 32}},
      {p + "mlp.down_proj.bias", {8}},
  };
  CHECK(got == want);
}

TEST_CASE("initialisation: std 0.02, residual outputs scaled, norms 1, seeded", "[transformer]") {
  const ModelConfig c = ModelConfig::from_json(R"({"vocab_size": 512, "d_model": 64, "n_layers": 8,
    "n_heads": 4, "ffn_hidden": 256})");
  Transformer a(c, 7), b(c, 7), other(c, 8);
  auto std_of = [](const Tensor& t) {
    auto v = t.to_vector<double>();
    double s = 0, ss = 0;
    for (double x : v) s += x, ss += x * x;
    const double m = s / v.size();
    return std::sqrt(ss / v.size() - m * m);
  };
  const auto pa = a.state_dict(), pb = b.state_dict(), po = other.state_dict();
  CHECK(std_of(pa.at("model.embed_tokens.weight")) == Approx(0.02).epsilon(0.05));
  CHECK(std_of(pa.at("model.layers.0.mlp.up_proj.weight")) == Approx(0.02).epsilon(0.05));
  CHECK(std_of(pa.at("model.layers.0.mlp.down_proj.weight")) == Approx(0.02 / 4).epsilon(0.05));
  CHECK(std_of(pa.at("model.layers.0.self_attn.o_proj.weight")) == Approx(0.02 / 4).epsilon(0.1));
  CHECK(pa.at("model.norm.weight").to_vector<float>() == std::vector<float>(64, 1.0f));
  CHECK(pa.at("model.layers.3.self_attn.q_proj.weight").to_vector<float>() ==
        pb.at("model.layers.3.self_attn.q_proj.weight").to_vector<float>());
  CHECK(pa.at("model.layers.3.self_attn.q_proj.weight").to_vector<float>() !=
        po.at("model.layers.3.self_attn.q_proj.weight").to_vector<float>());
}

// A tiny model of a given feature set, in float64, checked end to end.
static void check_model_gradients(const std::string& json) {
  const ModelConfig c = ModelConfig::from_json(json);
  Transformer model(c, 3, DType::Float64);
  const Tensor ids = random_ids(2, 5, c.vocab_size, 11);
  const Tensor targets = random_ids(2, 5, c.vocab_size, 12);
  const auto params = model.parameters();
  auto fn = [&](const std::vector<Variable>&) { return model.loss(model.forward(ids), targets).total; };
  const GradcheckResult r = gradcheck(fn, params);
  INFO(json);
  INFO(r.message);
  CHECK(r.ok);
}

static const char* kTiny = R"("vocab_size": 11, "d_model": 8, "n_layers": 2, "n_heads": 2, "ffn_hidden": 12, "max_seq_len": 8)";

TEST_CASE("gradcheck of a tiny Transformer for each feature combination", "[transformer][gradcheck]") {
  const std::string t = kTiny;
  SECTION("MHA") { check_model_gradients("{" + t + "}"); }
  SECTION("GQA, qk_norm, z-loss") {
    check_model_gradients(R"({"vocab_size": 11, "d_model": 16, "n_layers": 2, "n_heads": 4,
      "n_kv_heads": 2, "ffn_hidden": 12, "qk_norm": true, "z_loss_coef": 0.1})");
  }
  SECTION("MQA") {
    check_model_gradients(R"({"vocab_size": 11, "d_model": 12, "n_layers": 1, "n_heads": 3,
      "n_kv_heads": 1, "ffn_hidden": 12})");
  }
  SECTION("both soft-caps") {
    check_model_gradients("{" + t + R"(, "attn_softcap": 0.5, "final_softcap": 2.0})");
  }
  SECTION("sliding window + global_every") {
    check_model_gradients("{" + t + R"(, "n_layers": 3, "sliding_window": 2, "global_every": 2})");
  }
  SECTION("parallel block, geglu") {
    check_model_gradients("{" + t + R"(, "parallel_block": true, "ffn_act": "geglu"})");
  }
  SECTION("GPT-2 family: layernorm, gelu_tanh, learned positions, bias") {
    check_model_gradients("{" + t + R"(, "norm": "layernorm", "ffn_act": "gelu_tanh", "pos": "learned", "bias": true})");
  }
  SECTION("sinusoidal positions, relu, gelu") {
    check_model_gradients("{" + t + R"(, "pos": "sinusoidal", "ffn_act": "relu"})");
    check_model_gradients("{" + t + R"(, "pos": "none", "ffn_act": "gelu"})");
  }
  SECTION("untied head") { check_model_gradients("{" + t + R"(, "tie_embeddings": false})"); }
  SECTION("MoE with shared experts and both auxiliary losses, every = 1") {
    check_model_gradients("{" + t + R"(, "moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 6,
      "n_shared": 1, "aux_loss_coef": 0.1, "router_z_loss_coef": 0.05}})");
  }
  SECTION("MoE every = 2, top-1 without renormalisation") {
    check_model_gradients("{" + t + R"(, "moe": {"n_experts": 3, "top_k": 1, "expert_hidden": 6,
      "every": 2, "norm_topk_prob": false, "aux_loss_coef": 0.1, "router_z_loss_coef": 0.05}})");
  }
}

TEST_CASE("float32 and float64 forwards agree", "[transformer]") {
  const ModelConfig c = ModelConfig::from_json(R"({"vocab_size": 64, "d_model": 32, "n_layers": 2,
    "n_heads": 4, "n_kv_heads": 2, "qk_norm": true, "z_loss_coef": 1e-4,
    "moe": {"n_experts": 4, "top_k": 2, "n_shared": 1}})");
  Transformer m64(c, 5, DType::Float64), m32(c, 5, DType::Float32);
  m32.load_state_dict(m64.state_dict());
  const Tensor ids = random_ids(2, 16, 64, 1), targets = random_ids(2, 16, 64, 2);
  NoGradGuard no_grad;
  const auto o64 = m64.forward(ids), o32 = m32.forward(ids);
  const auto a = o64.logits.data().to_vector<double>(), b = o32.logits.data().to_vector<double>();
  double max_err = 0;
  for (size_t i = 0; i < a.size(); ++i) max_err = std::max(max_err, std::abs(a[i] - b[i]));
  CHECK(max_err < 1e-4);
  CHECK(m64.loss(o64, targets).ce == Approx(m32.loss(o32, targets).ce).epsilon(1e-5));
}

TEST_CASE("a model overfits one fixed batch with plain SGD", "[transformer]") {
  const ModelConfig c = ModelConfig::from_json(R"({"vocab_size": 32, "d_model": 32, "n_layers": 2,
    "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 64, "max_seq_len": 16})");
  Transformer model(c, 9);
  const Tensor ids = random_ids(4, 16, 32, 3), targets = random_ids(4, 16, 32, 4);
  double first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    model.zero_grad();
    LossTerms l = model.loss(model.forward(ids), targets);
    l.total.backward();
    if (step == 0) first = l.ce;
    last = l.ce;
    NoGradGuard no_grad;
    for (const Variable& p : model.parameters()) {
      Tensor d = p.data();
      auto* w = d.data<float>();
      const auto* g = p.grad().data<float>();
      for (int64_t i = 0; i < d.numel(); ++i) w[i] -= 0.5f * g[i];
    }
    if (last < 0.05) break;
  }
  INFO("first loss " << first << ", last " << last);
  CHECK(first > 3.0);
  CHECK(last < 0.1);
}

TEST_CASE("model_stats counts match the built model's parameters", "[transformer][info]") {
  for (const char* json :
       {R"({"vocab_size": 50, "d_model": 16, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "qk_norm": true})",
        R"({"vocab_size": 20, "d_model": 8, "n_layers": 3, "n_heads": 2, "norm": "layernorm",
            "ffn_act": "gelu_tanh", "pos": "learned", "bias": true, "tie_embeddings": false})",
        R"({"vocab_size": 30, "d_model": 16, "n_layers": 2, "n_heads": 2, "parallel_block": true,
            "moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 8, "n_shared": 1, "every": 2}})"}) {
    INFO(json);
    const ModelConfig c = ModelConfig::from_json(json);
    Transformer model(c, 1);
    int64_t total = 0, experts_per_layer = 0, expert_size = 0;
    for (const auto& [name, v] : model.named_parameters()) {
      total += v.numel();
      if (name.find(".mlp.experts.") != std::string::npos) {
        experts_per_layer += v.numel();
        if (name.find(".mlp.experts.0.") != std::string::npos) expert_size += v.numel();
      }
    }
    const nn::ModelStats s = nn::model_stats(c);
    CHECK(s.total_params == total);
    if (c.moe) {
      // One MoE layer: E experts stored, top_k used per token.
      CHECK(s.active_params == total - experts_per_layer + c.moe->top_k * expert_size);
    } else {
      CHECK(s.active_params == total);
    }
    CHECK(s.kv_cache_bytes_per_token == c.n_layers * 2 * c.n_kv_heads * c.head_dim * 4);
  }
}

TEST_CASE("model_stats FLOPs per token and their attention part match a hand count", "[transformer][info]") {
  // d 16; 4 query heads of 4 dims (qd 16), 2 kv heads (kvd 8); SwiGLU hidden 32; vocab 50, tied.
  // Layers 0 and 1 attend a window of 8 keys, layer 2 (global_every 3) all T = 20.
  const ModelConfig c = ModelConfig::from_json(
      R"({"vocab_size": 50, "d_model": 16, "n_layers": 3, "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 32,
          "sliding_window": 8, "global_every": 3, "max_seq_len": 32})");
  const nn::ModelStats s = nn::model_stats(c, 2, 20);
  // Per token and layer, forward: Q K^T and P V, each 4 heads x T_eff keys x 4 dims multiply-adds (2 FLOP);
  // backward: two products per forward one (dQ and dK; dP and dV), so 3x the forward in all.
  const double attention = 3.0 * 2 * (2 * 4 * 4) * (8 + 8 + 20);
  CHECK(attention == 6912);
  CHECK(s.attention_flops_per_token == attention);
  // The weights a token multiplies with: per layer q 16x16, k and v 16x8, o 16x16, gate / up / down 16x32;
  // then the (tied) lm head 50x16. 2 FLOP per weight forward, 4 backward.
  const double weights = 3 * (256 + 128 + 128 + 256 + 3 * 512) + 50 * 16;
  CHECK(s.flops_per_token == 6 * weights + attention);
}
