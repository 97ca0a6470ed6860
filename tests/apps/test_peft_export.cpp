// `ember export` of a fine-tune checkpoint (docs/formats.md#peft-adapter): the PEFT adapter folder
// (adapter_config.json keys, adapter_model.safetensors names and bits), the merged model
// (each target weight W + (alpha / r) B A, computed here in double by plain loops) as a
// Hugging Face folder and as an ember checkpoint, and the refusals.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "apps/interop/hf_files.h"
#include "core/io/safetensors.h"
#include "core/io/sha256.h"
#include "data/tokenizer/tokenizer.h"
#include "nn/adapters/adapters.h"
#include "nn/checkpoint_file.h"
#include "temp_dir.h"

using namespace ember;
using namespace ember::apps;
using nlohmann::json;
using testing::TempDir;

namespace {

nn::ModelConfig base_config(const json& overrides = json::object()) {
  json c = {{"vocab_size", 260}, {"d_model", 16}, {"n_layers", 2},    {"n_heads", 4},
            {"n_kv_heads", 2},   {"max_seq_len", 12}, {"ffn_hidden", 24}, {"tie_embeddings", false}};
  c.update(overrides);
  return nn::ModelConfig::from_json(c.dump());
}

// Writes a random base and a fine-tune checkpoint over it whose adapters are random
// (B is not zero, so merging changes the weights). Returns the fine-tune's path.
std::string make_finetune(const TempDir& dir, const nn::ModelConfig& cfg, const std::vector<std::string>& targets) {
  nn::Checkpoint base;
  base.config = cfg;
  base.model = nn::Transformer(cfg, 5).state_dict();
  base.tokenizer_json = data::Tokenizer::bytes({std::string(data::kEndOfText)}).to_json();
  nn::write_checkpoint(dir / "base.h5", base);

  nn::Transformer model(cfg, 5);
  nn::LoRAConfig lora;
  lora.r = 2;
  lora.alpha = 6;
  lora.targets = targets;
  nn::add_adapters(model, lora, "none", 3);
  uint64_t offset = 0;
  nn::Checkpoint ft;
  ft.config = cfg;
  ft.config.lora = lora;
  for (auto& [name, p] : nn::trainable_parameters(model)) {
    ft.model[name] = Tensor::rand(p.data().shape(), 9, offset, DType::Float32, -0.5, 0.5);
    offset += static_cast<uint64_t>(p.data().numel());
  }
  ft.base = std::filesystem::absolute(dir / "base.h5").string();
  ft.base_sha256 = sha256_file(dir / "base.h5");
  ft.tokenizer_json = base.tokenizer_json;
  nn::write_checkpoint(dir / "ft.h5", ft);
  return dir / "ft.h5";
}

// W + (alpha / r) B A by plain loops in double.
std::vector<double> merged_by_hand(const Tensor& w, const Tensor& a, const Tensor& b, double scale) {
  const int64_t out = w.size(0), in = w.size(1), r = a.size(0);
  std::vector<double> m(out * in);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      double s = 0;
      for (int64_t k = 0; k < r; ++k) s += b.at({o, k}) * a.at({k, i});
      m[o * in + i] = w.at({o, i}) + scale * s;
    }
  }
  return m;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("peft export: adapter_config.json and the adapter tensors under PEFT's names") {
  TempDir dir("peft");
  const std::string ft = make_finetune(dir, base_config(), {"q", "v", "down", "head"});
  export_peft(ft, dir / "adapter");
  const json cfg = json::parse(testing::read_text(dir / "adapter/adapter_config.json"));
  CHECK(cfg.at("peft_type") == "LORA");
  CHECK(cfg.at("task_type") == "CAUSAL_LM");
  CHECK(cfg.at("r") == 2);
  CHECK(cfg.at("lora_alpha") == 6.0);
  CHECK(cfg.at("lora_dropout") == 0.0);
  CHECK(cfg.at("bias") == "none");
  CHECK(cfg.at("target_modules") == json({"q_proj", "v_proj", "down_proj", "lm_head"}));

  const nn::Checkpoint c = nn::read_checkpoint(ft, false);
  const SafetensorsFile st(dir / "adapter/adapter_model.safetensors");
  CHECK(st.entries().size() == c.model.size());
  for (const auto& [name, t] : c.model) {
    INFO(name);
    const std::string key = "base_model.model." + name;
    REQUIRE(st.contains(key));
    const Tensor got = st.read(key);
    REQUIRE(got.shape() == t.shape());
    CHECK(std::memcmp(got.raw_data(), t.contiguous().raw_data(), t.nbytes()) == 0);
  }
  CHECK(st.contains("base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"));
  CHECK(st.contains("base_model.model.lm_head.lora_B.weight"));
}

TEST_CASE("merged export: each target weight is W + (alpha / r) B A, in a HF folder and an ember checkpoint") {
  TempDir dir("peft_merge");
  const std::string ft = make_finetune(dir, base_config(), {"q", "up", "head"});
  const nn::Checkpoint base = nn::read_checkpoint(dir / "base.h5", false);
  const nn::Checkpoint c = nn::read_checkpoint(ft, false);
  export_hf(ft, dir / "hf");
  export_merged_checkpoint(ft, dir / "merged.h5");
  const SafetensorsFile st(dir / "hf/model.safetensors");
  const nn::Checkpoint merged = nn::read_checkpoint(dir / "merged.h5", false);
  CHECK_FALSE(merged.config.lora.has_value());
  CHECK(merged.tokenizer_json == c.tokenizer_json);
  for (const std::string& target : {std::string("model.layers.0.self_attn.q_proj"), std::string("model.layers.1.mlp.up_proj"),
                                    std::string("lm_head"), std::string("model.layers.0.self_attn.k_proj")}) {
    INFO(target);
    const bool adapted = c.model.count(target + ".lora_A.weight") > 0;
    const Tensor& w = base.model.at(target + ".weight");
    const std::vector<double> want = adapted ? merged_by_hand(w, c.model.at(target + ".lora_A.weight"),
                                                              c.model.at(target + ".lora_B.weight"), 3.0)
                                             : merged_by_hand(w, Tensor::zeros({1, w.size(1)}),
                                                              Tensor::zeros({w.size(0), 1}), 0);
    for (const Tensor& got : {st.read(target + ".weight"), merged.model.at(target + ".weight")}) {
      REQUIRE(got.shape() == w.shape());
      const std::vector<float> v = got.to_vector<float>();
      for (size_t i = 0; i < v.size(); ++i) CHECK(double(v[i]) == Approx(want[i]).margin(1e-6));
    }
  }
}

TEST_CASE("peft export refusals: plain checkpoint, GPT-2-class base, existing merged file, a folder with files") {
  TempDir dir("peft_refuse");
  const std::string ft = make_finetune(dir, base_config(), {"q", "v"});
  CHECK_THAT(error_of([&] { export_peft(dir / "base.h5", dir / "a"); }),
             Catch::Contains("not a fine-tune checkpoint"));
  CHECK_THAT(error_of([&] { export_merged_checkpoint(dir / "base.h5", dir / "m.h5"); }),
             Catch::Contains("not a fine-tune checkpoint"));
  CHECK_FALSE(std::filesystem::exists(dir / "m.h5"));
  testing::TempDir gdir("peft_gpt2");
  const std::string gft = make_finetune(
      gdir, base_config({{"norm", "layernorm"}, {"pos", "learned"}, {"ffn_act", "gelu_tanh"}, {"bias", true},
                         {"n_kv_heads", 4}}),
      {"q", "v"});
  CHECK_THAT(error_of([&] { export_peft(gft, gdir / "a"); }), Catch::Contains("--merge"));
  CHECK_FALSE(std::filesystem::exists(gdir / "a"));
  dir.write("exists.h5", "x");
  CHECK_THAT(error_of([&] { export_merged_checkpoint(ft, dir / "exists.h5"); }), Catch::Contains("exists"));
  CHECK(testing::read_text(dir / "exists.h5") == "x");
  // A folder that holds files (a full model's, here) takes neither the adapter nor the merged model.
  std::filesystem::create_directories(dir / "model");
  dir.write("model/config.json", "{}");
  for (const auto& write : std::vector<std::function<void()>>{[&] { export_peft(ft, dir / "model"); },
                                                              [&] { export_hf(ft, dir / "model"); }}) {
    CHECK(error_of(write) == "--out " + dir / "model" + ": the folder exists and is not empty; give a new or empty "
                             "folder (export never replaces files in one)");
  }
  CHECK(std::filesystem::directory_iterator(dir / "model")->path().filename() == "config.json");
  CHECK(std::distance(std::filesystem::directory_iterator(dir / "model"), std::filesystem::directory_iterator()) == 1);
  // An empty folder is written into.
  std::filesystem::create_directories(dir / "empty");
  export_peft(ft, dir / "empty");
  CHECK(std::filesystem::exists(dir / "empty/adapter_config.json"));
}
