// `ember export --format gguf` (apps/interop/gguf_export.h) read back by a GGUF parser written
// here from ggml's GGUF specification: header, key count, tensor infos, 32-byte alignment, the
// architecture's keys, the tokenizer, and tensor data equal to the checkpoint's after llama's
// q/k row order (hand-written for head_dim 4), gpt2's fused qkv and the MoE stacks; bf16 and
// Q8_0 bytes; merged fine-tunes; and the refusals, which leave no file behind.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <variant>

#include "apps/interop/gguf_export.h"
#include "apps/interop/hf_files.h"
#include "core/io/sha256.h"
#include "core/kernels/bf16.h"
#include "core/quant/q8_0.h"
#include "data/tokenizer/tokenizer.h"
#include "nn/adapters/adapters.h"
#include "nn/checkpoint_file.h"
#include "nn/transformer.h"
#include "temp_dir.h"

using namespace ember;
using nlohmann::json;
using testing::TempDir;

namespace {

// --- an independent GGUF reader --------------------------------------------------------
using Value = std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<std::string>, std::vector<int64_t>>;

struct GgufTensor {
  std::vector<uint64_t> ne;
  uint32_t type = 0;
  uint64_t offset = 0;
};

struct Gguf {
  uint32_t version = 0;
  uint64_t n_tensors = 0, n_kv = 0, data_start = 0;
  std::map<std::string, Value> kv;
  std::map<std::string, GgufTensor> tensors;
  std::vector<std::string> tensor_order;
  std::string bytes;
  const char* data(const std::string& name) const { return bytes.data() + data_start + tensors.at(name).offset; }
};

struct Reader {
  const std::string& b;
  size_t p = 0;
  template <typename T>
  T get() {
    REQUIRE(p + sizeof(T) <= b.size());
    T v;
    std::memcpy(&v, b.data() + p, sizeof(T));
    p += sizeof(T);
    return v;
  }
  std::string str() {
    const auto n = get<uint64_t>();
    REQUIRE(p + n <= b.size());
    std::string s = b.substr(p, n);
    p += n;
    return s;
  }
  Value scalar(uint32_t type) {
    switch (type) {
      case 0: return uint64_t(get<uint8_t>());
      case 1: return int64_t(get<int8_t>());
      case 2: return uint64_t(get<uint16_t>());
      case 3: return int64_t(get<int16_t>());
      case 4: return uint64_t(get<uint32_t>());
      case 5: return int64_t(get<int32_t>());
      case 6: return double(get<float>());
      case 7: return get<uint8_t>() != 0;
      case 8: return str();
      case 10: return get<uint64_t>();
      case 11: return get<int64_t>();
      case 12: return get<double>();
    }
    FAIL("unknown GGUF value type " << type);
    return false;
  }
  Value value(uint32_t type) {
    if (type != 9) return scalar(type);
    const auto et = get<uint32_t>();
    const auto n = get<uint64_t>();
    if (et == 8) {
      std::vector<std::string> v;
      for (uint64_t i = 0; i < n; ++i) v.push_back(str());
      return v;
    }
    std::vector<int64_t> v;
    for (uint64_t i = 0; i < n; ++i) {
      const Value x = scalar(et);
      v.push_back(std::holds_alternative<int64_t>(x) ? std::get<int64_t>(x) : int64_t(std::get<uint64_t>(x)));
    }
    return v;
  }
};

Gguf parse(const std::string& path) {
  Gguf g;
  g.bytes = testing::read_text(path);
  Reader r{g.bytes};
  REQUIRE(g.bytes.substr(0, 4) == "GGUF");
  r.p = 4;
  g.version = r.get<uint32_t>();
  g.n_tensors = r.get<uint64_t>();
  g.n_kv = r.get<uint64_t>();
  for (uint64_t i = 0; i < g.n_kv; ++i) {
    const std::string key = r.str();
    REQUIRE(g.kv.count(key) == 0);
    g.kv[key] = r.value(r.get<uint32_t>());
  }
  for (uint64_t i = 0; i < g.n_tensors; ++i) {
    const std::string name = r.str();
    GgufTensor t;
    const auto nd = r.get<uint32_t>();
    for (uint32_t d = 0; d < nd; ++d) t.ne.push_back(r.get<uint64_t>());
    t.type = r.get<uint32_t>();
    t.offset = r.get<uint64_t>();
    g.tensors[name] = t;
    g.tensor_order.push_back(name);
  }
  g.data_start = (r.p + 31) / 32 * 32;
  return g;
}

uint64_t numel(const GgufTensor& t) {
  uint64_t n = 1;
  for (uint64_t d : t.ne) n *= d;
  return n;
}

uint64_t nbytes(const GgufTensor& t) {
  if (t.type == 0) return numel(t) * 4;
  if (t.type == 30) return numel(t) * 2;
  REQUIRE(t.type == 8);
  return numel(t) / 32 * 34;
}

// The layout rules every file must keep: offsets aligned, in order, not overlapping, the file's end.
void check_layout(const Gguf& g) {
  CHECK(g.version == 3);
  CHECK(g.n_tensors == g.tensors.size());
  CHECK(std::get<uint64_t>(g.kv.at("general.alignment")) == 32);
  CHECK(g.data_start % 32 == 0);
  uint64_t end = 0;
  for (const std::string& name : g.tensor_order) {
    const GgufTensor& t = g.tensors.at(name);
    CHECK(t.offset % 32 == 0);
    CHECK(t.offset >= end);
    end = t.offset + nbytes(t);
  }
  CHECK(g.bytes.size() == g.data_start + end);
}

std::vector<float> f32(const Gguf& g, const std::string& name) {
  const GgufTensor& t = g.tensors.at(name);
  REQUIRE(t.type == 0);
  std::vector<float> v(numel(t));
  std::memcpy(v.data(), g.data(name), v.size() * 4);
  return v;
}

uint64_t u(const Gguf& g, const std::string& key) { return std::get<uint64_t>(g.kv.at(key)); }
std::string s(const Gguf& g, const std::string& key) { return std::get<std::string>(g.kv.at(key)); }

// --- checkpoints ---------------------------------------------------------------------
nn::ModelConfig config_of(const json& overrides = json::object()) {
  json c = {{"vocab_size", 260}, {"d_model", 8}, {"n_layers", 2}, {"n_heads", 2}, {"n_kv_heads", 1},
            {"ffn_hidden", 16}, {"max_seq_len", 24}, {"tie_embeddings", false}};
  c.update(overrides);
  return nn::ModelConfig::from_json(c.dump());
}

std::string chat_tokenizer() {
  return data::Tokenizer::bytes({"<|endoftext|>", "<|im_start|>", "<|im_end|>"}).to_json();
}

// A checkpoint of random weights (seed 3) with the 259-token byte tokenizer.
std::string write_model(const TempDir& dir, const nn::ModelConfig& cfg, const std::string& name = "m.h5") {
  nn::Checkpoint c;
  c.config = cfg;
  c.model = nn::Transformer(cfg, 3).state_dict();
  c.tokenizer_json = chat_tokenizer();
  nn::write_checkpoint(dir / name, c);
  return dir / name;
}

std::vector<float> weight(const std::string& checkpoint, const std::string& name) {
  return nn::read_checkpoint(checkpoint, false).model.at(name).to(DType::Float32).contiguous().to_vector<float>();
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

TEST_CASE("gguf export of a llama config: keys, tokenizer, and q/k rows in llama's interleaved order",
          "[gguf]") {
  TempDir dir("gguf_llama");
  const std::string ck = write_model(dir, config_of());
  const apps::GgufExport done = apps::export_gguf(ck, dir / "m.gguf", "float32");
  CHECK(done.arch == "llama");
  const Gguf g = parse(dir / "m.gguf");
  check_layout(g);
  CHECK(g.n_kv == g.kv.size());
  CHECK(s(g, "general.architecture") == "llama");
  CHECK(u(g, "general.file_type") == 0);
  CHECK(u(g, "llama.embedding_length") == 8);
  CHECK(u(g, "llama.block_count") == 2);
  CHECK(u(g, "llama.feed_forward_length") == 16);
  CHECK(u(g, "llama.attention.head_count") == 2);
  CHECK(u(g, "llama.attention.head_count_kv") == 1);
  CHECK(u(g, "llama.rope.dimension_count") == 4);
  CHECK(u(g, "llama.context_length") == 24);
  CHECK(u(g, "llama.vocab_size") == 260);
  CHECK(std::get<double>(g.kv.at("llama.rope.freq_base")) == 10000.0);
  CHECK(std::get<double>(g.kv.at("llama.attention.layer_norm_rms_epsilon")) == Approx(1e-5).epsilon(1e-6));
  // 2 layers x (2 norms + q k v o + gate up down) + token_embd + output_norm + output
  CHECK(g.n_tensors == 2 * 9 + 3);
  CHECK(g.tensors.at("token_embd.weight").ne == std::vector<uint64_t>{8, 260});
  CHECK(g.tensors.at("blk.1.attn_k.weight").ne == std::vector<uint64_t>{8, 4});
  CHECK(g.tensors.at("blk.0.ffn_down.weight").ne == std::vector<uint64_t>{16, 8});
  CHECK(g.tensors.at("blk.0.attn_norm.weight").ne == std::vector<uint64_t>{8});
  CHECK(f32(g, "token_embd.weight") == weight(ck, "model.embed_tokens.weight"));
  CHECK(f32(g, "output.weight") == weight(ck, "lm_head.weight"));
  CHECK(f32(g, "blk.1.attn_v.weight") == weight(ck, "model.layers.1.self_attn.v_proj.weight"));
  CHECK(f32(g, "blk.1.ffn_gate.weight") == weight(ck, "model.layers.1.mlp.gate_proj.weight"));
  // head_dim 4: rotate-half pairs (0,2), (1,3) become interleaved pairs (0,1), (2,3): rows 0 2 1 3.
  const std::vector<int> order = {0, 2, 1, 3, 4, 6, 5, 7};
  const std::vector<float> q = weight(ck, "model.layers.0.self_attn.q_proj.weight");
  const std::vector<float> gq = f32(g, "blk.0.attn_q.weight");
  for (int r = 0; r < 8; ++r) {
    for (int c = 0; c < 8; ++c) CHECK(gq[r * 8 + c] == q[order[r] * 8 + c]);
  }
  const std::vector<float> k = weight(ck, "model.layers.0.self_attn.k_proj.weight");
  const std::vector<float> gk = f32(g, "blk.0.attn_k.weight");
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 8; ++c) CHECK(gk[r * 8 + c] == k[order[r] * 8 + c]);
  }
}

TEST_CASE("gguf export writes the byte-level tokenizer, its control tokens and ChatML", "[gguf]") {
  TempDir dir("gguf_vocab");
  apps::export_gguf(write_model(dir, config_of()), dir / "m.gguf", "float32");
  const Gguf g = parse(dir / "m.gguf");
  CHECK(s(g, "tokenizer.ggml.model") == "gpt2");
  CHECK(s(g, "tokenizer.ggml.pre") == "gpt-2");
  const auto& tokens = std::get<std::vector<std::string>>(g.kv.at("tokenizer.ggml.tokens"));
  const auto& types = std::get<std::vector<int64_t>>(g.kv.at("tokenizer.ggml.token_type"));
  REQUIRE(tokens.size() == 260);
  REQUIRE(types.size() == 260);
  CHECK(tokens[0] == "\xC4\x80");    // byte 0 is U+0100 in GPT-2's byte-level alphabet
  CHECK(tokens[32] == "\xC4\xA0");   // the space is U+0120 'Ġ'
  CHECK(tokens[65] == "A");
  CHECK(tokens[256] == "<|endoftext|>");
  CHECK(tokens[258] == "<|im_end|>");
  CHECK(tokens[259] == "[PAD259]");  // the model's row past the tokenizer's ids
  CHECK(types[65] == 1);
  CHECK(types[257] == 3);
  CHECK(types[259] == 5);
  CHECK(std::get<std::vector<std::string>>(g.kv.at("tokenizer.ggml.merges")).empty());
  CHECK(u(g, "tokenizer.ggml.eos_token_id") == 256);
  CHECK(u(g, "tokenizer.ggml.bos_token_id") == 256);
  CHECK(u(g, "tokenizer.ggml.eot_token_id") == 258);
  CHECK(std::get<bool>(g.kv.at("tokenizer.ggml.add_bos_token")) == false);
  CHECK(s(g, "tokenizer.chat_template").find("'<|im_start|>assistant\\n'") != std::string::npos);
}

TEST_CASE("gguf export of a qk-norm config is qwen3, rotate-half order kept, bf16 and Q8_0 bytes",
          "[gguf]") {
  TempDir dir("gguf_qwen3");
  const std::string ck = write_model(dir, config_of({{"qk_norm", true}, {"d_model", 32}, {"n_heads", 4},
                                                     {"n_kv_heads", 2}, {"ffn_hidden", 40}}));
  for (const std::string w : {"float32", "bf16", "int8"}) {
    apps::export_gguf(ck, dir / (w + ".gguf"), w);
  }
  const Gguf f = parse(dir / "float32.gguf"), b = parse(dir / "bf16.gguf"), q = parse(dir / "int8.gguf");
  for (const Gguf* g : {&f, &b, &q}) check_layout(*g);
  CHECK(s(f, "general.architecture") == "qwen3");
  CHECK(u(b, "general.file_type") == 32);
  CHECK(u(q, "general.file_type") == 7);
  const std::vector<float> wq = weight(ck, "model.layers.0.self_attn.q_proj.weight");
  CHECK(f32(f, "blk.0.attn_q.weight") == wq);  // NEOX RoPE: no permutation
  CHECK(f32(f, "blk.0.attn_q_norm.weight") == weight(ck, "model.layers.0.self_attn.q_norm.weight"));
  // bf16: matrices BF16 (round to nearest even of the float bits), vectors F32.
  CHECK(b.tensors.at("blk.0.attn_q.weight").type == 30);
  CHECK(b.tensors.at("blk.0.attn_norm.weight").type == 0);
  uint16_t h;
  std::memcpy(&h, b.data("blk.0.attn_q.weight") + 2 * 37, 2);
  CHECK(h == kernels::bfloat16_bits(wq[37]));
  // int8: Q8_0 where rows are 32 long; ffn_down's rows are 40 long, so it stays F32.
  CHECK(q.tensors.at("blk.0.attn_q.weight").type == 8);
  CHECK(q.tensors.at("token_embd.weight").type == 8);
  CHECK(q.tensors.at("blk.0.ffn_down.weight").type == 0);
  CHECK(q.tensors.at("blk.0.attn_q_norm.weight").type == 0);
  std::vector<float> back(wq.size());
  quant::dequantize_row_q8_0(reinterpret_cast<const quant::BlockQ8_0*>(q.data("blk.0.attn_q.weight")), back.data(),
                             static_cast<int64_t>(wq.size()));
  for (size_t blk = 0; blk < wq.size() / 32; ++blk) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(wq[blk * 32 + j]));
    for (size_t j = 0; j < 32; ++j) CHECK(std::fabs(back[blk * 32 + j] - wq[blk * 32 + j]) <= amax / 127 * (0.5f + 127 * 0x1p-11f));
  }
}

TEST_CASE("gguf export of a GPT-2 config: fused qkv, learned positions, LayerNorm biases", "[gguf]") {
  TempDir dir("gguf_gpt2");
  const std::string ck = write_model(dir, config_of({{"norm", "layernorm"}, {"pos", "learned"}, {"bias", true},
                                                     {"ffn_act", "gelu_tanh"}, {"n_kv_heads", 2},
                                                     {"tie_embeddings", true}}));
  CHECK(apps::export_gguf(ck, dir / "m.gguf", "float32").arch == "gpt2");
  const Gguf g = parse(dir / "m.gguf");
  check_layout(g);
  CHECK(std::get<double>(g.kv.at("gpt2.attention.layer_norm_epsilon")) == Approx(1e-5).epsilon(1e-6));
  CHECK(g.tensors.count("output.weight") == 0);  // tied: llama.cpp reuses token_embd
  CHECK(f32(g, "position_embd.weight") == weight(ck, "model.embed_positions.weight"));
  CHECK(g.tensors.at("position_embd.weight").ne == std::vector<uint64_t>{8, 24});
  CHECK(g.tensors.at("blk.0.attn_qkv.weight").ne == std::vector<uint64_t>{8, 24});
  std::vector<float> qkv;
  std::vector<float> qkv_b;
  for (const char* p : {"q", "k", "v"}) {
    const std::string n = std::string("model.layers.1.self_attn.") + p + "_proj.";
    for (float x : weight(ck, n + "weight")) qkv.push_back(x);
    for (float x : weight(ck, n + "bias")) qkv_b.push_back(x);
  }
  CHECK(f32(g, "blk.1.attn_qkv.weight") == qkv);
  CHECK(f32(g, "blk.1.attn_qkv.bias") == qkv_b);
  CHECK(f32(g, "blk.0.attn_norm.bias") == weight(ck, "model.layers.0.input_layernorm.bias"));
  CHECK(f32(g, "output_norm.bias") == weight(ck, "model.norm.bias"));
  CHECK(f32(g, "blk.0.ffn_up.bias") == weight(ck, "model.layers.0.mlp.up_proj.bias"));
}

TEST_CASE("gguf export of an MoE config: the router and [E, out, in] expert stacks", "[gguf]") {
  TempDir dir("gguf_moe");
  const json moe = {{"n_experts", 3}, {"top_k", 2}, {"expert_hidden", 12}};
  const std::string ck = write_model(dir, config_of({{"qk_norm", true}, {"moe", moe}}));
  const std::string ck_llama = write_model(dir, config_of({{"moe", moe}}), "l.h5");
  CHECK(apps::export_gguf(ck, dir / "m.gguf", "float32").arch == "qwen3moe");
  CHECK(apps::export_gguf(ck_llama, dir / "l.gguf", "float32").arch == "llama");
  const Gguf g = parse(dir / "m.gguf");
  check_layout(g);
  CHECK(u(g, "qwen3moe.expert_count") == 3);
  CHECK(u(g, "qwen3moe.expert_used_count") == 2);
  CHECK(u(g, "qwen3moe.expert_feed_forward_length") == 12);
  CHECK(g.tensors.at("blk.0.ffn_gate_inp.weight").ne == std::vector<uint64_t>{8, 3});
  CHECK(g.tensors.at("blk.0.ffn_up_exps.weight").ne == std::vector<uint64_t>{8, 12, 3});
  CHECK(g.tensors.at("blk.0.ffn_down_exps.weight").ne == std::vector<uint64_t>{12, 8, 3});
  std::vector<float> down;
  for (int e = 0; e < 3; ++e) {
    for (float x : weight(ck, "model.layers.1.mlp.experts." + std::to_string(e) + ".down_proj.weight")) down.push_back(x);
  }
  CHECK(f32(g, "blk.1.ffn_down_exps.weight") == down);
  CHECK(f32(g, "blk.1.ffn_gate_inp.weight") == weight(ck, "model.layers.1.mlp.gate.weight"));
}

TEST_CASE("gguf export refuses, by name, what no GGUF architecture computes, and leaves no file",
          "[gguf]") {
  TempDir dir("gguf_refuse");
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"final_softcap", 30.0}}, "final_softcap"},
      {{{"attn_softcap", 50.0}}, "attn_softcap"},
      {{{"sliding_window", 4}}, "sliding_window"},
      {{{"parallel_block", true}}, "parallel_block"},
      {{{"moe", {{"n_experts", 2}, {"top_k", 1}, {"n_shared", 1}}}}, "shared experts"},
      {{{"moe", {{"n_experts", 2}, {"top_k", 1}, {"every", 2}}}}, "moe.every"},
      {{{"moe", {{"n_experts", 2}, {"top_k", 1}, {"norm_topk_prob", false}}}}, "norm_topk_prob"},
      {{{"ffn_act", "geglu"}}, "geglu"},
      {{{"bias", true}}, "bias"},
      {{{"pos", "sinusoidal"}}, "sinusoidal"},
      {{{"norm", "layernorm"}}, "layernorm"},
      {{{"norm", "layernorm"}, {"pos", "learned"}, {"ffn_act", "gelu"}}, "gelu"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string ck = write_model(dir, config_of(cases[i].first), "c" + std::to_string(i) + ".h5");
    const std::string out = dir / ("c" + std::to_string(i) + ".gguf");
    const std::string err = error_of([&] { apps::export_gguf(ck, out, "float32"); });
    INFO(cases[i].second << ": " << err);
    CHECK(err.find(cases[i].second) != std::string::npos);
    CHECK(err.find('\n') == std::string::npos);
    CHECK(!std::filesystem::exists(out));
  }
  // A non-finite weight is refused by name, before any file is written.
  nn::Checkpoint bad = nn::read_checkpoint(write_model(dir, config_of(), "nan.h5"), false);
  bad.model.at("model.layers.1.mlp.up_proj.weight").data<float>()[5] = NAN;
  nn::write_checkpoint(dir / "nan2.h5", bad);
  const std::string nan_err = error_of([&] { apps::export_gguf(dir / "nan2.h5", dir / "nan.gguf", "bf16"); });
  CHECK(nan_err.find("up_proj") != std::string::npos);
  CHECK(!std::filesystem::exists(dir.path / "nan.gguf"));
  // An existing file is never replaced; nothing is left beside it.
  const std::string ck = write_model(dir, config_of());
  dir.write("taken.gguf", "another model");
  CHECK(error_of([&] { apps::export_gguf(ck, dir / "taken.gguf", "int8"); }).find("taken.gguf") != std::string::npos);
  CHECK(testing::read_text(dir / "taken.gguf") == "another model");
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) files += e.path().extension() == ".gguf";
  CHECK(files == 1);
}

TEST_CASE("gguf export of a LoRA fine-tune writes the merged weights W + (alpha / r) B A", "[gguf]") {
  TempDir dir("gguf_lora");
  const nn::ModelConfig cfg = config_of();
  write_model(dir, cfg, "base.h5");
  nn::Transformer model(cfg, 5);
  nn::LoRAConfig lora;
  lora.r = 2;
  lora.alpha = 6;
  lora.targets = {"v"};
  nn::add_adapters(model, lora, "none", 3);
  nn::Checkpoint ft;
  ft.config = cfg;
  ft.config.lora = lora;
  uint64_t offset = 0;
  for (auto& [name, p] : nn::trainable_parameters(model)) {
    ft.model[name] = Tensor::rand(p.data().shape(), 9, offset, DType::Float32, -0.5, 0.5);
    offset += static_cast<uint64_t>(p.data().numel());
  }
  ft.base = std::filesystem::absolute(dir / "base.h5").string();
  ft.base_sha256 = sha256_file(dir / "base.h5");
  ft.tokenizer_json = chat_tokenizer();
  nn::write_checkpoint(dir / "ft.h5", ft);
  apps::export_gguf(dir / "ft.h5", dir / "ft.gguf", "float32");
  const Gguf g = parse(dir / "ft.gguf");
  check_layout(g);
  const std::vector<float> w = weight(dir / "base.h5", "model.layers.1.self_attn.v_proj.weight");
  const std::string a = "model.layers.1.self_attn.v_proj.lora_A.weight", b = "model.layers.1.self_attn.v_proj.lora_B.weight";
  REQUIRE(ft.model.count(a) == 1);
  const Tensor ta = ft.model.at(a), tb = ft.model.at(b);
  const std::vector<float> got = f32(g, "blk.1.attn_v.weight");
  const int64_t out = tb.size(0), in = ta.size(1);
  REQUIRE(static_cast<int64_t>(got.size()) == out * in);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      double sum = 0;
      for (int64_t k = 0; k < 2; ++k) sum += tb.at({o, k}) * ta.at({k, i});
      CHECK(got[o * in + i] == Approx(w[o * in + i] + 3.0 * sum).margin(1e-5));
    }
  }
}
