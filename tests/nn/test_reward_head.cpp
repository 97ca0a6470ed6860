// A reward model's Transformer (docs/model.md#reward-model): the config key "reward", the
// score head `score.weight` drawn after every other parameter (a base's init unchanged),
// Transformer::scores against hidden_states by hand and a float64 finite-difference gradcheck,
// and the head of a LoRA reward fine-tune (trainable, beside the adapters).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/adapters/adapters.h"
#include "nn/checkpoint_file.h"
#include "nn/transformer.h"

using namespace ember;
using namespace ember::nn;

namespace {

const char* kBase = R"({"vocab_size": 13, "d_model": 8, "n_layers": 2, "n_heads": 2, "ffn_hidden": 12,
                        "max_seq_len": 8, "tie_embeddings": TIED})";

ModelConfig config(bool tied, const std::string& reward = "") {
  std::string json = kBase;
  json.replace(json.find("TIED"), 4, tied ? "true" : "false");
  if (!reward.empty()) json.insert(json.rfind('}'), std::string(", \"reward\": ") + reward);
  return ModelConfig::from_json(json);
}

Variable parameter(const Module& m, const std::string& name) {
  for (const auto& [n, v] : m.named_parameters())
    if (n == name) return v;
  FAIL("no parameter " << name);
  return Variable();
}

}  // namespace

TEST_CASE("reward config: score.weight is the last parameter, the base's init unchanged",
          "[reward]") {
  for (bool tied : {true, false}) {
    INFO("tied " << tied);
    const Transformer base(config(tied), 17), rm(config(tied, R"({"center_rewards": 0.5})"), 17);
    CHECK_FALSE(base.has_score_head());
    REQUIRE(rm.has_score_head());
    const auto b = base.named_parameters(), r = rm.named_parameters();
    REQUIRE(r.size() == b.size() + 1);
    for (size_t i = 0; i < b.size(); ++i) {
      INFO(b[i].first);
      CHECK(r[i].first == b[i].first);
      CHECK(r[i].second.data().to_vector<float>() == b[i].second.data().to_vector<float>());
    }
    CHECK(r.back().first == "score.weight");
    CHECK(r.back().second.shape() == Shape({1, 8}));
    CHECK(r.back().second.requires_grad());
    CHECK_THROWS_WITH(base.scores(Tensor::zeros({1, 2}, DType::Int64), Tensor::zeros({1}, DType::Int64)),
                      Catch::Contains("reward model"));
  }
}

TEST_CASE("reward config: the \"reward\" object survives a JSON round trip", "[reward]") {
  const ModelConfig c = config(true, R"({"center_rewards": 0.25, "pairs": 7})");
  const std::string json = c.to_json();
  CHECK(json.find("\"reward\"") != std::string::npos);
  const ModelConfig back = ModelConfig::from_json(json);
  CHECK(back.reward == c.reward);
  CHECK(back.to_json() == json);
  CHECK(config(true).to_json().find("reward") == std::string::npos);  // a base's JSON is unchanged
  std::string bad = config(true).to_json();
  bad.insert(bad.rfind('}'), ", \"reward\": 3");
  CHECK_THROWS_WITH(ModelConfig::from_json(bad, "cfg.json"),
                    Catch::Contains("reward") && Catch::Contains("must be an object"));
  // The base of a reward fine-tune has no head.
  ModelConfig ft = c;
  ft.lora = LoRAConfig{};
  CHECK(finetune_base_config(ft, c.vocab_size).reward.empty());
}

TEST_CASE("scores reads score.weight at each row's last token and passes a float64 gradcheck",
          "[reward][gradcheck]") {
  for (bool tied : {true, false}) {
    INFO("tied " << tied);
    Transformer model(config(tied, "{}"), 3, DType::Float64);
    const Tensor ids = Tensor::from_vector<int64_t>({1, 4, 2, 9, 3, 0, 7, 5, 12, 10}, {2, 5});
    const Tensor last = Tensor::from_vector<int64_t>({4, 1});
    const Variable w = parameter(model, "score.weight");
    const Tensor h = model.hidden_states(ids).data();
    const std::vector<double> got = model.scores(ids, last).data().to_vector<double>();
    REQUIRE(got.size() == 2);
    for (int64_t b = 0; b < 2; ++b) {
      double want = 0;
      for (int64_t i = 0; i < 8; ++i) want += w.data().at({0, i}) * h.at({b, b == 0 ? 4 : 1, i});
      CHECK(got[static_cast<size_t>(b)] == Approx(want).epsilon(1e-13));
    }
    const Variable trunk = parameter(model, "model.layers.0.self_attn.q_proj.weight");
    const Variable table = parameter(model, "model.embed_tokens.weight");
    const Tensor g = Tensor::from_vector<double>({0.7, -1.3});
    const GradcheckResult r = gradcheck(
        [&](const std::vector<Variable>&) { return sum(model.scores(ids, last) * Variable(g)); },
        {w, trunk, table});
    INFO(r.message);
    CHECK(r.ok);
  }
}

TEST_CASE("a LoRA reward fine-tune trains its score head beside the adapters", "[reward]") {
  Transformer model(config(true), 5);
  add_adapters(model, LoRAConfig{}, "none", 0);
  Generator gen(11);
  model.add_score_head(gen, R"({"center_rewards": 0})");
  const auto trainable = trainable_parameters(model);
  REQUIRE(!trainable.empty());
  CHECK(trainable.back().first == "score.weight");
  for (const auto& [name, v] : trainable) {
    INFO(name);
    CHECK((name == "score.weight" || name.find(".lora_") != std::string::npos));
  }
  CHECK(model.config().reward == R"({"center_rewards": 0})");
  CHECK_THROWS_WITH(model.add_score_head(gen, "{}"), Catch::Contains("already has a score head"));
}
