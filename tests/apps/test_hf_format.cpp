// Hugging Face export/import: weight names and shapes as transformers expects
// them for each class, bit-identical round trips (single file and shards),
// and the errors for what has no exact equivalent. (Logits against an
// independent reader of the exported folder: tools/hf_check.py, CTest hf_check.)
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "nn/checkpoint_file.h"
#include "apps/interop/hf_format.h"
#include "apps/interop/hf_files.h"
#include "apps/common/model_io.h"
#include "core/io/safetensors.h"
#include "data/tokenizer/tokenizer.h"
#include "nn/transformer.h"
#include "temp_dir.h"

using namespace ember;
using namespace ember::apps;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using testing::TempDir;
using testing::read_text;

nn::ModelConfig config(const json& overrides) {
  json c = {{"vocab_size", 257}, {"d_model", 16},    {"n_layers", 2},   {"n_heads", 4},
            {"max_seq_len", 12}, {"ffn_hidden", 24}, {"qk_norm", false}};
  c.update(overrides);
  return nn::ModelConfig::from_json(c.dump());
}

const json kLlama = {
    {"n_kv_heads", 2}, {"tie_embeddings", false}, {"z_loss_coef", 1e-4}, {"dropout", 0.1}};
const json kQwen3 = {{"qk_norm", true}, {"n_kv_heads", 1}, {"head_dim", 8}};
const json kQwen3Moe = {{"qk_norm", true},
                        {"n_kv_heads", 2},
                        {"moe",
                         {{"n_experts", 3},
                          {"top_k", 2},
                          {"expert_hidden", 8},
                          {"every", 2},
                          {"router_z_loss_coef", 0.001},
                          {"aux_loss_coef", 0.02}}}};
const json kGpt2 = {
    {"norm", "layernorm"}, {"pos", "learned"}, {"ffn_act", "gelu_tanh"}, {"bias", true}};

// A checkpoint of a seeded random model with the byte tokenizer + <|endoftext|>.
std::string make_checkpoint(const TempDir& dir, const nn::ModelConfig& cfg) {
  nn::Checkpoint c;
  c.config = cfg;
  c.model = nn::Transformer(cfg, 11).state_dict();
  c.tokenizer_json = data::Tokenizer::bytes({std::string(data::kEndOfText)}).to_json();
  nn::write_checkpoint(dir / "model.h5", c);
  return dir / "model.h5";
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.contiguous().raw_data(), b.contiguous().raw_data(), a.nbytes()) == 0;
}

void check_round_trip(const std::string& original, const std::string& imported) {
  const nn::Checkpoint a = nn::read_checkpoint(original), b = nn::read_checkpoint(imported);
  CHECK(a.config.to_json() == b.config.to_json());
  CHECK(a.tokenizer_json == b.tokenizer_json);
  REQUIRE(a.model.size() == b.model.size());
  for (const auto& [name, t] : a.model) {
    INFO(name);
    REQUIRE(b.model.count(name));
    CHECK(same_bits(t, b.model.at(name)));
  }
}

Shape shape_of(const SafetensorsFile& f, const std::string& name) {
  INFO(name);
  REQUIRE(f.contains(name));
  return f.entries().at(name).shape;
}

std::string arch_error(const json& overrides) {
  try {
    hf_arch_for(config(overrides));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string import_error(const json& hf_config) {
  try {
    hf_config_from_json(hf_config.dump(), "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE(
    "hf export: names, shapes and config keys of each class, and import gives the same bits") {
  struct Case {
    const char* arch;
    json overrides;
  };
  for (const Case& c : {Case{"LlamaForCausalLM", kLlama}, Case{"Qwen3ForCausalLM", kQwen3},
                        Case{"Qwen3MoeForCausalLM", kQwen3Moe}, Case{"GPT2LMHeadModel", kGpt2}}) {
    INFO(c.arch);
    TempDir dir("hf");
    const nn::ModelConfig cfg = config(c.overrides);
    const std::string ckpt = make_checkpoint(dir, cfg);
    export_hf(ckpt, dir / "hf");
    const json hc = json::parse(read_text(dir / "hf/config.json"));
    CHECK(hc["architectures"][0] == c.arch);
    CHECK(json::parse(read_text(dir / "hf/generation_config.json"))["eos_token_id"] == 256);
    CHECK(data::Tokenizer::load(dir / "hf/tokenizer.json").find_special(data::kEndOfText) == 256u);
    const SafetensorsFile f(dir / "hf/model.safetensors");
    const std::map<std::string, Tensor> state = nn::Transformer(cfg, 11).state_dict();
    const std::string arch = c.arch;
    if (arch == "GPT2LMHeadModel") {
      const int64_t d = 16;
      CHECK(hc["activation_function"] == "gelu_new");
      CHECK(hc["n_embd"] == d);
      CHECK(shape_of(f, "transformer.wte.weight") == Shape({257, d}));
      CHECK(shape_of(f, "transformer.wpe.weight") == Shape({12, d}));
      CHECK(shape_of(f, "transformer.h.1.ln_1.bias") == Shape({d}));
      CHECK(shape_of(f, "transformer.h.0.attn.c_attn.weight") == Shape({d, 3 * d}));
      CHECK(shape_of(f, "transformer.h.0.attn.c_attn.bias") == Shape({3 * d}));
      CHECK(shape_of(f, "transformer.h.0.attn.c_proj.weight") == Shape({d, d}));
      CHECK(shape_of(f, "transformer.h.0.mlp.c_fc.weight") == Shape({d, 24}));
      CHECK(shape_of(f, "transformer.h.0.mlp.c_proj.weight") == Shape({24, d}));
      CHECK(shape_of(f, "transformer.ln_f.bias") == Shape({d}));
      CHECK(f.entries().size() == 2 + 2 * 12 + 2);  // tied: no lm_head
      // Conv1D [in, out]: column d + j of c_attn is row j of k_proj; v follows k.
      const Tensor c_attn = f.read("transformer.h.0.attn.c_attn.weight");
      const Tensor k = state.at("model.layers.0.self_attn.k_proj.weight"),
                   v = state.at("model.layers.0.self_attn.v_proj.weight");
      CHECK(c_attn.at({5, d + 3}) == k.at({3, 5}));
      CHECK(c_attn.at({2, 2 * d + 7}) == v.at({7, 2}));
      CHECK(f.read("transformer.h.1.attn.c_attn.bias").at({d + 1}) ==
            state.at("model.layers.1.self_attn.k_proj.bias").at({1}));
    } else {
      // Llama-family names: docs/model.md#parameter-names; every parameter, same name, same shape.
      REQUIRE(f.entries().size() == state.size());
      for (const auto& [name, t] : state) CHECK(shape_of(f, name) == t.shape());
      CHECK(hc["hidden_act"] == "silu");
      CHECK(hc["num_key_value_heads"] == cfg.n_kv_heads);
      CHECK(hc["head_dim"] == cfg.head_dim);
      CHECK(hc["tie_word_embeddings"] == cfg.tie_embeddings);
      CHECK(f.contains("lm_head.weight") == !cfg.tie_embeddings);
    }
    if (arch == "Qwen3ForCausalLM")
      CHECK(shape_of(f, "model.layers.1.self_attn.k_norm.weight") == Shape({8}));
    if (arch == "Qwen3MoeForCausalLM") {
      CHECK(hc["decoder_sparse_step"] == 2);
      CHECK(hc["mlp_only_layers"] == json::array());
      CHECK(hc["moe_intermediate_size"] == 8);
      CHECK(hc["router_aux_loss_coef"] == 0.02);
      CHECK(shape_of(f, "model.layers.0.mlp.gate_proj.weight") ==
            Shape({24, 16}));                                                  // dense layer 0
      CHECK(shape_of(f, "model.layers.1.mlp.gate.weight") == Shape({3, 16}));  // router of layer 1
      CHECK(shape_of(f, "model.layers.1.mlp.experts.2.down_proj.weight") == Shape({16, 8}));
    }
    import_hf(dir / "hf", dir / "back.h5", {});
    check_round_trip(ckpt, dir / "back.h5");
  }
}

TEST_CASE("hf import: shards, Hub-style GPT-2 names, buffers and the tokenizer options") {
  TempDir dir("hf");
  const nn::ModelConfig cfg = config(kGpt2);
  const std::string ckpt = make_checkpoint(dir, cfg);
  export_hf(ckpt, dir / "hf");
  const SafetensorsFile f(dir / "hf/model.safetensors");
  // Two shards + index, names without "transformer." (GPT2Model's), plus the attn.bias /
  // masked_bias buffers.
  fs::create_directories(dir / "sharded");
  std::map<std::string, Tensor> shard[2];
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  int i = 0;
  for (const auto& [name, e] : f.entries()) {
    const std::string hub = name.substr(std::string("transformer.").size());
    shard[i % 2][hub] = f.read(name);
    index["weight_map"][hub] =
        i % 2 ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
    ++i;
  }
  shard[0]["h.0.attn.bias"] = Tensor::ones({1, 1, 12, 12});
  shard[1]["h.1.attn.masked_bias"] = Tensor::scalar(-1e4);
  index["weight_map"]["h.0.attn.bias"] = "model-00001-of-00002.safetensors";
  index["weight_map"]["h.1.attn.masked_bias"] = "model-00002-of-00002.safetensors";
  write_safetensors(dir / "sharded/model-00001-of-00002.safetensors", shard[0]);
  write_safetensors(dir / "sharded/model-00002-of-00002.safetensors", shard[1]);
  std::ofstream(dir / "sharded/model.safetensors.index.json") << index.dump();
  fs::copy_file(dir / "hf/config.json", dir / "sharded/config.json");

  // No tokenizer.json in the folder: an error unless --tokenizer or --no-tokenizer.
  CHECK_THROWS_WITH(import_hf(dir / "sharded", dir / "x.h5", {}),
                    Catch::Contains("tokenizer.json: missing"));
  CHECK_FALSE(fs::exists(dir / "x.h5"));
  import_hf(dir / "sharded", dir / "back.h5", {dir / "hf/tokenizer.json", false});
  check_round_trip(ckpt, dir / "back.h5");
  import_hf(dir / "sharded", dir / "bare.h5", {"", true});
  CHECK(nn::read_checkpoint(dir / "bare.h5").tokenizer_json.empty());

  // A weight_map naming a tensor its shard lacks.
  json& entry = index["weight_map"]["h.0.ln_1.weight"];
  entry = entry == "model-00001-of-00002.safetensors" ? "model-00002-of-00002.safetensors"
                                                      : "model-00001-of-00002.safetensors";
  std::ofstream(dir / "sharded/model.safetensors.index.json") << index.dump();
  CHECK_THROWS_WITH(import_hf(dir / "sharded", dir / "y.h5", {"", true}),
                    Catch::Contains("no tensor \"h.0.ln_1.weight\""));
}

TEST_CASE("hf export: configs with no exact Hugging Face equivalent name the key") {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"sliding_window", 4}}, "sliding_window"},
      {{{"attn_softcap", 30.0}}, "attn_softcap"},
      {{{"final_softcap", 30.0}}, "final_softcap"},
      {{{"parallel_block", true}}, "parallel_block"},
      {{{"pos", "sinusoidal"}}, "pos"},
      {{{"pos", "none"}}, "pos"},
      {{{"norm", "layernorm"}}, "norm"},
      {{{"ffn_act", "gelu"}}, "ffn_act"},
      {{{"qk_norm", true}, {"bias", true}}, "bias"},
      {{{"moe", {{"n_experts", 2}, {"top_k", 1}}}}, "qk_norm"},
      {{{"qk_norm", true}, {"moe", {{"n_experts", 2}, {"top_k", 1}, {"n_shared", 1}}}},
       "moe.n_shared"},
      {{{"pos", "learned"}, {"norm", "rmsnorm"}, {"bias", true}, {"ffn_act", "gelu"}}, "norm"},
      {{{"pos", "learned"}, {"norm", "layernorm"}, {"bias", false}, {"ffn_act", "gelu"}}, "bias"},
      {{{"pos", "learned"}, {"norm", "layernorm"}, {"bias", true}, {"ffn_act", "swiglu"}},
       "ffn_act"},
      {{{"pos", "learned"},
        {"norm", "layernorm"},
        {"bias", true},
        {"ffn_act", "relu"},
        {"n_kv_heads", 2}},
       "n_kv_heads"},
      {{{"pos", "learned"},
        {"norm", "layernorm"},
        {"bias", true},
        {"ffn_act", "relu"},
        {"head_dim", 8}},
       "head_dim"},
  };
  for (const auto& [overrides, key] : cases) {
    INFO(overrides.dump());
    const std::string err = arch_error(overrides);
    CHECK(err.find("config key \"" + key + "\"") != std::string::npos);
    CHECK(err.find('\n') == std::string::npos);
  }
  CHECK(arch_error({{"pos", "learned"},
                    {"norm", "layernorm"},
                    {"bias", true},
                    {"ffn_act", "relu"},
                    {"tie_embeddings", false}}) == "");
}

TEST_CASE("hf import: config.json keys that change the math are errors naming the key") {
  const json llama = json::parse(hf_config_json(config(kLlama), HfArch::Llama, std::nullopt));
  const json qwen3 = json::parse(hf_config_json(config(kQwen3), HfArch::Qwen3, std::nullopt));
  const json moe = json::parse(hf_config_json(config(kQwen3Moe), HfArch::Qwen3Moe, std::nullopt));
  const json gpt2 = json::parse(hf_config_json(config(kGpt2), HfArch::GPT2, 256));
  for (const json& j : {llama, qwen3, moe, gpt2}) CHECK(import_error(j) == "");
  // v5-style rope_parameters carry rope_theta.
  json v5 = llama;
  v5.erase("rope_theta");
  v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
  CHECK(hf_config_from_json(v5.dump(), "config.json").config.rope_theta == 1e6);
  // Missing keys take the class's defaults: Qwen3's head_dim is 128, Qwen3-MoE's
  // num_key_value_heads 4, Llama's num_key_value_heads = num_attention_heads.
  json bare_qwen3 = qwen3, bare_moe = moe, bare_llama = llama;
  bare_qwen3.erase("head_dim");
  bare_moe.erase("num_key_value_heads");
  bare_llama.erase("num_key_value_heads");
  CHECK(hf_config_from_json(bare_qwen3.dump(), "c").config.head_dim == 128);
  CHECK(hf_config_from_json(bare_moe.dump(), "c").config.n_kv_heads == 4);
  CHECK(hf_config_from_json(bare_llama.dump(), "c").config.n_kv_heads == 4);

  auto with = [](json j, const std::string& key, const json& value) {
    j[key] = value;
    return j;
  };
  const std::vector<std::pair<json, std::string>> cases = {
      {with(llama, "rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}), "rope_scaling"},
      {with(llama, "hidden_act", "gelu_pytorch_tanh"), "hidden_act"},
      {with(llama, "mlp_bias", true), "mlp_bias"},
      {with(llama, "some_new_option", 1), "some_new_option"},
      {with(llama, "architectures", {"MistralForCausalLM"}), "architectures"},
      {with(qwen3, "use_sliding_window", true), "use_sliding_window"},
      {with(qwen3, "layer_types", {"full_attention", "sliding_attention"}), "layer_types"},
      {with(qwen3, "attention_bias", true), "attention_bias"},
      {with(moe, "mlp_only_layers", {0}), "mlp_only_layers"},
      {with(gpt2, "scale_attn_by_inverse_layer_idx", true), "scale_attn_by_inverse_layer_idx"},
      {with(gpt2, "activation_function", "silu"), "activation_function"},
      {with(gpt2, "n_embd", "16"), "n_embd"},
  };
  for (const auto& [j, key] : cases) {
    INFO(key);
    const std::string err = import_error(j);
    CHECK(err.find("\"" + key + "\"") != std::string::npos);
    CHECK(err.find('\n') == std::string::npos);
  }
}

TEST_CASE("hf export: a checkpoint without a tokenizer and a vocabulary below the bytes") {
  TempDir dir("hf");
  nn::Checkpoint c;
  c.config = config({{"vocab_size", 64}});
  c.model = nn::Transformer(c.config, 3).state_dict();
  nn::write_checkpoint(dir / "model.h5", c);
  const HfExport done = export_hf(dir / "model.h5", dir / "hf");
  CHECK(done.arch == HfArch::Llama);
  CHECK_FALSE(done.tokenizer);
  CHECK_FALSE(fs::exists(dir / "hf/tokenizer.json"));
  CHECK_FALSE(fs::exists(dir / "hf/generation_config.json"));
  CHECK_THROWS_WITH(import_hf(dir / "hf", dir / "back.h5", {}), Catch::Contains("--no-tokenizer"));
  import_hf(dir / "hf", dir / "back.h5", {"", true});
  check_round_trip(dir / "model.h5", dir / "back.h5");
}

TEST_CASE("hf library: export_hf then import_hf (no CLI) gives back the model's weights") {
  TempDir dir("hf");
  const nn::ModelConfig cfg = config(kGpt2);
  const std::map<std::string, Tensor> weights = nn::Transformer(cfg, 11).state_dict();
  const HfExport done = export_hf(make_checkpoint(dir, cfg), dir / "folder");
  CHECK(done.arch == HfArch::GPT2);
  CHECK(done.tokenizer);
  import_hf(dir / "folder", dir / "imported.h5", {});
  const nn::Checkpoint back = nn::read_checkpoint(dir / "imported.h5");
  CHECK(back.config.to_json() == cfg.to_json());
  REQUIRE(back.model.size() == weights.size());
  for (const auto& [name, t] : weights) {
    INFO(name);
    REQUIRE(back.model.count(name));
    CHECK(same_bits(t, back.model.at(name)));
  }
  // The library call itself never overwrites a file.
  CHECK_THROWS_WITH(import_hf(dir / "folder", dir / "imported.h5", {}),
                    Catch::Contains("import never overwrites a file"));
}

TEST_CASE("hf import: huge or malformed config.json values are one line naming the key") {
  const json llama = json::parse(hf_config_json(config(kLlama), HfArch::Llama, std::nullopt));
  const json gpt2 = json::parse(hf_config_json(config(kGpt2), HfArch::GPT2, 256));
  const json moe = json::parse(hf_config_json(config(kQwen3Moe), HfArch::Qwen3Moe, std::nullopt));
  auto with = [](json j, const std::string& key, const json& value) {
    j[key] = value;
    return j;
  };
  const std::vector<std::tuple<json, std::string, std::string>> cases = {
      {with(llama, "hidden_size", int64_t{1} << 62), "hidden_size", "between 1 and 1048576"},
      {with(llama, "num_hidden_layers", 1000000000), "num_hidden_layers", "between 1 and 65536"},
      {with(llama, "vocab_size", int64_t{1} << 40), "vocab_size", "between 1 and 16777216"},
      {with(llama, "num_attention_heads", 0), "num_attention_heads", "between 1 and 65536"},
      {with(llama, "intermediate_size", -1), "intermediate_size", "between 1 and 4194304"},
      {with(llama, "max_position_embeddings", uint64_t{1} << 63), "max_position_embeddings", "too large"},
      {with(gpt2, "n_embd", int64_t{1} << 62), "n_embd", "between 1 and 1048576"},
      {with(gpt2, "n_head", 0), "n_head", "between 1 and 65536"},
      {with(moe, "num_experts", 1 << 20), "num_experts", "between 1 and 65536"},
      // wrong types where nlohmann would throw its own type_error
      {with(llama, "architectures", {1}), "architectures", "must be a list of class names"},
      {with(llama, "rope_scaling", {{"rope_type", 3}}), "rope_scaling", "\"rope_type\" must be a string"},
      {with(llama, "rope_scaling", {{"rope_theta", "big"}}), "rope_scaling", "\"rope_theta\" must be a number"},
  };
  for (const auto& [j, key, what] : cases) {
    INFO(key << ": " << what);
    const std::string err = import_error(j);
    CHECK(err.starts_with("config.json: key \"" + key + "\""));
    CHECK(err.find(what) != std::string::npos);
    CHECK(err.find('\n') == std::string::npos);
  }
  // Not JSON, or not an object: the file named, no library text.
  for (const char* text : {"{\"vocab_size\": ", "[]", "nul"}) {
    INFO(text);
    std::string err;
    try {
      hf_config_from_json(text, "dir/config.json");
    } catch (const Error& e) {
      err = e.what();
    }
    CHECK(err.starts_with("dir/config.json: "));
    CHECK(err.find("json.exception") == std::string::npos);
  }
  // Within the bounds but beyond 2^48 parameters: the count, not a wrapped number.
  json big = with(with(llama, "hidden_size", 1 << 20), "num_hidden_layers", 65536);
  big = with(with(big, "intermediate_size", 1 << 22), "num_attention_heads", 1024);
  big.erase("head_dim");
  CHECK(import_error(big).find("parameters, more than the limit of 281474976710656 (2^48)") !=
        std::string::npos);
}

TEST_CASE("a checkpoint whose stored config is too large is refused before a model is built") {
  TempDir dir("ember_ckpt_huge");
  nn::Checkpoint c;
  c.model["model.norm.weight"] = Tensor::ones({16});
  // Beyond a key's bound: one line naming the file and the key.
  c.config = config(json::object());
  c.config.d_model = int64_t{1} << 62;
  nn::write_checkpoint(dir / "bound.h5", c);
  CHECK_THROWS_WITH(nn::read_checkpoint_config(dir / "bound.h5"),
                    Catch::StartsWith(dir / "bound.h5" + ": config: key \"d_model\" must be between 1 and"));
  CHECK_THROWS_WITH(export_hf(dir / "bound.h5", dir / "out"), Catch::Contains("key \"d_model\""));
  // Within the bounds but 603 GiB of weights: the model is not built (eval, generate).
  c.config = nn::ModelConfig::from_json(R"({"d_model": 8192, "n_layers": 200, "n_heads": 64})");
  nn::write_checkpoint(dir / "memory.h5", c);
  CHECK_THROWS_WITH(load_model(dir / "memory.h5"),
                    Catch::StartsWith("the model needs 603 GiB to run it (float32)") &&
                        Catch::Contains("but this machine has"));
}

TEST_CASE("hf import: a model larger than this machine is refused before its weights are read") {
  TempDir dir("ember_hf_huge");
  fs::create_directories(dir / "in");
  // 8192 x 200 layers: 603 GiB of float32 weights (no model.safetensors needed to refuse it).
  dir.write("in/config.json",
            R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 256, "hidden_size": 8192,
                "num_hidden_layers": 200, "num_attention_heads": 64, "intermediate_size": 22016})");
  CHECK_THROWS_WITH(import_hf(dir / "in", dir / "out.h5", HfImportOptions{"", true}),
                    Catch::StartsWith(dir / "in/config.json" + ": the model needs 603 GiB to run it") &&
                        Catch::Contains("but this machine has"));
  CHECK_FALSE(fs::exists(dir / "out.h5"));
}

namespace {

// A reward checkpoint of config(overrides) with a ChatML byte tokenizer, written to dir/name.h5.
nn::Checkpoint reward_checkpoint(const TempDir& dir, json overrides, const std::string& name) {
  overrides["reward"] = {{"center_rewards", 0.0}};
  overrides["vocab_size"] = 259;
  nn::Checkpoint c;
  c.config = config(overrides);
  c.model = nn::Transformer(c.config, 11).state_dict();
  c.tokenizer_json =
      data::Tokenizer::bytes({"<|endoftext|>", "<|im_start|>", "<|im_end|>"}).to_json();
  nn::write_checkpoint(dir / (name + ".h5"), c);
  return c;
}

// The exported folder dir/name of reward checkpoint c: the language-model class's config.json keys
// with the classifier's, every tensor but lm_head bit for bit, score.weight [1, d_model].
void check_reward_folder(const TempDir& dir, const nn::Checkpoint& c, const std::string& name,
                         HfArch arch, const std::string& classifier) {
  const json j = json::parse(read_text(dir / (name + "/config.json")));
  CHECK(j.at("architectures") == json::array({classifier}));
  CHECK(j.at("num_labels") == 1);
  CHECK(j.at("id2label") == json{{"0", "LABEL_0"}});
  CHECK(j.at("label2id") == json{{"LABEL_0", 0}});
  CHECK(j.at("pad_token_id") == 257);  // <|im_start|>: never a side's last token
  CHECK(j.at("eos_token_id") == 256);  // <|endoftext|>
  CHECK(j.at("tie_word_embeddings") == false);
  // Every other key is the language-model export's (model_type, q/k norm and expert keys).
  json lm = json::parse(hf_config_json(c.config, arch, 256)), rest = j;
  for (const char* k : {"architectures", "tie_word_embeddings"}) lm.erase(k);
  for (const char* k : {"architectures", "tie_word_embeddings", "num_labels", "id2label",
                        "label2id", "pad_token_id"}) {
    rest.erase(k);
  }
  CHECK(rest == lm);
  CHECK_FALSE(fs::exists(dir / (name + "/generation_config.json")));
  const SafetensorsFile f(dir / (name + "/model.safetensors"));
  CHECK_FALSE(f.contains("lm_head.weight"));
  CHECK(shape_of(f, "score.weight") == Shape{1, 16});
  CHECK(f.entries().size() == c.model.size() - c.model.count("lm_head.weight"));
  for (const auto& [t_name, t] : c.model) {
    INFO(t_name);
    if (t_name != "lm_head.weight") CHECK(same_bits(f.read(t_name), t));
  }
  // Back in: refused in one line (a sequence classifier is not a language model).
  CHECK_THROWS_WITH(import_hf(dir / name, dir / (name + "_back.h5"), {}),
                    Catch::Contains("\"" + classifier + "\" is a sequence classifier"));
  CHECK_FALSE(fs::exists(dir / (name + "_back.h5")));
}

}  // namespace

TEST_CASE("hf export of a reward model: the sequence classifier of its class, score.weight") {
  TempDir dir("hf_reward");
  for (const auto& [overrides, arch, classifier] :
       std::vector<std::tuple<json, HfArch, std::string>>{
           {kLlama, HfArch::Llama, "LlamaForSequenceClassification"},
           {kQwen3, HfArch::Qwen3, "Qwen3ForSequenceClassification"},
           {kQwen3Moe, HfArch::Qwen3Moe, "Qwen3MoeForSequenceClassification"}}) {
    INFO(classifier);
    const nn::Checkpoint c = reward_checkpoint(dir, overrides, classifier);
    REQUIRE(c.model.count("score.weight"));
    const HfExport done = export_hf(dir / (classifier + ".h5"), dir / classifier);
    CHECK(done.reward);
    CHECK(done.arch == arch);
    check_reward_folder(dir, c, classifier, arch, classifier);
  }
  // What no sequence classifier expresses is refused before anything is written: learned
  // positions (GPT2ForSequenceClassification is not an export target) and what the language-model
  // export refuses, naming the same key.
  for (const auto& [extra, key] : std::vector<std::pair<json, std::string>>{
           {{{"norm", "layernorm"},
             {"pos", "learned"},
             {"ffn_act", "gelu_tanh"},
             {"bias", true},
             {"n_kv_heads", 4}},
            "pos"},
           {{{"attn_softcap", 30.0}}, "attn_softcap"},
           {{{"moe", {{"n_experts", 2}, {"top_k", 1}}}}, "qk_norm"},
           {{{"qk_norm", true}, {"bias", true}}, "bias"}}) {
    json o = kLlama;
    o.update(extra);
    INFO(o.dump());
    reward_checkpoint(dir, o, "bad_" + key);
    CHECK_THROWS_WITH(export_hf(dir / ("bad_" + key + ".h5"), dir / ("out_" + key)),
                      Catch::Contains("config key \"" + key + "\""));
    CHECK_FALSE(fs::exists(dir / ("out_" + key)));
  }
}
