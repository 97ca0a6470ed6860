// Fine-tuning a Transformer (nn/adapters/adapters.h, docs/model.md#lora): target parsing,
// the names after add_adapters, merge == unmerged forward in float64 for dense
// (tied and untied, with added vocabulary rows) and MoE models with every
// target, the MoE's grouped adapter path against a per-token loop, NF4 bases
// against dequantized weights, frozen bases that AdamW leaves bit-identical,
// and the errors for bad targets and options.
#include <catch2/catch.hpp>
#include <cmath>
#include <set>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/kernels/nf4.h"
#include "core/storage.h"
#include "nn/adapters/adapters.h"
#include "nn/adapters/lora.h"
#include "inference/model_runner/paged_forward.h"
#include "optim/adamw.h"

using namespace ember;
using namespace ember::nn;
using namespace ember::inference;

namespace {

const std::vector<std::string> kAll{"q", "k", "v", "o", "gate", "up", "down", "head"};

ModelConfig small_config(bool tied, bool bias = false, bool moe = false) {
  std::string j = R"({"vocab_size": 37, "d_model": 16, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1,
                      "ffn_hidden": 24, "max_seq_len": 16, "tie_embeddings": )" +
                  std::string(tied ? "true" : "false") + R"(, "bias": )" +
                  (bias ? "true" : "false");
  if (moe) j += R"(, "moe": {"n_experts": 4, "top_k": 2, "n_shared": 1, "expert_hidden": 12})";
  return ModelConfig::from_json(j + "}");
}

LoRAConfig lora_config(std::vector<std::string> targets, int64_t r = 3, double alpha = 5) {
  LoRAConfig l;
  l.r = r;
  l.alpha = alpha;
  l.targets = std::move(targets);
  return l;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// B = 0 after init would make every adapter a no-op: give them random values.
void randomize_trainable(const Module& m, uint64_t seed) {
  for (const auto& [name, v] : trainable_parameters(m)) {
    v.data().copy_(Tensor::randn(v.shape(), seed++, 0, v.dtype(), 0, 0.3));
  }
}

Tensor ids_for(int64_t vocab, uint64_t seed) {
  std::vector<int64_t> ids(2 * 9);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<int64_t>((i * 7 + seed * 13) % vocab);
  ids[3] = vocab - 1;  // the last id: an added row when rows were added
  return Tensor::from_vector(ids, {2, 9});
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  REQUIRE(va.size() == vb.size());
  double m = 0;
  for (size_t i = 0; i < va.size(); ++i) m = std::max(m, std::abs(va[i] - vb[i]));
  return m;
}

// The merged plain model of a fine-tuned one.
std::unique_ptr<Transformer> merged_model(const Transformer& ft) {
  auto plain = std::make_unique<Transformer>(merged_config(ft.config()), 99, ft.dtype());
  plain->load_state_dict(merged_state_dict(ft));
  plain->eval();
  return plain;
}

}  // namespace

TEST_CASE("parse_lora_targets: list, unknown, empty and duplicate names", "[adapters]") {
  CHECK(parse_lora_targets("q,v") == std::vector<std::string>{"q", "v"});
  CHECK(parse_lora_targets("q,k,v,o,gate,up,down,head") == kAll);
  CHECK(kLoRATargets == kAll);
  CHECK_THROWS_WITH(
      parse_lora_targets("q,x"),
      "--lora-targets: unknown target \"x\" (expected q, k, v, o, gate, up, down, head)");
  CHECK_THROWS_WITH(parse_lora_targets("q,,v"),
                    Catch::StartsWith("--lora-targets: unknown target \"\""));
  CHECK_THROWS_WITH(parse_lora_targets(""),
                    Catch::StartsWith("--lora-targets: unknown target \"\""));
  CHECK_THROWS_WITH(parse_lora_targets("q,q"),
                    Catch::Contains("\"q\"") && Catch::Contains("twice"));
}

TEST_CASE("add_adapters: the model's parameter names plus the adapters, only adapters train",
          "[adapters]") {
  for (bool tied : {true, false}) {
    Transformer model(small_config(tied, false, true), 1);
    std::set<std::string> before;
    for (const auto& [name, v] : model.named_parameters()) before.insert(name);
    add_adapters(model, lora_config(kAll), "none", 5);
    std::set<std::string> base_after, trainable;
    for (const auto& [name, v] : model.named_parameters()) {
      if (v.requires_grad()) {
        trainable.insert(name);
        CHECK((ends_with(name, ".lora_A.weight") || ends_with(name, ".lora_B.weight")));
      } else {
        base_after.insert(name);
      }
    }
    CHECK(base_after == before);
    for (const char* n : {"model.layers.0.self_attn.q_proj.lora_A.weight",
                          "model.layers.1.self_attn.o_proj.lora_B.weight",
                          "model.layers.0.mlp.experts.3.up_proj.lora_A.weight",
                          "model.layers.1.mlp.experts.0.gate_proj.lora_B.weight",
                          "model.layers.0.mlp.shared_experts.0.down_proj.lora_A.weight",
                          "lm_head.lora_A.weight", "lm_head.lora_B.weight"}) {
      INFO(n);
      CHECK(trainable.count(n));
    }
    CHECK_FALSE(trainable.count("model.layers.0.mlp.gate.lora_A.weight"));  // the router: never
    // per layer: q k v o (4) + 4 experts and 1 shared x 3 projections (15), x 2 layers, + head; A
    // and B.
    CHECK(trainable.size() == 2 * (2 * (4 + 15) + 1));
    CHECK(trainable_parameters(model).size() == trainable.size());
    CHECK(model.config().lora->targets == kAll);
    const auto& names = model.named_parameters();
    CHECK(names.back().first == (tied ? "lm_head.lora_B.weight" : "lm_head.lora_B.weight"));
  }
}

TEST_CASE("add_adapters: A drawn in named_parameters order from Generator(seed), B = 0",
          "[adapters]") {
  Transformer model(small_config(false), 1);
  add_adapters(model, lora_config({"q", "v"}), "none", 17);
  Generator gen(17);
  const double bound = 1.0 / 4.0;  // in = d_model = 16
  for (const auto& [name, v] : trainable_parameters(model)) {
    if (ends_with(name, "lora_A.weight")) {
      const Tensor expect = Tensor::rand(v.shape(), gen, DType::Float32, -bound, bound);
      CHECK(max_abs_diff(v.data(), expect) == 0.0);
    } else {
      for (double b : v.data().to_vector<double>()) CHECK(b == 0.0);
    }
  }
}

TEST_CASE(
    "merge == unmerged forward in float64 (1e-10): every target, tied, untied, MoE, added rows",
    "[adapters][merge]") {
  struct Case {
    bool tied, bias, moe;
    int64_t added_rows;
  };
  for (const Case& k :
       {Case{true, false, false, 0}, Case{false, true, false, 0}, Case{true, false, true, 0},
        Case{false, false, true, 3}, Case{true, false, false, 2}}) {
    INFO("tied " << k.tied << " bias " << k.bias << " moe " << k.moe << " added " << k.added_rows);
    Transformer ft(small_config(k.tied, k.bias, k.moe), 2, DType::Float64);
    ft.eval();
    const Tensor ids = ids_for(ft.config().vocab_size, 1);
    const Tensor embedded = ft.embed_tokens().forward(ids).data().clone();
    if (k.added_rows > 0) add_vocab_rows(ft, k.added_rows, 4);
    add_adapters(ft, lora_config(kAll), "none", 3);
    randomize_trainable(ft, 100);
    const Tensor ids2 = ids_for(ft.config().vocab_size, 2);
    const Tensor logits = ft.forward(ids2).logits.data();
    CHECK(logits.size(2) == 37 + k.added_rows);
    const auto plain = merged_model(ft);
    CHECK(plain->config().tie_embeddings == false);  // a head adapter unties
    CHECK(max_abs_diff(plain->forward(ids2).logits.data(), logits) < 1e-10);
    // The embedding forward of old ids is unchanged (only the head side is adapted).
    if (k.added_rows == 0)
      CHECK(max_abs_diff(ft.embed_tokens().forward(ids).data(), embedded) == 0.0);
  }
}

TEST_CASE("merge of q,v only keeps tied embeddings tied", "[adapters][merge]") {
  Transformer ft(small_config(true), 2, DType::Float64);
  add_adapters(ft, lora_config({"q", "v"}), "none", 3);
  randomize_trainable(ft, 7);
  ft.eval();
  const auto plain = merged_model(ft);
  CHECK(plain->config().tie_embeddings);
  CHECK_FALSE(plain->config().lora);
  CHECK(plain->config().to_json() == small_config(true).to_json());
  const Tensor ids = ids_for(37, 3);
  CHECK(max_abs_diff(plain->forward(ids).logits.data(), ft.forward(ids).logits.data()) < 1e-10);
}

namespace {

// The block projection weights of state, each replaced by dequant(quant(w)) (float32 w), the
// values an NF4 model computes with: written here from core/kernels/nf4.h directly.
std::map<std::string, Tensor> dequantized_state(std::map<std::string, Tensor> state, bool dq) {
  for (auto& [name, t] : state) {
    const bool proj = name.find("model.layers.") == 0 && ends_with(name, "_proj.weight");
    if (proj)
      t = kernels::nf4_dequantize(kernels::nf4_quantize(t.to(DType::Float32), dq), t.dtype());
  }
  return state;
}

std::map<std::string, Tensor> cloned(const std::map<std::string, Tensor>& s) {
  std::map<std::string, Tensor> out;
  for (const auto& [k, v] : s) out[k] = v.clone();
  return out;
}

}  // namespace

TEST_CASE("nf4 / nf4-dq model forward equals the model with dequantized weights",
          "[adapters][nf4]") {
  for (bool moe : {false, true}) {
    for (const char* quant : {"nf4", "nf4-dq"}) {
      for (const auto& targets : {std::vector<std::string>{"q", "v"}, kAll}) {
        INFO("moe " << moe << " " << quant << " targets " << targets.size());
        const ModelConfig cfg = small_config(false, true, moe);
        Transformer ft(cfg, 4, DType::Float64);
        ft.eval();
        const auto base = cloned(ft.state_dict());
        add_adapters(ft, lora_config(targets), quant, 6);  // B = 0: the base's forward
        for (const auto& [name, v] : ft.named_parameters()) {
          CHECK_FALSE(ends_with(name, "_proj.weight"));  // NF4 weights are not parameters
        }
        Transformer ref(cfg, 0, DType::Float64);
        ref.load_state_dict(dequantized_state(base, std::string(quant) == "nf4-dq"));
        ref.eval();
        const Tensor ids = ids_for(37, 5);
        CHECK(max_abs_diff(ft.forward(ids).logits.data(), ref.forward(ids).logits.data()) < 1e-10);
        // With trained adapters the merge (NF4 bases dequantized) still equals the forward.
        randomize_trainable(ft, 40);
        CHECK(max_abs_diff(merged_model(ft)->forward(ids).logits.data(),
                           ft.forward(ids).logits.data()) < 1e-10);
      }
    }
  }
}

TEST_CASE("nf4: the float32 weight of a quantized projection is released", "[adapters][nf4]") {
  Transformer model(small_config(true, false, true), 1);
  std::weak_ptr<Storage> q_weight =
      model.state_dict().at("model.layers.0.self_attn.q_proj.weight").storage();
  std::weak_ptr<Storage> expert_up =
      model.state_dict().at("model.layers.1.mlp.experts.2.up_proj.weight").storage();
  std::weak_ptr<Storage> embed = model.state_dict().at("model.embed_tokens.weight").storage();
  REQUIRE_FALSE(q_weight.expired());
  add_adapters(model, lora_config({"q", "v"}), "nf4", 0);
  CHECK(q_weight.expired());
  CHECK(expert_up.expired());
  CHECK_FALSE(embed.expired());  // embeddings are not quantized
  CHECK(model.state_dict().count("model.layers.0.mlp.gate.weight"));  // nor the router
}

namespace {

// Reference MoE layer 0 of model for one token x [C], from tensors by name: base (float weights
// before add_adapters, dequantized when nf4), adapters from the model; plain loops.
std::vector<double> matvec(const Tensor& w, const std::vector<double>& x) {
  const int64_t O = w.size(0), I = w.size(1);
  const auto v = w.to_vector<double>();
  std::vector<double> y(O, 0.0);
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t i = 0; i < I; ++i) y[o] += v[o * I + i] * x[i];
  }
  return y;
}

struct RefMoE {
  std::map<std::string, Tensor> base, adapters;
  bool nf4 = false;
  double scale = 0;

  std::vector<double> proj(const std::string& p, const std::vector<double>& x) const {
    Tensor w = base.at(p + ".weight");
    if (nf4)
      w = kernels::nf4_dequantize(kernels::nf4_quantize(w.to(DType::Float32)), DType::Float64);
    std::vector<double> y = matvec(w, x);
    if (adapters.count(p + ".lora_A.weight")) {
      const auto bax =
          matvec(adapters.at(p + ".lora_B.weight"), matvec(adapters.at(p + ".lora_A.weight"), x));
      for (size_t o = 0; o < y.size(); ++o) y[o] += scale * bax[o];
    }
    return y;
  }
  std::vector<double> ffn(const std::string& p, const std::vector<double>& x) const {  // swiglu
    const auto g = proj(p + ".gate_proj", x), u = proj(p + ".up_proj", x);
    std::vector<double> h(g.size());
    for (size_t i = 0; i < h.size(); ++i) h[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
    return proj(p + ".down_proj", h);
  }
  std::vector<double> forward(const std::vector<double>& x) const {
    const std::string m = "model.layers.0.mlp";
    const auto logits = matvec(base.at(m + ".gate.weight"), x);
    std::vector<double> p(logits.size());
    double z = 0;
    for (size_t e = 0; e < p.size(); ++e) z += p[e] = std::exp(logits[e]);
    for (double& v : p) v /= z;
    size_t first = 0, second = first == 0 ? 1 : 0;
    for (size_t e = 0; e < p.size(); ++e)
      if (p[e] > p[first]) first = e;
    second = first == 0 ? 1 : 0;
    for (size_t e = 0; e < p.size(); ++e)
      if (e != first && p[e] > p[second]) second = e;
    const double w1 = p[first] / (p[first] + p[second]), w2 = p[second] / (p[first] + p[second]);
    const auto y1 = ffn(m + ".experts." + std::to_string(first), x);
    const auto y2 = ffn(m + ".experts." + std::to_string(second), x);
    const auto ys = ffn(m + ".shared_experts.0", x);
    std::vector<double> y(x.size());
    for (size_t c = 0; c < y.size(); ++c) y[c] = w1 * y1[c] + w2 * y2[c] + ys[c];
    return y;
  }
};

}  // namespace

TEST_CASE("MoE with adapted experts (Linear and NF4 bases) against a per-token loop, gradcheck",
          "[adapters][moe]") {
  for (const char* quant : {"none", "nf4"}) {
    INFO(quant);
    Transformer model(small_config(false, false, true), 8, DType::Float64);
    RefMoE ref;
    ref.base = cloned(model.state_dict());
    ref.nf4 = std::string(quant) == "nf4";
    add_adapters(model, lora_config({"gate", "up", "down"}, 3, 6), quant, 9);
    randomize_trainable(model, 50);
    ref.adapters = cloned(model.state_dict());
    ref.scale = 2.0;
    const auto& moe = model.blocks()[0]->moe();
    REQUIRE(moe);
    const int64_t N = 7, C = 16;
    const Variable x(Tensor::randn({N, C}, 77, 0, DType::Float64));
    MoEAux aux;
    const Tensor y = moe->forward(x, aux).data();
    for (int64_t n = 0; n < N; ++n) {
      std::vector<double> xn(C);
      for (int64_t c = 0; c < C; ++c) xn[c] = x.data().at({n, c});
      const auto yn = ref.forward(xn);
      for (int64_t c = 0; c < C; ++c) CHECK(y.at({n, c}) == Approx(yn[c]).margin(1e-10));
    }
    // Routing does not depend on the adapters: a smooth function of them.
    std::vector<Variable> inputs;
    for (const auto& [name, v] : model.named_parameters()) {
      if (name.find("layers.0.mlp.experts.1.up_proj.lora") != std::string::npos ||
          name.find("layers.0.mlp.experts.2.down_proj.lora_B") != std::string::npos ||
          name.find("layers.0.mlp.shared_experts.0.gate_proj.lora_A") != std::string::npos) {
        inputs.push_back(v);
      }
    }
    REQUIRE(inputs.size() == 4);
    const auto r =
        gradcheck([&](const std::vector<Variable>&) { return moe->forward(x, aux); }, inputs);
    INFO(r.message);
    CHECK(r.ok);
  }
}

TEST_CASE("fine-tune steps: frozen tensors get no .grad and stay bit-identical under AdamW",
          "[adapters]") {
  for (const char* quant : {"none", "nf4"}) {
    Transformer model(small_config(false, true, true), 3);
    add_vocab_rows(model, 2, 11);
    add_adapters(model, lora_config(kAll), quant, 12);
    const auto frozen_before = cloned(model.state_dict());
    const auto trainable = trainable_parameters(model);
    optim::AdamW opt(optim::decay_groups(trainable, 0.1));
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      const Tensor ids = ids_for(model.config().vocab_size, step);
      const Tensor targets = ids_for(model.config().vocab_size, step + 7);
      model.loss(model.forward(ids), targets).total.backward();
      for (const auto& [name, v] : model.named_parameters()) {
        INFO(name);
        if (!v.requires_grad()) CHECK_FALSE(v.grad().defined());
      }
      opt.step(1e-2);
    }
    size_t changed = 0;
    for (const auto& [name, v] : model.named_parameters()) {
      INFO(name);
      const double diff = max_abs_diff(v.data(), frozen_before.at(name));
      if (v.requires_grad()) {
        changed += diff > 0;  // (an expert no token picked keeps its adapters)
      } else {
        CHECK(diff == 0.0);
      }
    }
    CHECK(changed > trainable.size() / 2);
    CHECK(model.named_parameters().front().first == "model.embed_tokens.weight");
  }
}

TEST_CASE("add_vocab_rows: new ids read the added rows, old rows frozen", "[adapters]") {
  for (bool tied : {true, false}) {
    Transformer model(small_config(tied), 3, DType::Float64);
    add_vocab_rows(model, 3, 21);
    CHECK(model.config().vocab_size == 40);
    std::vector<std::string> frozen;
    for (const auto& [name, v] : model.named_parameters()) {
      if (!v.requires_grad()) frozen.push_back(name);
    }
    const auto state = model.state_dict();
    CHECK(state.at("model.embed_tokens.added_rows").shape() == Shape{3, 16});
    if (tied) {
      CHECK(frozen == std::vector<std::string>{"model.embed_tokens.weight"});
    } else {
      CHECK(frozen == std::vector<std::string>{"model.embed_tokens.weight", "lm_head.weight"});
      CHECK(state.at("lm_head.added_rows").shape() == Shape{3, 16});
    }
    Generator gen(21);
    const Tensor rows = Tensor::randn({3, 16}, gen, DType::Float64, 0, 0.02);
    const Tensor e = model.embed_tokens()
                         .forward(Tensor::from_vector(std::vector<int64_t>{38, 2}, {1, 2}))
                         .data();
    const Tensor w = model.embed_tokens().weight().data();
    for (int64_t c = 0; c < 16; ++c) {
      CHECK(e.at({0, 0, c}) == rows.at({1, c}));
      CHECK(e.at({0, 1, c}) == w.at({2, c}));
    }
    CHECK(model.forward(ids_for(40, 1)).logits.size(2) == 40);
  }
}

TEST_CASE("LoRALinear over an NF4 base: float64 gradcheck w.r.t. x, A, B, merge dequantizes",
          "[adapters][nf4][gradcheck]") {
  for (bool bias : {false, true}) {
    Generator gen(5);
    Linear lin(70, 6, bias, gen, 0.5, DType::Float64);
    if (bias) lin.bias().data().copy_(Tensor::randn({6}, 3, 0, DType::Float64));
    auto nf4 = Nf4Linear::quantize(lin, true);
    LoRALinear lora(nf4, {2, 3, 0}, gen, nullptr, DType::Float64);
    lora.lora_B().data().copy_(Tensor::randn({6, 2}, 9, 0, DType::Float64));
    const Variable x(Tensor::randn({2, 3, 70}, 10, 0, DType::Float64), true);
    const auto r = gradcheck([&](const std::vector<Variable>& in) { return lora.forward(in[0]); },
                             {x, lora.lora_A(), lora.lora_B()});
    INFO(r.message);
    CHECK(r.ok);
    // y = x dequant(W)^T + b + 1.5 x A^T B^T, summed here.
    const Tensor wd = kernels::nf4_dequantize(*nf4->weight(), DType::Float64);
    const Tensor y = lora.forward(x).data();
    const Tensor a = lora.lora_A().data(), b = lora.lora_B().data();
    for (int64_t o = 0; o < 6; ++o) {
      double ref = bias ? lin.bias().data().at({o}) : 0.0;
      for (int64_t c = 0; c < 70; ++c) {
        double ba = 0;
        for (int64_t k = 0; k < 2; ++k) ba += b.at({o, k}) * a.at({k, c});
        ref += x.data().at({1, 2, c}) * (wd.at({o, c}) + 1.5 * ba);
      }
      CHECK(y.at({1, 2, o}) == Approx(ref).margin(1e-10));
    }
    CHECK(max_abs_diff(lora.merge()->forward(x).data(), y) < 1e-10);
  }
}

TEST_CASE("add_adapters errors: unknown target, r 0, bad quantize, nothing changed", "[adapters]") {
  Transformer model(small_config(true), 1);
  const auto names = model.named_parameters().size();
  CHECK_THROWS_WITH(
      add_adapters(model, lora_config({"q", "x"}), "none", 0),
      "--lora-targets: unknown target \"x\" (expected q, k, v, o, gate, up, down, head)");
  CHECK_THROWS_WITH(add_adapters(model, lora_config({"q"}, 0), "none", 0),
                    Catch::Contains("r must be >= 1, got 0"));
  CHECK_THROWS_WITH(add_adapters(model, lora_config({"q"}, 2, 0), "none", 0),
                    Catch::Contains("alpha"));
  CHECK_THROWS_WITH(add_adapters(model, lora_config({"q"}), "int4", 0), Catch::Contains("int4"));
  CHECK(model.named_parameters().size() == names);
  for (const auto& [name, v] : model.named_parameters()) CHECK(v.requires_grad());
  CHECK_FALSE(model.config().lora);
  add_adapters(model, lora_config({"q"}), "none", 0);
  CHECK_THROWS_WITH(add_adapters(model, lora_config({"v"}), "none", 0), Catch::Contains("already"));
  CHECK_THROWS_WITH(add_vocab_rows(model, 2, 0), Catch::Contains("before add_adapters"));
}

TEST_CASE("replace_module: only replaceable children, of the slot's type", "[adapters]") {
  Transformer model(small_config(false), 1);
  CHECK_THROWS_WITH(model.replace_module("model", std::make_shared<Linear>(Tensor::zeros({2, 2}))),
                    Catch::Contains("\"model\" is not a replaceable child"));
  Generator gen(1);
  CHECK_THROWS_WITH(model.replace_module("lm_head", std::make_shared<Embedding>(4, 16, gen)),
                    Catch::Contains("\"lm_head\" takes a module of its slot's type"));
}

TEST_CASE("LoRA dropout draws from the model's dropout stream, in train mode only", "[adapters]") {
  Transformer model(small_config(true), 1, DType::Float64);
  LoRAConfig lora = lora_config({"q", "v"});
  lora.dropout = 0.5;
  add_adapters(model, lora, "none", 2);
  randomize_trainable(model, 3);
  const Tensor ids = ids_for(37, 1);
  const uint64_t offset = model.dropout_generator().offset;
  model.train();
  const Tensor a = model.forward(ids).logits.data();
  CHECK(model.dropout_generator().offset > offset);
  model.eval();
  const uint64_t eval_offset = model.dropout_generator().offset;
  const Tensor b = model.forward(ids).logits.data();
  CHECK(model.dropout_generator().offset == eval_offset);
  CHECK(max_abs_diff(a, b) > 1e-6);
  CHECK(max_abs_diff(merged_model(model)->forward(ids).logits.data(), b) < 1e-10);
}

// The paged forward is float32 only: it runs the merged weights rounded to float32, against
// the float64 forward of the unmerged model. Rounding the weights (2^-24 relative) and float32
// arithmetic came to 8.2e-7 of the logits' scale (max |logit|) here; the bound 1e-5 is
// test_generation.cpp's.
TEST_CASE("a fine-tuned model's paged inference equals its float64 forward", "[adapters]") {
  Transformer model(small_config(true, false, true), 1, DType::Float64);
  add_vocab_rows(model, 2, 5);
  add_adapters(model, lora_config(kAll), "nf4", 2);
  randomize_trainable(model, 8);
  model.eval();
  const Tensor ids = ids_for(39, 4);  // two sequences of 9
  const Tensor full = model.forward(ids).logits.data();
  const InferenceModel im(model);
  PagedKVStore kv(im.config(), 2);
  const std::vector<int32_t> tables[2] = {{0}, {1}};
  std::vector<int64_t> toks[2];
  for (int64_t b = 0; b < 2; ++b) toks[b] = ids.select(0, b).contiguous().to_vector<int64_t>();
  // Both sequences in one batch, in two chunks: positions 0-4, then 5-8.
  const auto chunks = [&](int64_t pos0, int64_t n) {
    std::vector<SeqChunk> c;
    for (int64_t b = 0; b < 2; ++b) c.push_back({toks[b].data() + pos0, n, pos0, &tables[b], true});
    return c;
  };
  const Tensor first = im.forward(chunks(0, 5), kv), rest = im.forward(chunks(5, 4), kv);
  const int64_t V = full.size(2);
  REQUIRE(V == 39);
  const double scale = max_abs_diff(full, Tensor::zeros(full.shape(), DType::Float64));
  double err = 0;
  for (int64_t b = 0; b < 2; ++b) {
    const Tensor got0 = first.narrow(0, b * 5, 5), got1 = rest.narrow(0, b * 4, 4);
    err = std::max(err, max_abs_diff(got0, full.select(0, b).narrow(0, 0, 5)));
    err = std::max(err, max_abs_diff(got1, full.select(0, b).narrow(0, 5, 4)));
  }
  INFO("max diff " << err << " scale " << scale);
  CHECK(err < 1e-5 * scale);
}
