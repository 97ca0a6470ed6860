// nn/parameter_layout and nn/memory_plan: the parameter list against built models,
// and each ZeRO stage's figures against numbers worked out by hand for a small
// config (the arithmetic is in the comments). The bucket cut: test_gradient_buckets.
#include <catch2/catch.hpp>

#include "nn/sizing/memory_plan.h"
#include "nn/sizing/model_stats.h"
#include "nn/sizing/parameter_layout.h"
#include "nn/presets.h"
#include "nn/transformer.h"

using namespace ember;
using namespace ember::nn;

namespace {

// vocab 256, d 64, 2 layers, 4 heads, swiglu FFN of 128, tied, rope:
// embedding 256 x 64 = 16384; a block: 2 norms 128 + q, k, v, o 4 x 4096 + gate, up, down
// 3 x 8192 = 41088; final norm 64. P = 16384 + 2 x 41088 + 64 = 98624 (394496 bytes).
ModelConfig small_config() {
  return ModelConfig::from_json(
      R"({"vocab_size": 256, "d_model": 64, "n_layers": 2, "n_heads": 4, "ffn_hidden": 128, "max_seq_len": 32})");
}

constexpr int64_t kMiB = int64_t{1} << 20;

}  // namespace

TEST_CASE("parameter_layout lists a built model's parameters in order", "[memory_plan]") {
  const std::vector<std::string> configs = {
      R"({"vocab_size": 256, "d_model": 64, "n_layers": 2, "n_heads": 4, "ffn_hidden": 128, "max_seq_len": 32})",
      // gpt2-style: layernorm, biases, learned positions, gelu
      R"({"vocab_size": 300, "d_model": 48, "n_layers": 3, "n_heads": 4, "norm": "layernorm", "ffn_act": "gelu_tanh",
          "pos": "learned", "bias": true, "max_seq_len": 40})",
      // untied head, qk_norm, grouped KV heads, parallel block
      R"({"vocab_size": 200, "d_model": 64, "n_layers": 2, "n_heads": 8, "n_kv_heads": 2, "qk_norm": true,
          "tie_embeddings": false, "parallel_block": true, "max_seq_len": 16})",
      // a reward model: score.weight last
      R"({"vocab_size": 64, "d_model": 32, "n_layers": 1, "n_heads": 4, "max_seq_len": 16,
          "reward": {"center_rewards": 0}})",
  };
  std::vector<ModelConfig> cfgs;
  for (const std::string& json : configs) cfgs.push_back(ModelConfig::from_json(json));
  cfgs.push_back(preset_config("moe-small"));
  for (const ModelConfig& cfg : cfgs) {
    INFO(cfg.to_json());
    Transformer model(cfg, 1);
    const std::vector<ParameterEntry> layout = parameter_layout(cfg);
    const auto named = model.named_parameters();
    REQUIRE(layout.size() == named.size());
    int64_t total = 0;
    for (size_t i = 0; i < layout.size(); ++i) {
      INFO(named[i].first);
      CHECK(layout[i].numel == named[i].second.numel());
      const bool in_block = named[i].first.rfind("model.layers.", 0) == 0;
      CHECK((layout[i].block >= 0) == in_block);
      if (in_block) CHECK(named[i].first.rfind("model.layers." + std::to_string(layout[i].block) + ".", 0) == 0);
      total += layout[i].numel;
    }
    CHECK(total == model_stats(cfg).total_params);
  }
}

TEST_CASE("activation_bytes with and without checkpointing", "[memory_plan]") {
  const ModelConfig cfg = small_config();
  // Per token: a block 4 x 64 + q 64 + k, v 2 x 64 + attention out 64 + 3 x 128 = 896; head 2 x 256.
  // B 2 x T 8 = 16 tokens x 4 bytes.
  CHECK(block_activation_floats(cfg, 0) == 896);
  CHECK(activation_bytes(cfg, 2, 8, 0) == 64 * (2 * 896 + 512));
  CHECK(activation_bytes(cfg, 2, 8, 0) == model_stats(cfg, 2, 8).activation_bytes);
  CHECK(activation_bytes(cfg, 2, 8, 1) == 64 * (2 * 64 + 512 + 896));    // inputs kept, one recomputed
  CHECK(activation_bytes(cfg, 2, 8, 2) == 64 * (64 + 896 + 512 + 896));  // block 0 only
}

TEST_CASE("rank_memory: each ZeRO stage against hand-computed figures", "[memory_plan]") {
  const ModelConfig cfg = small_config();
  const int64_t full = 394496;  // 4P
  // W = 2: rank 0 owns [0, 49312) (98624 / 2 cut at a multiple of 16), rank 1 the other 49312.
  const int64_t shard = 4 * 49312;
  const int64_t act = 64 * (2 * 896 + 512);
  // A ZeRO save gathers each moment whole on rank 0, one at a time: one block of each size
  // class the parameters fall in, 64 (norms), 4096 (q, k, v, o), 8192 (gate, up, down) and
  // 16384 (embedding) floats, all exact classes.
  const int64_t save = 4 * (64 + 4096 + 8192 + 16384);
  TrainingPlan plan;
  plan.batch = 2;
  plan.seq_len = 8;
  SECTION("one process, no ZeRO: 4P + 4P + 8P, no Reducer") {
    const RankMemory m = rank_memory(cfg, plan);
    CHECK(m.parameters == full);
    CHECK(m.gradients == full);
    CHECK(m.optimizer == 2 * full);
    CHECK(m.activations == act);
    CHECK(m.communication == 0);
    CHECK(m.checkpoint_save == 0);
    CHECK(m.runtime == 42 * kMiB);
    CHECK(m.total() == 4 * full + act + 42 * kMiB);
  }
  plan.world_size = 2;
  SECTION("W = 2, --zero 0: the flat buffer, all-reduced in place (no MPI temporary)") {
    const RankMemory m = rank_memory(cfg, plan);
    CHECK(m.gradients == full);
    CHECK(m.optimizer == 2 * full);
    CHECK(m.communication == full);
    CHECK(m.runtime == 50 * kMiB);
  }
  SECTION("W = 2, --zero 1: .grad and the shard, moments sharded, the save gathers a tensor at a time") {
    plan.zero = 1;
    const RankMemory m = rank_memory(cfg, plan);
    CHECK(m.parameters == full);
    CHECK(m.gradients == full + shard);
    CHECK(m.optimizer == 2 * shard);
    CHECK(m.communication == full);
    CHECK(m.checkpoint_save == save);
  }
  SECTION("W = 2, --zero 2: the shard, one block's and the root's .grad, a staging buffer") {
    plan.zero = 2;
    const RankMemory m = rank_memory(cfg, plan);
    // root 16384 + 64, a block 41088: 4 x 57536 = 230144. The staging buffer of 394496 bytes
    // takes the allocator's size class 13 x 32768 = 425984 (8 classes per power of two).
    CHECK(m.gradients == shard + 230144);
    CHECK(m.optimizer == 2 * shard);
    CHECK(m.communication == 425984 + full);
    CHECK(m.checkpoint_save == save);
  }
  SECTION("one process, --zero 2: backward keeps every .grad; no MPI") {
    plan.world_size = 1;
    plan.zero = 2;
    const RankMemory m = rank_memory(cfg, plan);
    CHECK(m.gradients == 2 * full);
    CHECK(m.optimizer == 2 * full);
    CHECK(m.communication == 425984);
  }
  SECTION("W = 2, --zero 3: shard + root + two blocks of parameters; a bucket per unit; the save adds nothing") {
    plan.zero = 3;
    const RankMemory m = rank_memory(cfg, plan);
    CHECK(m.parameters == 4 * (49312 + 16448 + 2 * 41088));
    // The token table's gradient reuses the table's memory: the final norm's 64 and a block.
    CHECK(m.gradients == shard + 4 * (64 + 41088));
    // Buckets per unit, backward order: the final norm (64), block 1, block 0 (41088 each),
    // the token table (16384). Staged: only the blocks (one parameter all-reduces its gradient
    // in place), one block of 11 x 16384 bytes (164352 rounded up); MPI temporaries: the two
    // largest, 2 x 164352.
    CHECK(m.communication == 180224 + 2 * 164352);
    CHECK(m.checkpoint_save == 0);
    plan.world_size = 1;  // nothing to gather: the shard is the model
    CHECK(rank_memory(cfg, plan).parameters == full);
    CHECK(rank_memory(cfg, plan).checkpoint_save == save);
  }
  SECTION("bad plans are errors") {
    plan.world_size = 0;
    CHECK_THROWS_WITH(rank_memory(cfg, plan), Catch::Contains("world size"));
    plan.world_size = 2;
    plan.zero = 4;
    CHECK_THROWS_WITH(rank_memory(cfg, plan), Catch::Contains("ZeRO stage"));
    plan.zero = 0;
    plan.batch = int64_t{1} << 40;
    plan.seq_len = int64_t{1} << 20;
    CHECK_THROWS_WITH(rank_memory(cfg, plan), Catch::Contains("overflows"));
  }
}
