// Activation checkpointing (autograd/recompute.h, Transformer::set_activation_checkpointing):
// the engine's several-output backward; recompute() against the plain function bit for bit
// (dropout replayed, the generator left where the plain run leaves it, auxiliary outputs
// back-propagated); whole models (dense with dropout, MoE with both auxiliary losses, tied and
// untied heads, parallel blocks, gradient accumulation, bf16 autocast, the padding mask, LoRA
// and QLoRA) with and without checkpointing, bit for bit; float64 gradchecks through it.
#include <catch2/catch.hpp>
#include <cstring>
#include <map>

#include "autograd/autocast.h"
#include "autograd/recompute.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/adapters/adapters.h"
#include "nn/transformer.h"

using namespace ember;
using namespace ember::nn;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(),
                     static_cast<size_t>(ca.numel()) * dtype_size(ca.dtype())) == 0;
}

Tensor random_ids(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  return Tensor::rand({B, T}, seed, 0, DType::Float64, 0, static_cast<double>(V)).to(DType::Int64);
}

}  // namespace

TEST_CASE("backward from several outputs sums their contributions in one pass", "[checkpoint]") {
  const Variable x(Tensor::from_vector(std::vector<float>{1, 2, 3}), true);
  const Variable a = x * 2.0;
  const Variable b = a * 3.0, c = sum(a * 5.0);
  backward({b, c}, {Tensor::ones({3}), Tensor()});
  CHECK(x.grad().to_vector<float>() == std::vector<float>{16, 16, 16});  // 2 * 3 + 2 * 5
  // an output that another output's graph reaches (c from a) waits for that contribution
  const Variable y(Tensor::from_vector(std::vector<float>{1, 2}), true);
  const Variable p = y * 3.0, q = sum(p * p);
  backward({p, q}, {Tensor::ones({2}), Tensor()});
  CHECK(y.grad().to_vector<float>() == std::vector<float>{3 * (1 + 6), 3 * (1 + 12)});
}

namespace {

// y = dropout(tanh(x w), 0.3) (drawing from gen), and aux = sum(y y): the function checkpointed.
std::vector<Variable> small_fn(const std::vector<Variable>& in, const Variable& w, Generator& gen) {
  const Variable h = tanh(matmul(in[0], w));
  const Variable y = dropout(h, 0.3, gen.seed, gen.advance(static_cast<uint64_t>(h.numel())));
  return {y, sum(y * y)};
}

struct SmallRun {
  Tensor loss, gx, gw;
  uint64_t offset = 0;
};

SmallRun run_small(bool checkpointed, DType autocast) {
  Generator gen(7, 100);
  const Variable x(Tensor::randn({4, 5}, 1), true), w(Tensor::randn({5, 6}, 2), true);
  AutocastGuard mixed(autocast);
  const RecomputeFn fn = [&](const std::vector<Variable>& in) { return small_fn(in, w, gen); };
  Variable before = x * 1.5;  // the input is an inner node, not a leaf
  const std::vector<Variable> outs =
      checkpointed ? recompute(fn, {before}, {{w}, {&gen}}) : fn({before});
  const Variable after = dropout(outs[0], 0.2, gen.seed, gen.advance(24));  // draws after it
  const Variable loss = sum(after * 3.0) + outs[1] * 0.5;
  loss.backward();
  return {loss.data().clone(), x.grad(), w.grad(), gen.offset};
}

}  // namespace

TEST_CASE("recompute() gives the plain function's outputs and gradients bit for bit",
          "[checkpoint]") {
  for (const DType autocast : {DType::Float32, DType::BFloat16}) {
    INFO(dtype_name(autocast));
    const SmallRun plain = run_small(false, autocast), ckpt = run_small(true, autocast);
    CHECK(same_bits(plain.loss, ckpt.loss));
    CHECK(same_bits(plain.gx, ckpt.gx));
    CHECK(same_bits(plain.gw, ckpt.gw));
    CHECK(plain.offset == ckpt.offset);
    CHECK(plain.offset == 100 + 24 + 24);
  }
}

TEST_CASE("recompute() keeps no graph inside fn and runs plainly without grad", "[checkpoint]") {
  const Variable x(Tensor::randn({3}, 1), true);
  int calls = 0;
  const RecomputeFn fn = [&](const std::vector<Variable>& in) {
    ++calls;
    return std::vector<Variable>{exp(in[0]) * 2.0};
  };
  const std::vector<Variable> outs = recompute(fn, {x});
  CHECK(calls == 1);
  REQUIRE(outs[0].grad_fn());
  CHECK(outs[0].grad_fn()->name == "recompute");
  CHECK(outs[0].grad_fn()->inputs.size() == 1);
  CHECK(outs[0].grad_fn()->inputs[0].leaf == x.impl());  // straight to x: no inner nodes
  sum(outs[0]).backward();
  CHECK(calls == 2);  // recomputed once
  {
    NoGradGuard no_grad;
    const std::vector<Variable> plain = recompute(fn, {x});
    CHECK_FALSE(plain[0].requires_grad());
    CHECK(calls == 3);
  }
  const Variable frozen(Tensor::randn({3}, 2), false);
  CHECK_FALSE(recompute(fn, {frozen})[0].requires_grad());  // nothing to differentiate
}

TEST_CASE("recompute() refuses a recompute that draws other random numbers", "[checkpoint]") {
  Generator gen(3);
  const Variable x(Tensor::randn({4}, 1), true);
  int calls = 0;
  const RecomputeFn fn = [&](const std::vector<Variable>& in) {
    gen.advance(++calls == 1 ? 4 : 8);
    return std::vector<Variable>{in[0] * 2.0};
  };
  const Variable y = recompute(fn, {x}, {{}, {&gen}})[0];
  CHECK_THROWS_WITH(sum(y).backward(), Catch::Contains("drew other random numbers"));
  CHECK(gen.offset == 4);  // left where it was
}

namespace {

struct ModelRun {
  std::vector<Tensor> losses;
  std::map<std::string, Tensor> grads;
  uint64_t dropout_offset = 0;
};

// A model setup: config JSON, and what to do to the model before the run (fine-tuning).
struct Setup {
  std::string json;
  std::function<void(Transformer&)> prepare = [](Transformer&) {};
  bool chat = false;  // the chat loss with a padding mask (MoE over the real tokens)
};

// Two micro-steps (gradient accumulation 2) of forward + loss / 2 + backward.
ModelRun run_model(const Setup& s, int64_t every, DType autocast) {
  const ModelConfig c = ModelConfig::from_json(s.json);
  Transformer model(c, 3);
  s.prepare(model);
  model.set_activation_checkpointing(every);
  ModelRun r;
  for (int micro = 0; micro < 2; ++micro) {
    const Tensor ids = random_ids(2, 6, c.vocab_size, 20 + micro);
    const Tensor targets = random_ids(2, 6, c.vocab_size, 30 + micro);
    AutocastGuard mixed(autocast);
    LossTerms l;
    if (s.chat) {
      Tensor real = Tensor::ones({2, 6});
      real.set({1, 5}, 0.0);
      real.set({1, 4}, 0.0);
      l = model.loss(model.forward(ids, real), targets, real, 10.0, 0.5);
    } else {
      l = model.loss(model.forward(ids), targets);
    }
    (l.total / 2.0).backward();
    r.losses.push_back(l.total.data().clone());
  }
  for (const auto& [name, v] : model.named_parameters()) {
    if (v.requires_grad()) r.grads[name] = v.grad();
  }
  r.dropout_offset = model.dropout_generator().offset;
  return r;
}

void check_bit_identical(const Setup& s) {
  for (const DType autocast : {DType::Float32, DType::BFloat16}) {
    const ModelRun plain = run_model(s, 0, autocast);
    REQUIRE(!plain.grads.empty());
    for (const int64_t every : {1, 2}) {
      INFO(s.json << "\n" << dtype_name(autocast) << ", checkpoint every " << every);
      const ModelRun ckpt = run_model(s, every, autocast);
      CHECK(plain.dropout_offset == ckpt.dropout_offset);
      for (size_t i = 0; i < plain.losses.size(); ++i) CHECK(same_bits(plain.losses[i], ckpt.losses[i]));
      REQUIRE(plain.grads.size() == ckpt.grads.size());
      for (const auto& [name, g] : plain.grads) {
        INFO(name);
        CHECK(g.defined());
        CHECK(same_bits(g, ckpt.grads.at(name)));
      }
    }
  }
}

const std::string kSmall =
    R"("vocab_size": 40, "d_model": 16, "n_layers": 3, "n_heads": 2, "ffn_hidden": 24, "max_seq_len": 8)";

}  // namespace

TEST_CASE("a checkpointed Transformer trains bit-identically to the plain one",
          "[checkpoint][transformer]") {
  const std::string t = kSmall;
  SECTION("dense, dropout, tied head, z-loss") {
    check_bit_identical({"{" + t + R"(, "dropout": 0.1, "z_loss_coef": 0.01})"});
  }
  SECTION("untied head, parallel block, GPT-2 family") {
    check_bit_identical({"{" + t + R"(, "tie_embeddings": false, "parallel_block": true,
      "norm": "layernorm", "pos": "learned", "bias": true, "dropout": 0.2})"});
  }
  SECTION("MoE every layer with shared experts, aux and router z losses, dropout") {
    check_bit_identical({"{" + t + R"(, "dropout": 0.1, "moe": {"n_experts": 4, "top_k": 2,
      "expert_hidden": 8, "n_shared": 1, "aux_loss_coef": 0.1, "router_z_loss_coef": 0.05}})"});
  }
  SECTION("MoE every 2nd layer, the chat loss over a padding mask") {
    Setup s{"{" + t + R"(, "moe": {"n_experts": 3, "top_k": 1, "expert_hidden": 8, "every": 2,
      "aux_loss_coef": 0.1, "router_z_loss_coef": 0.05}})"};
    s.chat = true;
    check_bit_identical(s);
  }
  SECTION("LoRA with adapter dropout (frozen embedding: the first block's input needs no grad)") {
    Setup s{"{" + t + R"(, "moe": {"n_experts": 3, "top_k": 2, "expert_hidden": 8, "every": 2,
      "aux_loss_coef": 0.1}})"};
    s.prepare = [](Transformer& m) {
      add_adapters(m, LoRAConfig{4, 8, 0.1, {"q", "v", "up", "down"}}, "none", 5);
      for (const auto& [name, v] : m.named_parameters()) {  // B = 0 at the start: make it not
        if (name.find("lora_B") != std::string::npos) v.data().copy_(Tensor::randn(v.shape(), 9, 0, DType::Float32, 0, 0.1));
      }
    };
    check_bit_identical(s);
  }
  SECTION("QLoRA (NF4 base)") {
    Setup s{"{" + t + R"(, "d_model": 64, "ffn_hidden": 64})"};
    s.prepare = [](Transformer& m) { add_adapters(m, LoRAConfig{4, 8, 0, {"q", "v"}}, "nf4", 5); };
    check_bit_identical(s);
  }
}

TEST_CASE("a checkpointed block's parameters get their hooks once per backward",
          "[checkpoint][transformer]") {
  const ModelConfig c = ModelConfig::from_json("{" + kSmall + "}");
  Transformer model(c, 3);
  model.set_activation_checkpointing(1);
  std::map<std::string, int> fired;
  for (const auto& [name, v] : model.named_parameters()) {
    v.register_post_accumulate_grad_hook([&fired, name = name](Variable&) { ++fired[name]; });
  }
  model.loss(model.forward(random_ids(2, 6, c.vocab_size, 1)), random_ids(2, 6, c.vocab_size, 2))
      .total.backward();
  CHECK(fired.size() == model.named_parameters().size());
  for (const auto& [name, n] : fired) {
    INFO(name);
    CHECK(n == 1);
  }
}

namespace {

// A float64 gradcheck of the loss through checkpointed blocks (dropout masks fixed by restarting
// the stream at each evaluation: the recompute must draw the forward's).
void check_checkpointed_gradients(const std::string& json) {
  const ModelConfig c = ModelConfig::from_json(json);
  Transformer model(c, 3, DType::Float64);
  model.set_activation_checkpointing(1);
  const Tensor ids = random_ids(2, 5, c.vocab_size, 11);
  const Tensor targets = random_ids(2, 5, c.vocab_size, 12);
  auto fn = [&](const std::vector<Variable>&) {
    model.dropout_generator().offset = 0;
    return model.loss(model.forward(ids), targets).total;
  };
  const GradcheckResult r = gradcheck(fn, model.parameters());
  INFO(json);
  INFO(r.message);
  CHECK(r.ok);
}

}  // namespace

TEST_CASE("gradcheck through checkpointed blocks", "[checkpoint][gradcheck]") {
  const std::string t = R"("vocab_size": 11, "d_model": 8, "n_layers": 2, "n_heads": 2, "ffn_hidden": 12, "max_seq_len": 8)";
  SECTION("dense with dropout") { check_checkpointed_gradients("{" + t + R"(, "dropout": 0.2})"); }
  SECTION("MoE with shared experts and both auxiliary losses") {
    check_checkpointed_gradients("{" + t + R"(, "moe": {"n_experts": 4, "top_k": 2,
      "expert_hidden": 6, "n_shared": 1, "aux_loss_coef": 0.1, "router_z_loss_coef": 0.05}})");
  }
}
