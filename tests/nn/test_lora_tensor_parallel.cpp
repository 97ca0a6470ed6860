// LoRA adapters under tensor parallelism (nn/adapters/adapters.h add_adapters on a model of
// nn/tensor_parallel.h) at T = 2 and 4 ranks run as threads (tests/support/thread_group.h):
// each rank's adapters are the shards (nn/parallel_plan.h tensor_split) of the one-rank
// model's, drawn from the same seed; with every target (column-parallel q, k, v, gate, up and
// head, row-parallel o and down), B set non-zero so A trains, and adapter dropout on, the loss
// equals the one-rank loss and each trained tensor's gradient the shard of the one-rank
// gradient (float64; 1e-10), tied and untied head, a padded vocabulary.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "nn/adapters/adapters.h"
#include "nn/tensor_parallel.h"
#include "nn/transformer.h"
#include "thread_group.h"
#include "random_ids.h"

using namespace ember;
using namespace ember::nn;

namespace {

using ember::testing::random_ids;

struct Run {
  double loss = 0;
  std::map<std::string, std::vector<double>> data, grad;
  std::map<std::string, Shape> shape;  // the trained tensors' shapes on this rank
};

// B of every adapter set to whole values 0.05 sin(i + h) (h from its name), cut to this rank's
// shard: with B = 0 the gradient of A would be 0 and a wrong one would go unseen.
void set_nonzero_b(Transformer& model, int64_t vocab, TensorParallel tp) {
  for (auto& [name, p] : trainable_parameters(model)) {
    if (name.find("lora_B") == std::string::npos) continue;
    const TensorSplit split = tensor_split(name);
    int64_t rows = p.size(0);
    if (split == TensorSplit::Rows) rows *= tp.size();
    if (split == TensorSplit::VocabRows) rows = vocab;
    const double h = static_cast<double>(std::hash<std::string>{}(name) % 89);
    std::vector<double> whole(static_cast<size_t>(rows * p.size(1)));
    for (size_t i = 0; i < whole.size(); ++i) whole[i] = 0.05 * std::sin(static_cast<double>(i) + h);
    p.set_data(tensor_shard(Tensor::from_vector(whole, {rows, p.size(1)}), split, tp.rank(), tp.size()));
  }
}

Run step(const ModelConfig& c, TensorParallel tp) {
  Transformer model(c, 3, DType::Float64, tp);
  LoRAConfig lora;
  lora.r = 2;
  lora.alpha = 4;
  lora.dropout = 0.25;
  lora.targets = kLoRATargets;
  add_adapters(model, lora, "none", 5);
  set_nonzero_b(model, c.vocab_size, tp);
  model.train();
  const Tensor ids = random_ids(2, 5, c.vocab_size, 11), targets = random_ids(2, 5, c.vocab_size, 12);
  const Tensor weight = Tensor::from_vector(std::vector<double>{1, 0, 1, 1, 0, 1, 1, 1, 0, 1}, {2, 5});
  Run r;
  for (int pass = 0; pass < 2; ++pass) {  // two passes: the dropout stream advances alike
    const LossTerms l = model.loss(model.forward(ids), targets, weight, 7.0, 1.0);
    l.total.backward();
    r.loss += l.total.item();
  }
  for (const auto& [name, p] : trainable_parameters(model)) {
    r.data[name] = p.data().to_vector<double>();
    r.grad[name] = p.grad().defined() ? p.grad().to_vector<double>() : std::vector<double>{};
    r.shape[name] = p.shape();
  }
  return r;
}

void check_lora_parallel_equals_whole(const std::string& json, int T) {
  const ModelConfig c = ModelConfig::from_json(json);
  const Run whole = step(c, {});
  const std::vector<Run> ranks =
      testing::run_ranks(T, [&](const ParallelGroup& g) { return step(c, TensorParallel{&g}); });
  INFO(json << " at T = " << T);
  for (const char* name :
       {"model.layers.1.self_attn.q_proj.lora_A.weight", "model.layers.0.self_attn.o_proj.lora_A.weight",
        "model.layers.1.mlp.down_proj.lora_A.weight", "lm_head.lora_B.weight"})
    REQUIRE(whole.grad.count(name) == 1);  // both parallel forms and the head
  for (int r = 0; r < T; ++r) {
    const Run& got = ranks[static_cast<size_t>(r)];
    CHECK(got.loss == Approx(whole.loss).epsilon(1e-12));
    REQUIRE(got.grad.size() == whole.grad.size());
    for (const auto& [name, g] : whole.grad) {
      INFO("rank " << r << ": " << name);
      auto shard = [&](const std::vector<double>& v) {
        return tensor_shard(Tensor::from_vector(v, whole.shape.at(name)), tensor_split(name), r, T)
            .to_vector<double>();
      };
      CHECK(got.data.at(name) == shard(whole.data.at(name)));  // drawn whole, then cut
      REQUIRE(!g.empty());
      const std::vector<double> want = shard(g), &have = got.grad.at(name);
      REQUIRE(have.size() == want.size());
      double worst = 0, size = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::abs(have[i] - want[i]));
        size = std::max(size, std::abs(want[i]));
      }
      CHECK(size > 0);  // every adapter trains
      CHECK(worst <= 1e-10);
    }
  }
}

}  // namespace

TEST_CASE("tensor-parallel LoRA adapters: loss and gradients are the one-rank model's shards") {
  SECTION("tied head (adapter over the table), GQA, vocabulary 11 padded to 12, T = 2") {
    check_lora_parallel_equals_whole(R"({"vocab_size": 11, "d_model": 16, "n_layers": 2,
      "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 12, "qk_norm": true, "z_loss_coef": 0.1})", 2);
  }
  SECTION("untied head, biases, T = 2 and 4") {
    const char* json = R"({"vocab_size": 10, "d_model": 8, "n_layers": 2, "n_heads": 4,
      "ffn_hidden": 8, "bias": true, "tie_embeddings": false, "ffn_act": "gelu", "norm": "layernorm"})";
    check_lora_parallel_equals_whole(json, 2);
    check_lora_parallel_equals_whole(json, 4);
  }
}

TEST_CASE("tensor-parallel LoRA: the adapters' split rules") {
  CHECK(tensor_split("model.layers.3.self_attn.q_proj.lora_A.weight") == TensorSplit::Whole);
  CHECK(tensor_split("model.layers.3.self_attn.q_proj.lora_B.weight") == TensorSplit::Rows);
  CHECK(tensor_split("model.layers.0.self_attn.o_proj.lora_A.weight") == TensorSplit::Columns);
  CHECK(tensor_split("model.layers.0.self_attn.o_proj.lora_B.weight") == TensorSplit::Whole);
  CHECK(tensor_split("model.layers.1.mlp.down_proj.lora_A.weight") == TensorSplit::Columns);
  CHECK(tensor_split("model.layers.1.mlp.experts.2.up_proj.lora_B.weight") == TensorSplit::Rows);
  CHECK(tensor_split("lm_head.lora_A.weight") == TensorSplit::Whole);
  CHECK(tensor_split("lm_head.lora_B.weight") == TensorSplit::VocabRows);
  CHECK_THROWS(tensor_split("model.embed_tokens.added_rows"));
}

TEST_CASE("tensor-parallel LoRA on an MoE model is refused") {
  const ModelConfig c = ModelConfig::from_json(R"({"vocab_size": 8, "d_model": 8, "n_layers": 1,
    "n_heads": 2, "ffn_hidden": 8, "moe": {"n_experts": 2, "top_k": 1, "expert_hidden": 4}})");
  const std::vector<std::string> errors = testing::run_ranks(2, [&](const ParallelGroup& g) {
    Transformer model(c, 3, DType::Float64, TensorParallel{&g});
    try {
      add_adapters(model, LoRAConfig{}, "none", 5);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  });
  CHECK(errors.front() == "tensor parallelism of LoRA adapters on an MoE model is not available "
                          "yet (use --tp 1, or --full)");
}
