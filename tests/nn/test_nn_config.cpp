// ModelConfig: docs/model.md#config defaults, derived values, errors that
// name the key, size bounds, exact counts of huge models and the memory check.
#include <catch2/catch.hpp>
#include <filesystem>
#include <tuple>

#include "core/io/json_message.h"
#include "core/system_memory.h"
#include "nn/config.h"
#include "nn/sizing/model_stats.h"
#include "inference/model_runner/paged_forward.h"
#include "nn/transformer.h"

using namespace ember;
using namespace ember::nn;
using namespace ember::inference;

TEST_CASE("an empty object gives the documented defaults", "[config]") {
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

TEST_CASE("lora and quantize keys: parsed, written only with lora, errors name the key", "[config][lora]") {
  const ModelConfig base = ModelConfig::from_json(R"({"n_layers": 2})");
  CHECK_FALSE(base.lora);
  CHECK(base.quantize == "none");
  CHECK(base.to_json().find("lora") == std::string::npos);
  CHECK(base.to_json().find("quantize") == std::string::npos);

  const ModelConfig ft = ModelConfig::from_json(
      R"({"n_layers": 2, "lora": {"r": 4, "alpha": 8, "dropout": 0.1, "targets": ["q", "head"]},
          "quantize": "nf4-dq"})");
  REQUIRE(ft.lora);
  CHECK(ft.lora->r == 4);
  CHECK(ft.lora->alpha == 8);
  CHECK(ft.lora->dropout == 0.1);
  CHECK(ft.lora->targets == std::vector<std::string>{"q", "head"});
  CHECK(ft.quantize == "nf4-dq");
  const ModelConfig back = ModelConfig::from_json(ft.to_json());
  CHECK(back.to_json() == ft.to_json());
  CHECK(back.lora->targets == ft.lora->targets);
  // Defaults of docs/model.md#lora.
  const ModelConfig d = ModelConfig::from_json(R"({"lora": {}})");
  CHECK(d.lora->r == 8);
  CHECK(d.lora->alpha == 16);
  CHECK(d.lora->dropout == 0);
  CHECK(d.lora->targets == std::vector<std::string>{"q", "v"});
  CHECK(d.quantize == "none");
  CHECK(d.to_json().find("\"quantize\": \"none\"") != std::string::npos);

  auto err = [](const std::string& j) {
    try {
      ModelConfig::from_json(j, "ft.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(err(R"({"lora": {"r": 0}})"), Catch::Contains("ft.json: lora: key \"r\" must be >= 1, got 0"));
  CHECK_THAT(err(R"({"lora": {"alpha": 0}})"), Catch::Contains("key \"alpha\""));
  CHECK_THAT(err(R"({"lora": {"dropout": 1}})"), Catch::Contains("key \"dropout\""));
  CHECK_THAT(err(R"({"lora": {"targets": []}})"), Catch::Contains("key \"targets\""));
  CHECK_THAT(err(R"({"lora": {"targets": ["q", "x"]}})"), Catch::Contains("key \"targets\" holds \"x\""));
  CHECK_THAT(err(R"({"lora": {"targets": ["q", "q"]}})"), Catch::Contains("names \"q\" twice"));
  CHECK_THAT(err(R"({"lora": {"rank": 2}})"), Catch::Contains("unknown key \"rank\""));
  CHECK_THAT(err(R"({"lora": 3})"), Catch::Contains("key \"lora\" must be an object"));
  CHECK_THAT(err(R"({"lora": {}, "quantize": "int4"})"), Catch::Contains("key \"quantize\""));
  CHECK_THAT(err(R"({"quantize": "nf4"})"), Catch::Contains("key \"quantize\" is only valid with \"lora\""));
}

// --- sizes, overflow and memory (docs/model.md#checks) ---------------------------------------

namespace {

std::string config_error(const std::string& json_text) {
  try {
    ModelConfig::from_json(json_text, "huge.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// d_model 8192 x 200 layers, 64 heads of 128: within every key's bound, but
// 161,905,516,544 parameters (647.6 GB of float32 weights).
const char* kHugeDense = R"({"d_model": 8192, "n_layers": 200, "n_heads": 64})";

}  // namespace

TEST_CASE("sizes beyond their bounds are errors naming the key and the bound", "[config]") {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {R"({"d_model": 4611686018427387904})", "d_model", "1048576 (2^20)"},  // 2^62
      {R"({"n_layers": 1000000000})", "n_layers", "65536 (2^16)"},
      {R"({"vocab_size": 1099511627776})", "vocab_size", "16777216 (2^24)"},  // 2^40
      {R"({"n_heads": 0})", "n_heads", "between 1 and"},
      {R"({"n_heads": 131072, "head_dim": 2})", "n_heads", "65536 (2^16)"},
      {R"({"n_kv_heads": -2})", "n_kv_heads", "between 1 and"},
      {R"({"head_dim": 131072})", "head_dim", "65536 (2^16)"},
      {R"({"ffn_hidden": 9223372036854775807})", "ffn_hidden", "4194304 (2^22)"},
      {R"({"max_seq_len": 1073741824})", "max_seq_len", "16777216 (2^24)"},
      {R"({"moe": {"n_experts": 1048576}})", "n_experts", "65536 (2^16)"},
      {R"({"moe": {"expert_hidden": 4611686018427387904}})", "expert_hidden", "4194304 (2^22)"},
      {R"({"moe": {"n_shared": 4611686018427387904}})", "n_shared", "65536 (2^16)"},
      // beyond int64: not wrapped around to a negative or small number
      {R"({"sliding_window": 18446744073709551615})", "sliding_window", "too large"},
      {R"({"max_seq_len": 9223372036854775808})", "max_seq_len", "too large"},
  };
  for (const auto& [text, key, bound] : cases) {
    INFO(text);
    const std::string err = config_error(text);
    CHECK(err.starts_with("huge.json"));
    CHECK(err.find("\"" + key + "\"") != std::string::npos);
    CHECK(err.find(bound) != std::string::npos);
    CHECK(err.find('\n') == std::string::npos);
  }
}

TEST_CASE("a parameter count beyond 2^48 is an error, counted without overflow", "[config]") {
  // Every key within its bound; the counts are 2^62-ish (dense) and past 2^63 (MoE):
  // 65536 layers x 65536 experts x 3 x 2^20 x 2^22 = 3 x 2^90 parameters.
  for (const char* text :
       {R"({"d_model": 1048576, "n_layers": 65536, "n_heads": 1024, "ffn_hidden": 4194304})",
        R"({"d_model": 1048576, "n_layers": 65536, "n_heads": 1024,
            "moe": {"n_experts": 65536, "top_k": 65536, "expert_hidden": 4194304}})",
        R"({"d_model": 8192, "n_layers": 65536, "n_heads": 64, "vocab_size": 16777216,
            "tie_embeddings": false, "moe": {"n_experts": 4096}})"}) {
    INFO(text);
    const std::string err = config_error(text);
    CHECK(err.starts_with("huge.json: the model has "));
    CHECK(err.find("parameters, more than the limit of 281474976710656 (2^48)") != std::string::npos);
  }
}

TEST_CASE("model_stats of a huge config is exact, and its memory exceeds this machine's", "[config]") {
  const ModelConfig c = ModelConfig::from_json(kHugeDense);
  // By hand: ffn_hidden = 256 * ceil(21845 / 256) = 22016; per layer 4 d^2 attention +
  // 3 d 22016 SwiGLU + 2 d norms = 809,517,056; x 200 + 256 d embedding + d final norm.
  const ModelStats s = model_stats(c, 8, 256);
  CHECK(s.total_params == 161905516544);
  // 16 bytes per parameter + 4 x B x T x (200 x (4d + 4 x 8192 + 3 x 22016) + 2 x 256) floats
  CHECK(s.train_memory_bytes == 2806079684608);
  const MemoryNeed run = inference_memory(c), train = training_memory(c, 8, 256);
  CHECK(run.weights == 4 * 161905516544);
  CHECK(run.position_tables == 4 * 256 * 128);  // RoPE cos and sin, head_dim / 2 each
  CHECK(train.total() == s.train_memory_bytes + 4 * 256 * 128);
  REQUIRE(system_memory().bytes < run.total());  // 603 GiB: more than this test machine has
  CHECK_THROWS_WITH(require_fits_in_memory(run),
                    Catch::StartsWith("the model needs 603 GiB to run it (float32) (weights 603 GiB") &&
                        Catch::Contains("but this machine has " + bytes_str(system_memory().bytes)));
  CHECK_THROWS_WITH(require_fits_in_memory(train),
                    Catch::StartsWith("the model needs 2.55 TiB for training at B = 8, T = 256") &&
                        Catch::Contains("AdamW moments 1.18 TiB"));
  // Building it is refused before the first layer is allocated.
  CHECK_THROWS_WITH(Transformer(c, 0), Catch::Contains("but this machine has"));
  // A small model fits; a batch x length whose activations overflow int64 is an error.
  const ModelConfig small = ModelConfig::from_json("{}");
  CHECK_NOTHROW(require_fits_in_memory(training_memory(small, 8, 256)));
  CHECK_THROWS_WITH(model_stats(small, int64_t{1} << 40, int64_t{1} << 20),
                    Catch::Contains("overflows 64-bit integers"));
}

TEST_CASE("bytes_str uses powers of 1024", "[config]") {
  CHECK(bytes_str(512) == "512 bytes");
  CHECK(bytes_str(1536) == "1.50 KiB");
  CHECK(bytes_str(23.4L * (1 << 30)) == "23.4 GiB");
  CHECK(bytes_str(647622197248.0L) == "603 GiB");
}

TEST_CASE("a config that is not JSON, or of the wrong shape, is one line naming the file", "[config]") {
  for (const char* text : {"{", "not json", "{\"d_model\": 16,}", "[1, 2]", "\"text\"", ""}) {
    INFO(text);
    const std::string err = config_error(text);
    CHECK(err.starts_with("huge.json: "));
    CHECK(err.find("json.exception") == std::string::npos);
    CHECK(err.find('\n') == std::string::npos);
  }
  CHECK(config_error("{").find("invalid JSON: line 1, column 2") != std::string::npos);
  CHECK(config_error("[1, 2]") == "huge.json: a model config must be a JSON object, got array");
  CHECK(config_error(R"({"moe": [1]})").find("\"moe\" must be an object or null") != std::string::npos);
  CHECK(config_error(R"({"rope_theta": "big"})") ==
        "huge.json: key \"rope_theta\" must be a number, got \"big\"");
  // A folder given as the config file.
  const std::string dir = std::filesystem::temp_directory_path().string();
  CHECK_THROWS_WITH(ModelConfig::from_file(dir), Catch::StartsWith(dir + ": is a folder"));
}

TEST_CASE("json_message drops nlohmann's exception tag", "[config]") {
  CHECK(json_message("[json.exception.parse_error.101] parse error at line 1, column 2: syntax error") ==
        "line 1, column 2: syntax error");
  CHECK(json_message("[json.exception.type_error.302] type must be string, but is number") ==
        "type must be string, but is number");
  CHECK(json_message("plain") == "plain");
}

TEST_CASE("a KV cache beyond this machine's memory is refused before allocation", "[config]") {
  // 64 layers x 2 x 512 floats per token x 2^24 positions = 4 TiB (64 GiB a layer).
  const ModelConfig c = ModelConfig::from_json(
      R"({"d_model": 512, "n_layers": 64, "n_heads": 4, "max_seq_len": 16777216})");
  const MemoryNeed need = generation_memory(c, 16777216);
  CHECK(need.kv_cache == int64_t{64} * 2 * 512 * 4 * 16777216);
  CHECK(need.weights == inference_memory(c).weights);
  const int64_t blocks = 16777216 / kKVBlockSize;
  CHECK_THROWS_WITH(PagedKVStore(c, blocks),
                    Catch::StartsWith("the model needs 4.") &&
                        Catch::Contains("to generate with a KV cache of 16777216 tokens (float32)") &&
                        Catch::Contains("KV cache 4.00 TiB"));
  // bfloat16 keys and values: half; one block: the store's own figure.
  CHECK(generation_memory(c, 16777216, DType::BFloat16).kv_cache * 2 == need.kv_cache);
  CHECK_THROWS_WITH(PagedKVStore(c, blocks, DType::BFloat16),
                    Catch::Contains("of 16777216 tokens (bfloat16)") &&
                        Catch::Contains("KV cache 2.00 TiB"));
  CHECK(generation_memory(c, kKVBlockSize).kv_cache ==
        static_cast<int64_t>(PagedKVStore::bytes_per_block(c)));
}
