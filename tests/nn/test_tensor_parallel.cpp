// Tensor parallelism of the Transformer (nn/tensor_parallel.h) at T = 2 and 4 ranks, run as
// threads (tests/support/thread_group.h): each rank's model, built from the same seed, holds
// the shards of the one-rank model's weights; its loss equals the one-rank loss and each of its
// gradients the shard of the one-rank gradient (float64; 1e-10), whatever the feature set
// (GQA, QK-norm, z-loss, tied or untied head, biases, learned positions, parallel blocks, a
// padded vocabulary, the weighted loss, MoE layers with shared experts and both aux losses).
// The shard helpers against slices taken by hand.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "nn/tensor_parallel.h"
#include "nn/transformer.h"
#include "thread_group.h"
#include "random_ids.h"

using namespace ember;
using namespace ember::nn;

namespace {

using ember::testing::random_ids;

// What a rank (or the one-rank model) computed: the loss, ce, z, the MoE aux and router_z and
// each parameter's data and gradient (empty: none, as an expert no token picked), by name.
struct Run {
  double loss = 0, ce = 0, z = 0, aux = 0, router_z = 0;
  std::map<std::string, std::vector<double>> data, grad;
};

// Biases start at 0; a bias added on every rank before the sum instead of once after it would
// then go unseen. Each bias gets whole values 0.1 sin(i + 1 + h) (h from its name), sharded.
void set_nonzero_biases(Transformer& model, TensorParallel tp) {
  for (auto& [name, p] : model.named_parameters()) {
    if (name.size() < 5 || name.compare(name.size() - 5, 5, ".bias") != 0) continue;
    const TensorSplit split = tensor_split(name);
    const int64_t n = split == TensorSplit::Rows ? p.numel() * tp.size() : p.numel();
    const double h = static_cast<double>(std::hash<std::string>{}(name) % 97);
    std::vector<double> whole(static_cast<size_t>(n));
    for (size_t i = 0; i < whole.size(); ++i) whole[i] = 0.1 * std::sin(static_cast<double>(i) + 1 + h);
    p.set_data(tensor_shard(Tensor::from_vector(whole), split, tp.rank(), tp.size()));
  }
}

Run step(const ModelConfig& c, TensorParallel tp, bool weighted) {
  Transformer model(c, 3, DType::Float64, tp);
  set_nonzero_biases(model, tp);
  const Tensor ids = random_ids(2, 5, c.vocab_size, 11), targets = random_ids(2, 5, c.vocab_size, 12);
  const Tensor weight = Tensor::from_vector(std::vector<double>{1, 0, 1, 1, 0, 1, 1, 1, 0, 1}, {2, 5});
  // weighted: the weight is the real-token mask too (the MoE losses over the real tokens)
  const ModelOutput out = weighted ? model.forward(ids, weight.to(DType::Float32)) : model.forward(ids);
  const LossTerms l = weighted ? model.loss(out, targets, weight, 7.0, 1.0) : model.loss(out, targets);
  l.total.backward();
  Run r{l.total.item(), l.ce, l.z, l.aux, l.router_z, {}, {}};
  for (const auto& [name, p] : model.named_parameters()) {
    r.data[name] = p.data().to_vector<double>();
    r.grad[name] = p.grad().defined() ? p.grad().to_vector<double>() : std::vector<double>{};
  }
  return r;
}

// The one-rank run's tensor of `name` as a tensor of the one-rank model's shape.
std::vector<double> shard_of(const ModelConfig& c, const std::string& name, const std::vector<double>& v,
                             int64_t rank, int64_t T) {
  Transformer shapes(c, 3, DType::Float64);
  for (const auto& [n, p] : shapes.named_parameters()) {
    if (n != name) continue;
    return tensor_shard(Tensor::from_vector(v, p.shape()), tensor_split(name), rank, T)
        .to_vector<double>();
  }
  FAIL("no parameter " << name);
  return {};
}

void check_parallel_equals_whole(const std::string& json, int T, bool weighted) {
  const ModelConfig c = ModelConfig::from_json(json);
  const Run whole = step(c, {}, weighted);
  const std::vector<Run> ranks = testing::run_ranks(T, [&](const ParallelGroup& g) {
    return step(c, TensorParallel{&g}, weighted);
  });
  INFO(json << " at T = " << T << (weighted ? ", weighted" : ""));
  for (int r = 0; r < T; ++r) {
    const Run& got = ranks[static_cast<size_t>(r)];
    CHECK(got.loss == Approx(whole.loss).epsilon(1e-12));
    CHECK(got.ce == Approx(whole.ce).epsilon(1e-12));
    CHECK(got.z == Approx(whole.z).epsilon(1e-12).margin(1e-15));
    CHECK(got.aux == Approx(whole.aux).epsilon(1e-12).margin(1e-15));
    CHECK(got.router_z == Approx(whole.router_z).epsilon(1e-12).margin(1e-15));
    REQUIRE(got.grad.size() == whole.grad.size());
    for (const auto& [name, g] : whole.grad) {
      INFO("rank " << r << ": " << name);
      CHECK(got.data.at(name) == shard_of(c, name, whole.data.at(name), r, T));
      if (g.empty()) {  // no gradient on one rank: none on any
        CHECK(got.grad.at(name).empty());
        continue;
      }
      const std::vector<double> want = shard_of(c, name, g, r, T);
      const std::vector<double>& have = got.grad.at(name);
      REQUIRE(have.size() == want.size());
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(have[i] - want[i]));
      CHECK(worst <= 1e-10);
    }
  }
}

}  // namespace

TEST_CASE("tensor shards: rows, columns, padded vocabulary rows and back") {
  const Tensor w = Tensor::from_vector(std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  CHECK(tensor_shard(w, TensorSplit::Columns, 1, 2).to_vector<double>() == std::vector<double>{2, 3, 6, 7, 10, 11});
  CHECK(tensor_shard(w, TensorSplit::VocabRows, 1, 2).to_vector<double>() ==
        std::vector<double>{8, 9, 10, 11, 0, 0, 0, 0});  // row 2, then a padding row
  CHECK(tensor_shard(w, TensorSplit::VocabRows, 3, 4).to_vector<double>() == std::vector<double>(4, 0.0));
  CHECK(tensor_shard(w.narrow(0, 0, 2).contiguous(), TensorSplit::Rows, 1, 2).to_vector<double>() ==
        std::vector<double>{4, 5, 6, 7});
  CHECK_THROWS(tensor_shard(w, TensorSplit::Rows, 0, 2));  // 3 rows over 2 ranks
  // A shard is a copy: a view would keep the whole tensor's storage alive beside it (a rank
  // of --tp would hold every row-split weight whole).
  const Tensor rows = w.narrow(0, 0, 2).contiguous();
  for (TensorSplit s : {TensorSplit::Rows, TensorSplit::Columns, TensorSplit::VocabRows})
    CHECK(tensor_shard(rows, s, 1, 2).storage() != rows.storage());
  for (TensorSplit s : {TensorSplit::Columns, TensorSplit::VocabRows, TensorSplit::Whole}) {
    std::vector<Tensor> shards;
    for (int64_t r = 0; r < 2; ++r) shards.push_back(tensor_shard(w, s, r, 2));
    CHECK(tensor_unshard(shards, s, 3).to_vector<double>() == w.to_vector<double>());
  }
}

TEST_CASE("a tensor-parallel Transformer's loss and gradients are the one-rank model's") {
  SECTION("GQA, QK-norm, z-loss, tied head, vocabulary 11 padded to 12") {
    const char* json = R"({"vocab_size": 11, "d_model": 16, "n_layers": 2, "n_heads": 4,
      "n_kv_heads": 2, "ffn_hidden": 12, "qk_norm": true, "z_loss_coef": 0.1})";
    check_parallel_equals_whole(json, 2, false);
    check_parallel_equals_whole(json, 2, true);
  }
  SECTION("GPT-2 family: layernorm, gelu_tanh, learned positions, biases, untied, soft-cap") {
    check_parallel_equals_whole(R"({"vocab_size": 13, "d_model": 8, "n_layers": 2, "n_heads": 2,
      "ffn_hidden": 12, "norm": "layernorm", "ffn_act": "gelu_tanh", "pos": "learned", "bias": true,
      "tie_embeddings": false, "final_softcap": 2.0})", 2, true);
  }
  SECTION("parallel blocks, geglu, 4 ranks (the last holding padding only in part)") {
    check_parallel_equals_whole(R"({"vocab_size": 10, "d_model": 8, "n_layers": 2, "n_heads": 4,
      "ffn_hidden": 8, "parallel_block": true, "ffn_act": "geglu", "z_loss_coef": 0.05})", 4, true);
  }
}

TEST_CASE("a tensor-parallel MoE Transformer's loss, aux losses and gradients are the one-rank model's") {
  SECTION("shared expert, aux and router-z losses, top-2 renormalised, 2 and 4 ranks") {
    const char* json = R"({"vocab_size": 11, "d_model": 16, "n_layers": 2, "n_heads": 4,
      "ffn_hidden": 8, "moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 8, "n_shared": 1,
      "aux_loss_coef": 0.1, "router_z_loss_coef": 0.05}})";
    for (int T : {2, 4}) {
      check_parallel_equals_whole(json, T, false);
      check_parallel_equals_whole(json, T, true);
    }
  }
  SECTION("every 2 (dense then MoE), top-2 not renormalised, biases, gelu, 2 shared experts") {
    check_parallel_equals_whole(R"({"vocab_size": 13, "d_model": 8, "n_layers": 2, "n_heads": 2,
      "ffn_hidden": 12, "norm": "layernorm", "ffn_act": "gelu", "pos": "learned", "bias": true,
      "tie_embeddings": false, "moe": {"n_experts": 3, "top_k": 2, "expert_hidden": 6, "n_shared": 2,
      "norm_topk_prob": false, "every": 2, "aux_loss_coef": 0.2, "router_z_loss_coef": 0.1}})", 2, true);
  }
  SECTION("parallel blocks, geglu experts, top-1, 4 ranks") {
    check_parallel_equals_whole(R"({"vocab_size": 10, "d_model": 8, "n_layers": 2, "n_heads": 4,
      "ffn_hidden": 8, "parallel_block": true, "ffn_act": "geglu", "bias": true, "moe": {"n_experts": 4,
      "top_k": 1, "expert_hidden": 8, "aux_loss_coef": 0.3, "router_z_loss_coef": 0.2}})", 4, false);
  }
}

TEST_CASE("a tensor-parallel Transformer refuses what --tp does not divide") {
  auto error_at = [](const std::string& json, int T) {
    const ModelConfig c = ModelConfig::from_json(json);
    std::vector<std::string> errors = testing::run_ranks(T, [&](const ParallelGroup& g) {
      try {
        Transformer model(c, 3, DType::Float64, TensorParallel{&g});
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::string("(no error)");
    });
    return errors.front();
  };
  CHECK(error_at(R"({"vocab_size": 8, "d_model": 16, "n_layers": 1, "n_heads": 4, "n_kv_heads": 2,
    "ffn_hidden": 8})", 4) == "--tp 4: n_kv_heads 2 is not divisible by 4");
  CHECK(error_at(R"({"vocab_size": 8, "d_model": 8, "n_layers": 2, "n_heads": 4, "ffn_hidden": 8,
    "moe": {"n_experts": 2, "top_k": 1, "expert_hidden": 6, "every": 2}})", 4) ==
        "--tp 4: moe.expert_hidden 6 is not divisible by 4");
  CHECK(error_at(R"({"vocab_size": 8, "d_model": 8, "n_layers": 2, "n_heads": 2, "ffn_hidden": 8,
    "moe": {"n_experts": 2, "top_k": 1, "expert_hidden": 4}})", 2) == "(no error)");  // MoE is split
}
