// ModelConfig: SPEC.md section 1 defaults, derived values, and errors that
// name the key.
#include <catch2/catch.hpp>

#include "nn/config.h"

using namespace ember;
using namespace ember::nn;

TEST_CASE("an empty object gives SPEC.md's defaults", "[config]") {
  const ModelConfig c = ModelConfig::from_json("{}");
  CHECK(c.vocab_size == 256);
  CHECK(c.d_model == 256);
  CHECK(c.n_layers == 4);
  CHECK(c.n_heads == 8);
  CHECK(c.n_kv_heads == 8);
  CHECK(c.head_dim == 32);
  // swiglu: 256 * ceil((8 * 256 / 3) / 256) = 256 * ceil(682 / 256) = 768
  CHECK(c.ffn_hidden == 768);
  CHECK(c.ffn_act == "swiglu");
  CHECK(c.norm == "rmsnorm");
  CHECK(c.norm_eps == 1e-5);
  CHECK(c.pos == "rope");
  CHECK(c.rope_theta == 10000);
  CHECK(c.max_seq_len == 256);
  CHECK_FALSE(c.qk_norm);
  CHECK_FALSE(c.bias);
  CHECK(c.tie_embeddings);
  CHECK_FALSE(c.parallel_block);
  CHECK(c.sliding_window == 0);
  CHECK_FALSE(c.moe.has_value());
}

TEST_CASE("ffn_hidden defaults follow the activation", "[config]") {
  CHECK(default_ffn_hidden(768, "gelu") == 3072);
  CHECK(default_ffn_hidden(768, "swiglu") == 2048);  // 8*768/3 = 2048 exactly
  CHECK(default_ffn_hidden(100, "geglu") == 512);    // 800 / 3 = 266 -> 2 * 256
}

TEST_CASE("moe block defaults and expert_hidden = ffn_hidden", "[config]") {
  const ModelConfig c = ModelConfig::from_json(R"({"d_model": 64, "n_heads": 4, "moe": {"n_shared": 1}})");
  REQUIRE(c.moe.has_value());
  CHECK(c.moe->n_experts == 8);
  CHECK(c.moe->top_k == 2);
  CHECK(c.moe->expert_hidden == c.ffn_hidden);
  CHECK(c.moe->n_shared == 1);
  CHECK(c.moe->every == 1);
  CHECK(c.moe->aux_loss_coef == 0.01);
  CHECK(c.layer_is_moe(0));
  const ModelConfig e2 = ModelConfig::from_json(R"({"moe": {"every": 2}})");
  CHECK_FALSE(e2.layer_is_moe(0));
  CHECK(e2.layer_is_moe(1));
  CHECK_FALSE(ModelConfig::from_json(R"({"moe": null})").moe.has_value());
}

TEST_CASE("sliding window with global_every picks full-attention layers", "[config]") {
  const ModelConfig c = ModelConfig::from_json(R"({"sliding_window": 16, "global_every": 3})");
  CHECK(c.layer_window(0) == 16);
  CHECK(c.layer_window(1) == 16);
  CHECK(c.layer_window(2) == 0);
  CHECK(c.layer_window(3) == 16);
}

TEST_CASE("bad configs are errors naming the key", "[config]") {
  CHECK_THROWS_WITH(ModelConfig::from_json(R"({"d_modle": 3})", "cfg.json"),
                    Catch::Contains("cfg.json") && Catch::Contains("d_modle"));
  CHECK_THROWS_WITH(ModelConfig::from_json(R"({"n_layers": "4"})"), Catch::Contains("n_layers"));
  CHECK_THROWS_WITH(ModelConfig::from_json(R"({"n_layers": 4.5})"), Catch::Contains("n_layers"));
  CHECK_THROWS_WITH(ModelConfig::from_json(R"({"qk_norm": 1})"), Catch::Contains("qk_norm"));
  CHECK_THROWS_WITH(ModelConfig::from_json(R"({"n_heads": 8, "n_kv_heads": 3})"), Catch::Contains("n_kv_heads"));
  CHECK_THROWS_WITH(ModelConfig::from_json(R"({"head_dim": 33})"), Catch::Contains("head_dim"));
  CHECK_THROWS_WITH(ModelConfig::from_json(R"({"ffn_act": "swish"})"), Catch::Contains("ffn_act"));
  CHECK_THROWS_WITH(ModelConfig::from_json(R"({"moe": {"n_experts": 2, "top_k": 3}})"), Catch::Contains("top_k"));
  CHECK_THROWS_WITH(ModelConfig::from_json(R"({"moe": {"experts": 2}})"), Catch::Contains("experts"));
  CHECK_THROWS_WITH(ModelConfig::from_json("{"), Catch::Contains("invalid JSON"));
  CHECK_THROWS_WITH(ModelConfig::from_file("/nonexistent/x.json"), Catch::Contains("/nonexistent/x.json"));
}

TEST_CASE("to_json round-trips", "[config]") {
  const ModelConfig c = ModelConfig::from_json(R"({"n_kv_heads": 2, "qk_norm": true, "moe": {"top_k": 1}})");
  const ModelConfig d = ModelConfig::from_json(c.to_json());
  CHECK(d.to_json() == c.to_json());
  CHECK(d.n_kv_heads == 2);
  CHECK(d.moe->top_k == 1);
}
