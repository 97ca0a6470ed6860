// nn/parallel_plan and nn/sizing/stage_memory: the keys --tp must divide (exact errors), each
// parameter's split rule and per-rank shape for a GQA and an MoE config at T = 2 and 4, the
// stages' blocks (default and --pp-layers), the tied table on both end stages, per-stage counts
// against a count written out here, and each stage's memory against arithmetic done by hand.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/parallel_plan.h"
#include "nn/sizing/memory_plan.h"
#include "nn/sizing/model_stats.h"
#include "nn/sizing/parameter_layout.h"
#include "nn/sizing/stage_memory.h"
#include "nn/transformer.h"

using namespace ember;
using namespace ember::nn;
using Shape = std::vector<int64_t>;

namespace {

// GQA: 8 query heads of 8, 4 KV heads; SwiGLU 96; layernorm, biases, QK-norm, learned
// positions, untied head; vocab 250 (padded to 252 at T = 4).
const char* kGqa = R"({"vocab_size": 250, "d_model": 64, "n_layers": 3, "n_heads": 8, "n_kv_heads": 4,
  "head_dim": 8, "ffn_hidden": 96, "norm": "layernorm", "bias": true, "qk_norm": true, "pos": "learned",
  "tie_embeddings": false, "max_seq_len": 16})";

// MoE: layer 1 of 2 is MoE (every 2): 4 experts of width 32 and 1 shared; layer 0 dense, 64.
const char* kMoe = R"({"vocab_size": 100, "d_model": 64, "n_layers": 2, "n_heads": 4, "ffn_hidden": 64,
  "max_seq_len": 16, "moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 32, "n_shared": 1, "every": 2}})";

std::string tp_error(const std::string& json, int64_t tp) {
  try {
    check_tensor_parallel(ModelConfig::from_json(json), tp);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string stages_error(int64_t n_layers, int64_t pp, const std::vector<int64_t>& counts) {
  try {
    stage_layers(n_layers, pp, counts);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::map<std::string, PlacedParameter> by_name(const ModelConfig& cfg, const ParallelLayout& layout) {
  std::map<std::string, PlacedParameter> out;
  for (PlacedParameter& p : place_parameters(cfg, layout)) out[p.name] = p;
  return out;
}

}  // namespace

TEST_CASE("check_tensor_parallel names the first key --tp does not divide", "[parallel_plan]") {
  CHECK(tp_error(kGqa, 2).empty());
  CHECK(tp_error(kGqa, 4).empty());
  CHECK(tp_error(kGqa, 3) == "--tp 3: n_heads 8 is not divisible by 3");
  CHECK(tp_error(kGqa, 8) == "--tp 8: n_kv_heads 4 is not divisible by 8");  // n_kv_heads < T
  const std::string gqa2 = R"({"n_heads": 8, "n_kv_heads": 2})";
  CHECK(tp_error(gqa2, 4) == "--tp 4: n_kv_heads 2 is not divisible by 4");
  CHECK(tp_error(R"({"d_model": 64, "n_heads": 4, "ffn_hidden": 6})", 4) ==
        "--tp 4: ffn_hidden 6 is not divisible by 4");
  // Every layer MoE: ffn_hidden 770 is never used, expert_hidden 258 is.
  const std::string moe = R"({"d_model": 64, "n_heads": 4, "ffn_hidden": 770, "moe": {"expert_hidden": 258}})";
  CHECK(tp_error(moe, 4) == "--tp 4: moe.expert_hidden 258 is not divisible by 4");
  // With a dense layer (every 2) ffn_hidden comes first.
  const std::string mixed = R"({"d_model": 64, "n_heads": 4, "ffn_hidden": 770, "moe": {"expert_hidden": 258, "every": 2}})";
  CHECK(tp_error(mixed, 4) == "--tp 4: ffn_hidden 770 is not divisible by 4");
  CHECK(tp_error(kMoe, 4).empty());
  CHECK(tp_error(kGqa, 0) == "--tp must be >= 1, got 0");
  // The vocabulary is padded, never refused.
  CHECK(tp_error(R"({"vocab_size": 255, "n_heads": 4})", 4).empty());
  CHECK(padded_vocab(255, 4) == 256);
  CHECK(padded_vocab(256, 4) == 256);
  CHECK(padded_vocab(257, 4) == 260);
  CHECK(padded_vocab(250, 1) == 250);
}

TEST_CASE("parameter_layout names and shapes a built model's parameters", "[parallel_plan]") {
  for (const std::string& json : {std::string(kGqa), std::string(kMoe),
                                 std::string(R"({"vocab_size": 64, "d_model": 32, "n_layers": 1, "n_heads": 4,
                                   "max_seq_len": 16, "reward": {"center_rewards": 0}})")}) {
    const ModelConfig cfg = ModelConfig::from_json(json);
    Transformer model(cfg, 1);
    const auto named = model.named_parameters();
    const std::vector<ParameterEntry> layout = parameter_layout(cfg);
    REQUIRE(layout.size() == named.size());
    for (size_t i = 0; i < layout.size(); ++i) {
      CHECK(layout[i].name == named[i].first);
      CHECK(layout[i].shape == Shape(named[i].second.shape().begin(), named[i].second.shape().end()));
      CHECK_NOTHROW(tensor_split(named[i].first));  // every parameter has a rule
    }
  }
}

TEST_CASE("split rules and per-rank shapes of a GQA config at T = 2 and 4", "[parallel_plan]") {
  const ModelConfig cfg = ModelConfig::from_json(kGqa);
  // qd = 8 heads x 8 = 64, kvd = 4 x 8 = 32, hidden 96, d 64, vocab 250.
  struct Row {
    std::string name;
    TensorSplit split;
    Shape t2, t4;
  };
  const std::string l = "model.layers.1.";
  const std::vector<Row> rows = {
      {"model.embed_tokens.weight", TensorSplit::VocabRows, {125, 64}, {63, 64}},  // 250 -> 250, 252
      {"model.embed_positions.weight", TensorSplit::Whole, {16, 64}, {16, 64}},
      {l + "input_layernorm.weight", TensorSplit::Whole, {64}, {64}},
      {l + "input_layernorm.bias", TensorSplit::Whole, {64}, {64}},
      {l + "self_attn.q_proj.weight", TensorSplit::Rows, {32, 64}, {16, 64}},
      {l + "self_attn.q_proj.bias", TensorSplit::Rows, {32}, {16}},
      {l + "self_attn.k_proj.weight", TensorSplit::Rows, {16, 64}, {8, 64}},
      {l + "self_attn.v_proj.bias", TensorSplit::Rows, {16}, {8}},
      {l + "self_attn.o_proj.weight", TensorSplit::Columns, {64, 32}, {64, 16}},
      {l + "self_attn.o_proj.bias", TensorSplit::Whole, {64}, {64}},
      {l + "self_attn.q_norm.weight", TensorSplit::Whole, {8}, {8}},
      {l + "post_attention_layernorm.weight", TensorSplit::Whole, {64}, {64}},
      {l + "mlp.gate_proj.weight", TensorSplit::Rows, {48, 64}, {24, 64}},
      {l + "mlp.up_proj.bias", TensorSplit::Rows, {48}, {24}},
      {l + "mlp.down_proj.weight", TensorSplit::Columns, {64, 48}, {64, 24}},
      {l + "mlp.down_proj.bias", TensorSplit::Whole, {64}, {64}},
      {"model.norm.weight", TensorSplit::Whole, {64}, {64}},
      {"lm_head.weight", TensorSplit::VocabRows, {125, 64}, {63, 64}},
  };
  const auto t2 = by_name(cfg, make_parallel_layout(cfg, 2, 1));
  const auto t4 = by_name(cfg, make_parallel_layout(cfg, 4, 1));
  for (const Row& r : rows) {
    INFO(r.name);
    REQUIRE(t2.count(r.name) == 1);
    CHECK(tensor_split(r.name) == r.split);
    CHECK(t2.at(r.name).rank_shape == r.t2);
    CHECK(t4.at(r.name).rank_shape == r.t4);
  }
  CHECK_THROWS_WITH(tensor_split("model.embed_tokens.added_rows"),  // --add-chat-tokens' rows
                    Catch::Contains("no tensor-parallel split rule for parameter"));
  CHECK_THROWS_WITH(rank_shape(TensorSplit::Rows, {6, 4}, 4), Catch::Contains("6 is not divisible by 4"));
}

TEST_CASE("split rules and per-rank shapes of an MoE config at T = 2 and 4", "[parallel_plan]") {
  const ModelConfig cfg = ModelConfig::from_json(kMoe);
  const auto t2 = by_name(cfg, make_parallel_layout(cfg, 2, 1));
  const auto t4 = by_name(cfg, make_parallel_layout(cfg, 4, 1));
  const std::string l = "model.layers.1.mlp.";
  CHECK(tensor_split(l + "gate.weight") == TensorSplit::Whole);  // the router: [4, 64] everywhere
  CHECK(t4.at(l + "gate.weight").rank_shape == Shape{4, 64});
  for (const std::string& expert : {l + "experts.0.", l + "experts.3.", l + "shared_experts.0."}) {
    INFO(expert);
    CHECK(tensor_split(expert + "gate_proj.weight") == TensorSplit::Rows);
    CHECK(t2.at(expert + "gate_proj.weight").rank_shape == Shape{16, 64});  // 32 / 2
    CHECK(t4.at(expert + "up_proj.weight").rank_shape == Shape{8, 64});     // 32 / 4
    CHECK(tensor_split(expert + "down_proj.weight") == TensorSplit::Columns);
    CHECK(t2.at(expert + "down_proj.weight").rank_shape == Shape{64, 16});
    CHECK(t4.at(expert + "down_proj.weight").rank_shape == Shape{64, 8});
  }
  // Layer 0 is dense, hidden 64; the vocabulary 100 is 50 and 25 rows.
  CHECK(t4.at("model.layers.0.mlp.up_proj.weight").rank_shape == Shape{16, 64});
  CHECK(t4.at("model.embed_tokens.weight").rank_shape == Shape{25, 64});
}

TEST_CASE("stages: n_layers / P each, the first n_layers mod P one more, or --pp-layers", "[parallel_plan]") {
  CHECK(stage_layers(10, 4) == std::vector<int64_t>{3, 3, 2, 2});
  CHECK(stage_layers(4, 2) == std::vector<int64_t>{2, 2});
  CHECK(stage_layers(5, 1) == std::vector<int64_t>{5});
  CHECK(stage_layers(3, 3) == std::vector<int64_t>{1, 1, 1});
  CHECK(stage_layers(4, 2, {1, 3}) == std::vector<int64_t>{1, 3});
  CHECK(stages_error(4, 5, {}) == "--pp 5: the model has 4 blocks (n_layers) and every stage needs at least one");
  CHECK(stages_error(4, 0, {}) == "--pp must be >= 1, got 0");
  CHECK(stages_error(4, 2, {1, 1, 2}) == "--pp-layers gives 3 counts for --pp 2; give one block count per stage");
  CHECK(stages_error(4, 2, {4, 0}) == "--pp-layers: stage 1 has 0 blocks; every stage needs at least one");
  CHECK(stages_error(4, 2, {1, 2}) == "--pp-layers 1,2 sums to 3 blocks, but the model has n_layers 4");
  const ParallelLayout layout{1, {3, 3, 2, 2}};
  CHECK(layout.first_layer(2) == 6);
  CHECK(layout.stage_of_layer(5) == 1);
  CHECK(layout.stage_of_layer(9) == 3);
}

TEST_CASE("the embeddings on stage 0, the head on the last, a tied table on both", "[parallel_plan]") {
  ModelConfig cfg = ModelConfig::from_json(kGqa);  // untied, learned positions
  auto p = by_name(cfg, make_parallel_layout(cfg, 1, 3));
  CHECK(p.at("model.embed_tokens.weight").stages == std::vector<int64_t>{0});
  CHECK(p.at("model.embed_positions.weight").stages == std::vector<int64_t>{0});
  CHECK(p.at("model.layers.1.mlp.up_proj.weight").stages == std::vector<int64_t>{1});
  CHECK(p.at("model.norm.weight").stages == std::vector<int64_t>{2});
  CHECK(p.at("lm_head.weight").stages == std::vector<int64_t>{2});
  cfg.tie_embeddings = true;
  p = by_name(cfg, make_parallel_layout(cfg, 1, 3));
  CHECK(p.count("lm_head.weight") == 0);
  CHECK(p.at("model.embed_tokens.weight").stages == std::vector<int64_t>{0, 2});
  p = by_name(cfg, make_parallel_layout(cfg, 1, 1));
  CHECK(p.at("model.embed_tokens.weight").stages == std::vector<int64_t>{0});
  cfg.reward = R"({"center_rewards": 0})";
  p = by_name(cfg, make_parallel_layout(cfg, 1, 2));
  CHECK(p.at("score.weight").stages == std::vector<int64_t>{1});
}

namespace {

// kGqa counted by hand, per tensor rank of T: d 64, qd 64, kvd 32, hidden 96, biases,
// layernorm (weight and bias), QK-norm of 8; rows-split tensors / T, o's and down's weight / T
// with their bias whole; the vocabulary 250 padded to a multiple of T.
int64_t gqa_block(int64_t t) {
  const int64_t norms = 2 * (64 + 64) + 8 + 8;
  const int64_t q = (64 * 64 + 64) / t, k_v = 2 * (32 * 64 + 32) / t, o = 64 * 64 / t + 64;
  const int64_t gate_up = 2 * (96 * 64 + 96) / t, down = 64 * 96 / t + 64;
  return norms + q + k_v + o + gate_up + down;  // T = 1: 31440
}
int64_t gqa_table(int64_t t) { return (250 + t - 1) / t * 64; }
constexpr int64_t kGqaPositions = 16 * 64, kGqaFinalNorm = 64 + 64;

// kMoe by hand: d 64, qd = kvd 64, no biases, rmsnorm, SwiGLU; layer 0 dense (hidden 64),
// layer 1 the router [4, 64] (whole) and 4 + 1 experts of 32; vocabulary 100, tied.
int64_t moe_attention(int64_t t) { return 2 * 64 + 4 * 64 * 64 / t; }
int64_t moe_block(int64_t layer, int64_t t) {
  return moe_attention(t) + (layer == 0 ? 3 * 64 * 64 / t : 4 * 64 + 5 * 3 * 32 * 64 / t);
}
int64_t moe_table(int64_t t) { return (100 + t - 1) / t * 64; }

std::vector<int64_t> ranks(const std::vector<StageParameters>& stages) {
  std::vector<int64_t> out;
  for (const StageParameters& s : stages) out.push_back(s.rank_numel);
  return out;
}

}  // namespace

TEST_CASE("per-stage parameter counts sum to the model's, the tied table once", "[parallel_plan]") {
  ModelConfig cfg = ModelConfig::from_json(kGqa);
  const int64_t total = 2 * gqa_table(1) + kGqaPositions + 3 * gqa_block(1) + kGqaFinalNorm;
  REQUIRE(total == 127472);
  CHECK(total == model_stats(cfg).total_params);
  for (int64_t t : {1, 2, 4}) {
    INFO("T = " << t);
    std::vector<StageParameters> s = stage_parameters(cfg, make_parallel_layout(cfg, t, 2));  // blocks 2, 1
    CHECK(s[0].numel + s[1].numel == total);
    CHECK(ranks(s) == std::vector<int64_t>{gqa_table(t) + kGqaPositions + 2 * gqa_block(t),
                                           gqa_block(t) + kGqaFinalNorm + gqa_table(t)});
    s = stage_parameters(cfg, make_parallel_layout(cfg, t, 2, {1, 2}));
    CHECK(ranks(s) == std::vector<int64_t>{gqa_table(t) + kGqaPositions + gqa_block(t),
                                           2 * gqa_block(t) + kGqaFinalNorm + gqa_table(t)});
  }
  cfg.tie_embeddings = true;  // both end stages hold the table: counted once in the model
  const std::vector<StageParameters> tied = stage_parameters(cfg, make_parallel_layout(cfg, 1, 3));
  CHECK(tied[0].numel + tied[1].numel + tied[2].numel - gqa_table(1) == model_stats(cfg).total_params);
  CHECK(tied[2].numel == gqa_block(1) + kGqaFinalNorm + gqa_table(1));

  const ModelConfig moe = ModelConfig::from_json(kMoe);
  const int64_t moe_total = moe_table(1) + moe_block(0, 1) + moe_block(1, 1) + 64;
  CHECK(moe_total == model_stats(moe).total_params);
  for (int64_t t : {1, 2, 4}) {
    INFO("MoE, T = " << t);
    const std::vector<StageParameters> s = stage_parameters(moe, make_parallel_layout(moe, t, 2));
    CHECK(s[0].numel + s[1].numel - moe_table(1) == moe_total);
    CHECK(ranks(s) == std::vector<int64_t>{moe_table(t) + moe_block(0, t), moe_block(1, t) + 64 + moe_table(t)});
  }
}

TEST_CASE("micro-batches in flight and the bubble", "[parallel_plan]") {
  std::vector<int64_t> held;
  for (int64_t s = 0; s < 4; ++s) held.push_back(micro_batches_in_flight(s, 4, 8, false));
  CHECK(held == std::vector<int64_t>{4, 3, 2, 1});  // 1F1B: min(P - s, M)
  held.clear();
  for (int64_t s = 0; s < 4; ++s) held.push_back(micro_batches_in_flight(s, 4, 2, false));
  CHECK(held == std::vector<int64_t>{2, 2, 2, 1});
  CHECK(micro_batches_in_flight(3, 4, 8, true) == 8);  // GPipe: M
  CHECK(bubble_fraction(2, 4) == Approx(1.0 / 5));     // (P - 1) / (M + P - 1)
  CHECK(bubble_fraction(4, 8) == Approx(3.0 / 11));
  CHECK(bubble_fraction(1, 1) == 0);
}

TEST_CASE("stage_memory at T = P = 1 is rank_memory", "[parallel_plan][memory_plan]") {
  for (const char* json : {kGqa, kMoe}) {
    const ModelConfig cfg = ModelConfig::from_json(json);
    for (int zero : {0, 1}) {
      for (int64_t w : {1, 2, 3}) {
        for (int64_t every : {0, 1, 2}) {
          INFO(json << " zero " << zero << " W " << w << " every " << every);
          StagePlan plan;
          plan.run = TrainingPlan{.world_size = w, .zero = zero, .batch = 4, .seq_len = 16, .checkpoint_every = every};
          plan.layout = make_parallel_layout(cfg, 1, 1);
          const RankMemory want = rank_memory(cfg, plan.run);
          const std::vector<StageMemory> got = stage_memory(cfg, plan);
          REQUIRE(got.size() == 1);
          CHECK(got[0].memory.parameters == want.parameters);
          CHECK(got[0].memory.gradients == want.gradients);
          CHECK(got[0].memory.optimizer == want.optimizer);
          CHECK(got[0].memory.activations == want.activations);
          CHECK(got[0].memory.communication == want.communication);
          CHECK(got[0].memory.checkpoint_save == want.checkpoint_save);
          CHECK(got[0].memory.total() == want.total());
        }
      }
    }
  }
}

TEST_CASE("each stage's memory per rank, worked out by hand", "[parallel_plan][memory_plan]") {
  // kMoe at T = 2, P = 2 on N = 8 ranks: D = 2; --zero 1; B = 4 in M = 4 micro-batches of 1 row, S = 16.
  const ModelConfig cfg = ModelConfig::from_json(kMoe);
  StagePlan plan;
  plan.run = TrainingPlan{.world_size = 8, .zero = 1, .batch = 4, .seq_len = 16};
  plan.layout = make_parallel_layout(cfg, 2, 2);
  plan.micro_batches = 4;
  // One rank's shards: stage 0 the table (50 rows) and block 0, stage 1 block 1, the final
  // norm and the tied table.
  const int64_t p0 = 50 * 64 + (128 + 16384 / 2) + 3 * 4096 / 2;             // 3200 + 8320 + 6144
  const int64_t p1 = (128 + 16384 / 2) + 256 + 5 * 6144 / 2 + 64 + 50 * 64;  // 8320 + 256 + 15360 + 64 + 3200
  REQUIRE(p0 == 17664);
  REQUIRE(p1 == 27200);
  // ZeRO-1 over D = 2: the shard is half, cut at a multiple of 16 (17664 / 2 = 8832 = 552 x 16).
  const int64_t shard0 = 8832, shard1 = 13600;
  // Activations per token and rank: a block keeps 4 d = 256 whole, and q, k, v, the attention
  // output and the FFN hidden x3 split: layer 0 (64 + 2 x 64 + 64 + 3 x 64) / 2 = 224, layer 1
  // (64 + 128 + 64 + 3 x (2 + 1) x 32) / 2 = 272; the last stage's logits and their gradient
  // 2 x 100 / 2. One micro-batch: 4 bytes x 1 row x 16 positions = 64 bytes per float.
  const int64_t block0 = 256 + 224, block1 = 256 + 272, logits = 100, per_float = 4 * 1 * 16;
  for (bool gpipe : {false, true}) {
    INFO("gpipe " << gpipe);
    plan.gpipe = gpipe;
    const std::vector<StageMemory> m = stage_memory(cfg, plan);
    REQUIRE(m.size() == 2);
    const int64_t held0 = gpipe ? 4 : 2, held1 = gpipe ? 4 : 1;  // 1F1B: min(P - s, M)
    CHECK(m[0].in_flight == held0);
    CHECK(m[1].in_flight == held1);
    const int64_t p[] = {p0, p1}, shard[] = {shard0, shard1};
    const int64_t act[] = {per_float * block0 * held0, per_float * (block1 + logits) * held1};
    for (size_t s = 0; s < 2; ++s) {
      INFO("stage " << s);
      CHECK(m[s].rank_params == p[s]);
      CHECK(m[s].memory.parameters == 4 * p[s]);
      CHECK(m[s].memory.gradients == 4 * p[s] + 4 * shard[s]);  // .grad and the averaged shard
      CHECK(m[s].memory.optimizer == 8 * shard[s]);
      CHECK(m[s].memory.activations == act[s]);
      // The flat buffer 4p, all-reduced in place: no MPI temporary counted.
      CHECK(m[s].memory.communication == 4 * p[s]);
      CHECK(m[s].memory.runtime == 50 * (int64_t{1} << 20));
    }
  }
  // --checkpoint-activations (1F1B): each block keeps its input (d = 64), one recomputed at a time.
  plan.gpipe = false;
  plan.run.checkpoint_every = 1;
  const std::vector<StageMemory> ck = stage_memory(cfg, plan);
  CHECK(ck[0].memory.activations == per_float * (64 * 2 + block0));
  CHECK(ck[1].memory.activations == per_float * ((64 + logits) * 1 + block1));
}

TEST_CASE("stage_memory refuses a world size, ZeRO stage or batch the layout cannot take", "[parallel_plan]") {
  const ModelConfig cfg = ModelConfig::from_json(kMoe);
  StagePlan plan;
  plan.run = TrainingPlan{.world_size = 6, .zero = 0, .batch = 4, .seq_len = 16};
  plan.layout = make_parallel_layout(cfg, 2, 2);
  CHECK_THROWS_WITH(stage_memory(cfg, plan), "--world-size 6 is not divisible by --tp 2 x --pp 2 = 4 (N = T x P x D)");
  plan.run.world_size = 8;
  plan.run.zero = 2;
  CHECK_THROWS_WITH(stage_memory(cfg, plan), "--zero 2 with --tp 2 --pp 2: the tensor and pipeline plan covers "
                                             "--zero 0 and 1");
  plan.run.zero = 0;
  plan.micro_batches = 3;
  CHECK_THROWS_WITH(stage_memory(cfg, plan), "--batch-size 4 is not divisible by --micro-batches 3");
  plan.micro_batches = 0;  // M = P = 2
  CHECK(stage_memory(cfg, plan).size() == 2);
}
