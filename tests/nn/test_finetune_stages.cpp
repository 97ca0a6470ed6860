// Fine-tuning on pipeline stages (ember finetune --pp; nn/adapters/adapters.h, nn/checkpoint_file.h):
// a stage's adapters, drawn where one process's stream stands at its first block, are the
// one-process model's same-named adapters exactly (the head's on the last stage only); a stage
// loads its part of a base (the file's tensor count is the whole model's) and its trained
// tensors of a fine-tune checkpoint, checking those the stage answers for.
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include "core/io/sha256.h"
#include "nn/adapters/adapters.h"
#include "nn/checkpoint_file.h"
#include "nn/parallel_plan.h"
#include "temp_dir.h"

using namespace ember;
using namespace ember::nn;
using ember::testing::TempDir;

namespace {

// 3 blocks; block 1 an MoE one (experts and a shared expert: projections of their own).
ModelConfig stage_config(bool tied) {
  return ModelConfig::from_json(
      std::string(R"({"vocab_size": 29, "d_model": 16, "n_layers": 3, "n_heads": 2, "n_kv_heads": 1,
      "ffn_hidden": 24, "max_seq_len": 16, "moe": {"n_experts": 3, "top_k": 2, "n_shared": 1,
      "expert_hidden": 8, "every": 2}, "tie_embeddings": )") +
      (tied ? "true}" : "false}"));
}

LoRAConfig targets(const std::vector<std::string>& t) {
  LoRAConfig l;
  l.r = 3;
  l.alpha = 6;
  l.targets = t;
  return l;
}

std::unique_ptr<Transformer> stage_model(const ModelConfig& cfg, const std::vector<int64_t>& counts, int64_t s) {
  const ParallelLayout plan = make_parallel_layout(cfg, 1, static_cast<int64_t>(counts.size()), counts);
  return std::make_unique<Transformer>(cfg, 4, DType::Float32, TensorParallel{}, pipeline_stage(plan, s));
}

// Every stage's trained tensors equal the whole model's of the same name, and together they are
// the whole model's, each once.
void check_stages(const ModelConfig& cfg, const LoRAConfig& lora, const std::string& quantize,
                  const std::vector<int64_t>& counts) {
  Transformer whole(cfg, 4);
  add_adapters(whole, lora, quantize, 9);
  std::map<std::string, Tensor> expected;
  for (const auto& [name, v] : trainable_parameters(whole)) expected.emplace(name, v.data());
  std::set<std::string> seen;
  for (int64_t s = 0; s < static_cast<int64_t>(counts.size()); ++s) {
    const auto stage = stage_model(cfg, counts, s);
    add_adapters(*stage, lora, quantize, 9);
    for (const auto& [name, v] : trainable_parameters(*stage)) {
      INFO("stage " << s << ": " << name);
      REQUIRE(expected.count(name) == 1);
      CHECK(seen.insert(name).second);
      CHECK(v.data().to_vector<float>() == expected.at(name).to_vector<float>());
    }
  }
  CHECK(seen.size() == expected.size());
}

}  // namespace

TEST_CASE("a pipeline stage's adapters are the one-process model's same-named adapters") {
  const std::vector<std::string> every(kLoRATargets.begin(), kLoRATargets.end());
  for (const bool tied : {true, false}) {
    INFO("tied " << tied);
    const ModelConfig cfg = stage_config(tied);
    check_stages(cfg, targets(every), "none", {1, 1, 1});
    check_stages(cfg, targets({"o", "down", "head"}), "none", {2, 1});
    check_stages(cfg, targets({"q", "v", "up"}), "nf4", {1, 2});
  }
}

TEST_CASE("a pipeline stage's head adapter is on the last stage only") {
  const ModelConfig cfg = stage_config(true);
  for (int64_t s = 0; s < 2; ++s) {
    const auto stage = stage_model(cfg, {2, 1}, s);
    add_adapters(*stage, targets({"q", "head"}), "none", 9);
    CHECK((stage->tied_head_adapter() != nullptr) == (s == 1));
  }
}

TEST_CASE("a pipeline stage loads its part of a base and of a fine-tune checkpoint") {
  const TempDir dir;
  const ModelConfig cfg = stage_config(true);
  Transformer whole(cfg, 7);
  Checkpoint base;
  base.config = cfg;
  base.model = whole.state_dict();
  const std::string base_path = std::filesystem::absolute(dir / "base.h5").string();
  write_checkpoint(base_path, base);
  const ParallelLayout plan = make_parallel_layout(cfg, 1, 2, {2, 1});
  for (int64_t s = 0; s < 2; ++s) {
    const auto stage = load_model_weights(cfg, 0, base_path, "none", TensorParallel{}, pipeline_stage(plan, s));
    for (const auto& [name, v] : stage->named_parameters()) {
      INFO(name);
      CHECK(v.data().to_vector<float>() == base.model.at(name).to_vector<float>());
    }
  }
  // A fine-tune of it with trained-looking adapters.
  auto tuned = model_from_checkpoint(read_checkpoint(base_path), base_path);
  add_adapters(*tuned, targets({"q", "down", "head"}), "nf4", 0);
  Checkpoint ft;
  uint64_t seed = 60;
  for (const auto& [name, v] : trainable_parameters(*tuned))
    ft.model[name] = Tensor::randn(v.shape(), seed++, 0, DType::Float32, 0, 0.2);
  ft.config = tuned->config();
  ft.base = base_path;
  ft.base_sha256 = sha256_file(base_path);
  for (int64_t s = 0; s < 2; ++s) {
    const auto stage = model_from_checkpoint(ft, "ft.h5", "", TensorParallel{}, pipeline_stage(plan, s));
    const auto trained = trainable_parameters(*stage);
    CHECK(!trained.empty());
    for (const auto& [name, v] : trained) CHECK(v.data().to_vector<float>() == ft.model.at(name).to_vector<float>());
  }
  // Each stage checks the tensors of its blocks (the last stage: the rest too).
  Checkpoint extra = ft;
  extra.model["model.layers.0.self_attn.q_proj.lora_C.weight"] = Tensor::zeros({2, 2});
  CHECK_THROWS_WITH(model_from_checkpoint(extra, "ft.h5", "", TensorParallel{}, pipeline_stage(plan, 0)),
                    Catch::Contains("unexpected tensor /model/model.layers.0.self_attn.q_proj.lora_C.weight"));
  CHECK_NOTHROW(model_from_checkpoint(extra, "ft.h5", "", TensorParallel{}, pipeline_stage(plan, 1)));
  Checkpoint missing = ft;
  missing.model.erase("lm_head.lora_B.weight");
  CHECK_THROWS_WITH(model_from_checkpoint(missing, "ft.h5", "", TensorParallel{}, pipeline_stage(plan, 1)),
                    Catch::Contains("missing tensor /model/lm_head.lora_B.weight"));
}
