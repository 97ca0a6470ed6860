// nn modules one at a time: Module API (names, state dicts, train/eval),
// float64 gradchecks of every module alone, and MoE routing and auxiliary
// losses against values computed here.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/moe.h"
#include "nn/transformer.h"

using namespace ember;
using namespace ember::nn;

static Variable randv(const Shape& s, uint64_t seed, bool grad = true) {
  return Variable(Tensor::randn(s, seed, 0, DType::Float64), grad);
}

// Gradcheck of a module: w.r.t. its input and all its parameters.
template <class F>
static void check_module(const Module& m, const Variable& x, F forward) {
  std::vector<Variable> inputs{x};
  for (const Variable& p : m.parameters()) inputs.push_back(p);
  const GradcheckResult r = gradcheck([&](const std::vector<Variable>& in) { return forward(in[0]); }, inputs);
  INFO(r.message);
  REQUIRE(r.ok);
}

TEST_CASE("Module: named parameters, state dict round trip and errors", "[nn]") {
  Generator gen(1);
  Linear lin(3, 2, true, gen, 0.02, DType::Float64);
  auto names = lin.named_parameters();
  REQUIRE(names.size() == 2);
  CHECK(names[0].first == "weight");
  CHECK(names[1].first == "bias");
  auto sd = lin.state_dict();
  Generator gen2(2);
  Linear other(3, 2, true, gen2, 0.02, DType::Float64);
  other.load_state_dict(sd);
  CHECK(other.state_dict().at("weight").to_vector<double>() == sd.at("weight").to_vector<double>());
  auto missing = sd;
  missing.erase("bias");
  CHECK_THROWS_WITH(other.load_state_dict(missing), Catch::Contains("missing") && Catch::Contains("bias"));
  auto extra = sd;
  extra["scale"] = Tensor::zeros({1});
  CHECK_THROWS_WITH(other.load_state_dict(extra), Catch::Contains("unexpected") && Catch::Contains("scale"));
  auto wrong = sd;
  wrong["weight"] = Tensor::zeros({2, 4});
  CHECK_THROWS_WITH(other.load_state_dict(wrong), Catch::Contains("weight") && Catch::Contains("[2, 4]"));
  other.load_state_dict(missing, /*strict=*/false);
}

TEST_CASE("Module: train/eval propagate, EvalModeGuard restores, zero_grad drops gradients", "[nn]") {
  const ModelConfig c = ModelConfig::from_json(R"({"vocab_size": 10, "d_model": 8, "n_layers": 1, "n_heads": 2, "dropout": 0.5})");
  Transformer m(c, 1, DType::Float64);
  m.eval();
  for (const auto& [n, child] : m.children()) CHECK_FALSE(child->is_training());
  const Tensor ids = Tensor::from_vector<int64_t>({1, 2, 3}, {1, 3});
  // In eval mode dropout is off: two forwards agree.
  NoGradGuard g;
  CHECK(m.forward(ids).logits.data().to_vector<double>() == m.forward(ids).logits.data().to_vector<double>());
  m.train();
  CHECK(m.forward(ids).logits.data().to_vector<double>() != m.forward(ids).logits.data().to_vector<double>());
  {  // EvalModeGuard: eval mode for the scope, the mode before it restored after
    const EvalModeGuard guard(m);
    CHECK_FALSE(m.is_training());
    for (const auto& [n, child] : m.children()) CHECK_FALSE(child->is_training());
    CHECK(m.forward(ids).logits.data().to_vector<double>() == m.forward(ids).logits.data().to_vector<double>());
  }
  CHECK(m.is_training());
  for (const auto& [n, child] : m.children()) CHECK(child->is_training());
  m.eval();
  { const EvalModeGuard guard(m); }
  CHECK_FALSE(m.is_training());
}

TEST_CASE("gradcheck of each module alone", "[nn][gradcheck]") {
  Generator gen(3);
  SECTION("Linear with and without bias") {
    Linear a(5, 3, true, gen, 0.5, DType::Float64), b(5, 3, false, gen, 0.5, DType::Float64);
    check_module(a, randv({2, 4, 5}, 1), [&](const Variable& x) { return a.forward(x); });
    check_module(b, randv({4, 5}, 2), [&](const Variable& x) { return b.forward(x); });
  }
  SECTION("Embedding with repeated ids") {
    Embedding e(6, 3, gen, 1.0, DType::Float64);
    const Tensor ids = Tensor::from_vector<int64_t>({1, 5, 1, 0}, {2, 2});
    std::vector<Variable> inputs = e.parameters();
    auto r = gradcheck([&](const std::vector<Variable>&) { return e.forward(ids); }, inputs);
    INFO(r.message);
    REQUIRE(r.ok);
  }
  SECTION("RMSNorm and LayerNorm") {
    RMSNorm rn(6, 1e-5, DType::Float64);
    LayerNorm ln(6, 1e-5, true, DType::Float64);
    check_module(rn, randv({3, 6}, 3), [&](const Variable& x) { return rn.forward(x); });
    check_module(ln, randv({3, 6}, 4), [&](const Variable& x) { return ln.forward(x); });
  }
  SECTION("FFN with every activation") {
    for (const std::string act : {"swiglu", "geglu", "gelu", "gelu_tanh", "relu"}) {
      INFO(act);
      FFN f(4, 6, act, true, gen, 0.5, DType::Float64);
      check_module(f, randv({2, 3, 4}, 5), [&](const Variable& x) { return f.forward(x); });
    }
  }
  SECTION("Attention: GQA, QK-norm, RoPE, window, softcap") {
    AttentionOptions opt;
    opt.d_model = 8;
    opt.n_heads = 4;
    opt.n_kv_heads = 2;
    opt.head_dim = 2;
    opt.qk_norm = true;
    opt.bias = true;
    opt.window = 3;
    opt.softcap = 1.0;
    auto rotary = std::make_shared<RotaryEmbedding>(2, 16, 10000.0, DType::Float64);
    Attention a(opt, rotary, std::make_shared<Generator>(0), gen, DType::Float64);
    check_module(a, randv({2, 5, 8}, 6), [&](const Variable& x) { return a.forward(x); });
  }
  SECTION("MoE with a shared expert") {
    MoEConfig mc;
    mc.n_experts = 3;
    mc.top_k = 2;
    mc.expert_hidden = 5;
    mc.n_shared = 1;
    MoE moe(4, mc, "swiglu", false, gen, 0.5, DType::Float64);
    check_module(moe, randv({2, 3, 4}, 7), [&](const Variable& x) {
      MoEAux aux;
      Variable y = moe.forward(x, aux);
      return sum(y * y) + aux.aux + aux.router_z;
    });
  }
  SECTION("TransformerBlock, sequential and parallel") {
    for (const char* parallel : {"false", "true"}) {
      const ModelConfig c = ModelConfig::from_json(std::string(R"({"d_model": 8, "n_heads": 2, "ffn_hidden": 6, "parallel_block": )") + parallel + "}");
      auto rotary = std::make_shared<RotaryEmbedding>(4, 16, 10000.0, DType::Float64);
      TransformerBlock blk(c, 0, rotary, std::make_shared<Generator>(0), gen, DType::Float64);
      std::vector<MoEAux> aux;
      check_module(blk, randv({1, 4, 8}, 8), [&](const Variable& x) { return blk.forward(x, aux); });
    }
  }
}

TEST_CASE("MoE routes top-k by probability and computes its aux and router-z losses", "[nn][moe]") {
  Generator gen(4);
  MoEConfig mc;
  mc.n_experts = 4;
  mc.top_k = 2;
  mc.expert_hidden = 3;
  MoE moe(5, mc, "relu", false, gen, 0.5, DType::Float64);
  const Variable x = randv({6, 5}, 9, false);
  MoEAux aux;
  const Variable y = moe.forward(x, aux);
  // Recompute routing here from the router weight.
  const Tensor wr = moe.state_dict().at("gate.weight");  // [E, C]
  std::vector<int64_t> counts(4, 0);
  std::vector<double> p_mean(4, 0.0);
  double z = 0;
  for (int64_t n = 0; n < 6; ++n) {
    std::vector<double> r(4);
    double m = -1e300;
    for (int64_t e = 0; e < 4; ++e) {
      r[e] = 0;
      for (int64_t c = 0; c < 5; ++c) r[e] += x.data().at({n, c}) * wr.at({e, c});
      m = std::max(m, r[e]);
    }
    double s = 0;
    for (double v : r) s += std::exp(v - m);
    const double lse = m + std::log(s);
    z += lse * lse;
    std::vector<int64_t> order{0, 1, 2, 3};
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return r[a] > r[b]; });
    counts[order[0]]++;
    counts[order[1]]++;
    for (int64_t e = 0; e < 4; ++e) p_mean[e] += std::exp(r[e] - lse) / 6;
  }
  CHECK(moe.expert_counts() == counts);
  double want_aux = 0;
  for (int64_t e = 0; e < 4; ++e) want_aux += 4 * (counts[e] / 12.0) * p_mean[e];
  CHECK(aux.aux.item() == Approx(want_aux).epsilon(1e-12));
  CHECK(aux.router_z.item() == Approx(z / 6).epsilon(1e-12));
  CHECK(y.shape() == Shape{6, 5});
}
