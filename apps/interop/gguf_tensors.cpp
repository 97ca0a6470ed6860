// The tensors of a GGUF export (gguf::add_tensors): ember's names to llama.cpp's converter's
// (token_embd, blk.N.attn_q, ...), the q/k row order for llama's interleaved RoPE, gpt2's fused
// qkv, MoE expert stacks, and each tensor's bytes as F32, BF16 or Q8_0.
#include <cstring>

#include "apps/interop/gguf_export.h"
#include "apps/interop/gguf_writer.h"
#include "core/error.h"
#include "core/kernels/bf16.h"
#include "core/quant/q8_0.h"

namespace ember::apps::gguf {
namespace {

// A row-major float matrix [rows, cols] (a vector is one row).
struct Rows {
  std::vector<float> v;
  int64_t rows = 1, cols = 0;
};

Rows take(std::map<std::string, Tensor>& s, const std::string& name) {
  const auto it = s.find(name);
  EMBER_CHECK(it != s.end(), "export --format gguf: the checkpoint has no tensor ", name);
  const Tensor t = it->second.to(DType::Float32).contiguous();
  Rows r;
  r.cols = t.shape().back();
  r.rows = t.numel() / r.cols;
  r.v = t.to_vector<float>();
  s.erase(it);
  return r;
}

// llama.cpp's llama graph rotates interleaved pairs (x[2i], x[2i+1]); ember rotates halves
// (x[i], x[i + d_h/2]) as Hugging Face does. Within each head, row j * d_h/2 + i moves to
// 2i + j: llama.cpp's converter's permute, so llama.cpp computes ember's rotation.
Rows interleave_heads(const Rows& w, int64_t head_dim) {
  Rows o = w;
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < w.rows / head_dim; ++h) {
    for (int64_t j = 0; j < 2; ++j) {
      for (int64_t i = 0; i < half; ++i) {
        const float* src = &w.v[(h * head_dim + j * half + i) * w.cols];
        std::memcpy(&o.v[(h * head_dim + 2 * i + j) * w.cols], src, w.cols * sizeof(float));
      }
    }
  }
  return o;
}

// Rows stacked: the matrices (each [rows_k, cols]) one after another.
Rows stack(const std::vector<Rows>& parts) {
  Rows o;
  o.cols = parts.front().cols;
  o.rows = 0;
  for (const Rows& p : parts) {
    EMBER_CHECK(p.cols == o.cols, "export --format gguf: stacked tensors differ in width");
    o.v.insert(o.v.end(), p.v.begin(), p.v.end());
    o.rows += p.rows;
  }
  return o;
}

std::string f32_bytes(const Rows& r) {
  return std::string(reinterpret_cast<const char*>(r.v.data()), r.v.size() * sizeof(float));
}

std::string bf16_bytes(const Rows& r) {
  std::string out(r.v.size() * 2, '\0');
  for (size_t i = 0; i < r.v.size(); ++i) {
    const uint16_t h = kernels::bfloat16_bits(r.v[i]);
    std::memcpy(&out[2 * i], &h, 2);
  }
  return out;
}

std::string q8_0_bytes(const Rows& r) {
  std::vector<quant::BlockQ8_0> blocks(r.v.size() / quant::kQ8_0Block);
  quant::quantize_row_q8_0(r.v.data(), blocks.data(), static_cast<int64_t>(r.v.size()));
  return std::string(reinterpret_cast<const char*>(blocks.data()), blocks.size() * sizeof(quant::BlockQ8_0));
}

// What a weight may be stored as: vectors, positions and the MoE router stay F32 (as llama.cpp's
// converter keeps them); matrices take the chosen type, Q8_0 only when rows split into blocks of 32.
enum class Kind { Float32Only, Matrix };

class Adder {
 public:
  Adder(Writer& w, std::string weights) : w_(w), weights_(std::move(weights)) {}
  // ne: ggml's dims, innermost first (for a matrix [rows, cols]: {cols, rows}).
  void add(const std::string& name, const Rows& r, Kind kind, std::vector<uint64_t> ne = {}) {
    if (ne.empty()) ne = r.rows == 1 && kind == Kind::Float32Only ? std::vector<uint64_t>{uint64_t(r.cols)}
                                                                  : std::vector<uint64_t>{uint64_t(r.cols), uint64_t(r.rows)};
    TensorInfo t{name, std::move(ne), TensorType::F32, ""};
    if (kind == Kind::Matrix && weights_ == "bf16") {
      t.type = TensorType::BF16;
      t.data = bf16_bytes(r);
    } else if (kind == Kind::Matrix && weights_ == "int8" && r.cols % quant::kQ8_0Block == 0) {
      t.type = TensorType::Q8_0;
      t.data = q8_0_bytes(r);
    } else {
      t.data = f32_bytes(r);
    }
    w_.add_tensor(std::move(t));
  }

 private:
  Writer& w_;
  std::string weights_;
};

struct Ctx {
  const nn::ModelConfig& c;
  const std::string& arch;
  std::map<std::string, Tensor>& s;
  Adder& a;
};

void add_norm(Ctx& x, const std::string& ember, const std::string& gguf) {
  x.a.add(gguf + ".weight", take(x.s, ember + ".weight"), Kind::Float32Only);
  if (x.c.norm == "layernorm") x.a.add(gguf + ".bias", take(x.s, ember + ".bias"), Kind::Float32Only);
}

// A Linear's weight (and bias with `bias`) under a new name.
void add_linear(Ctx& x, const std::string& ember, const std::string& gguf) {
  x.a.add(gguf + ".weight", take(x.s, ember + ".weight"), Kind::Matrix);
  if (x.c.bias) x.a.add(gguf + ".bias", take(x.s, ember + ".bias"), Kind::Float32Only);
}

Rows zeros(int64_t n) { return Rows{std::vector<float>(n, 0.0f), 1, n}; }

// gpt2's fused attn_qkv: the q, k and v rows stacked (biases 0 when the model has none).
void add_gpt2_attention(Ctx& x, const std::string& e, const std::string& g) {
  const std::string a = e + "self_attn.";
  x.a.add(g + "attn_qkv.weight", stack({take(x.s, a + "q_proj.weight"), take(x.s, a + "k_proj.weight"),
                                        take(x.s, a + "v_proj.weight")}), Kind::Matrix);
  const int64_t q = x.c.n_heads * x.c.head_dim, kv = x.c.n_kv_heads * x.c.head_dim;
  Rows b = x.c.bias ? stack({take(x.s, a + "q_proj.bias"), take(x.s, a + "k_proj.bias"), take(x.s, a + "v_proj.bias")})
                    : zeros(q + 2 * kv);
  b.cols = b.rows * b.cols;
  b.rows = 1;
  x.a.add(g + "attn_qkv.bias", b, Kind::Float32Only);
  x.a.add(g + "attn_output.weight", take(x.s, a + "o_proj.weight"), Kind::Matrix);
  x.a.add(g + "attn_output.bias", x.c.bias ? take(x.s, a + "o_proj.bias") : zeros(x.c.d_model), Kind::Float32Only);
}

void add_attention(Ctx& x, const std::string& e, const std::string& g) {
  const std::string a = e + "self_attn.";
  Rows q = take(x.s, a + "q_proj.weight"), k = take(x.s, a + "k_proj.weight");
  if (x.arch == "llama") {  // interleaved RoPE: see interleave_heads
    q = interleave_heads(q, x.c.head_dim);
    k = interleave_heads(k, x.c.head_dim);
  }
  x.a.add(g + "attn_q.weight", q, Kind::Matrix);
  x.a.add(g + "attn_k.weight", k, Kind::Matrix);
  x.a.add(g + "attn_v.weight", take(x.s, a + "v_proj.weight"), Kind::Matrix);
  x.a.add(g + "attn_output.weight", take(x.s, a + "o_proj.weight"), Kind::Matrix);
  if (x.c.qk_norm) {
    x.a.add(g + "attn_q_norm.weight", take(x.s, a + "q_norm.weight"), Kind::Float32Only);
    x.a.add(g + "attn_k_norm.weight", take(x.s, a + "k_norm.weight"), Kind::Float32Only);
  }
}

// MoE: the router (F32) and each projection of the E experts as one [E, out, in] stack.
void add_moe(Ctx& x, const std::string& e, const std::string& g) {
  const int64_t n = x.c.moe->n_experts;
  x.a.add(g + "ffn_gate_inp.weight", take(x.s, e + "mlp.gate.weight"), Kind::Float32Only,
          {uint64_t(x.c.d_model), uint64_t(n)});
  for (const char* p : {"gate", "up", "down"}) {
    std::vector<Rows> experts;
    for (int64_t j = 0; j < n; ++j) {
      experts.push_back(take(x.s, e + "mlp.experts." + std::to_string(j) + "." + p + "_proj.weight"));
    }
    const int64_t rows = experts.front().rows, cols = experts.front().cols;
    x.a.add(g + "ffn_" + p + "_exps.weight", stack(experts), Kind::Matrix,
            {uint64_t(cols), uint64_t(rows), uint64_t(n)});
  }
}

void add_block(Ctx& x, int64_t i) {
  const std::string e = "model.layers." + std::to_string(i) + ".", g = "blk." + std::to_string(i) + ".";
  add_norm(x, e + "input_layernorm", g + "attn_norm");
  if (x.arch == "gpt2") {
    add_gpt2_attention(x, e, g);
  } else {
    add_attention(x, e, g);
  }
  add_norm(x, e + "post_attention_layernorm", g + "ffn_norm");
  if (x.c.moe) {
    add_moe(x, e, g);
    return;
  }
  if (x.c.gated_ffn()) add_linear(x, e + "mlp.gate_proj", g + "ffn_gate");
  add_linear(x, e + "mlp.up_proj", g + "ffn_up");
  add_linear(x, e + "mlp.down_proj", g + "ffn_down");
  if (x.arch == "gpt2" && !x.c.bias) {
    x.a.add(g + "ffn_up.bias", zeros(x.c.ffn_hidden), Kind::Float32Only);
    x.a.add(g + "ffn_down.bias", zeros(x.c.d_model), Kind::Float32Only);
  }
}

}  // namespace

void add_tensors(Writer& w, const nn::ModelConfig& config, const std::string& arch,
                 const std::string& weights, std::map<std::string, Tensor>& state) {
  Adder adder(w, weights);
  Ctx x{config, arch, state, adder};
  adder.add("token_embd.weight", take(state, "model.embed_tokens.weight"), Kind::Matrix);
  if (config.pos == "learned") {
    adder.add("position_embd.weight", take(state, "model.embed_positions.weight"), Kind::Float32Only,
              {uint64_t(config.d_model), uint64_t(config.max_seq_len)});
  }
  for (int64_t i = 0; i < config.n_layers; ++i) add_block(x, i);
  add_norm(x, "model.norm", "output_norm");
  if (!config.tie_embeddings) adder.add("output.weight", take(state, "lm_head.weight"), Kind::Matrix);
  EMBER_CHECK(state.empty(), "export --format gguf: tensor ", state.empty() ? "" : state.begin()->first,
              " of the checkpoint has no place in the ", arch, " GGUF layout");
}

}  // namespace ember::apps::gguf
