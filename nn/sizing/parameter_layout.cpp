// Mirrors the constructors of Transformer, TransformerBlock, Attention, FFN,
// MoE, Linear, Embedding and the norms (weight before bias, a module's own
// parameters before its children's), with the names of docs/model.md#parameter-names.
#include "nn/sizing/parameter_layout.h"

namespace ember::nn {
namespace {

struct LayoutBuilder {
  std::vector<ParameterEntry> out;
  int64_t block = -1;
  void add(const std::string& name, std::vector<int64_t> shape) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    out.push_back({numel, block, name, std::move(shape)});
  }
  void linear(const std::string& name, int64_t in, int64_t out_features, bool bias) {
    add(name + ".weight", {out_features, in});
    if (bias) add(name + ".bias", {out_features});
  }
  void norm(const ModelConfig& c, const std::string& name, int64_t dim) {
    add(name + ".weight", {dim});
    if (c.norm == "layernorm") add(name + ".bias", {dim});
  }
  void ffn(const ModelConfig& c, const std::string& name, int64_t hidden) {
    if (c.gated_ffn()) linear(name + ".gate_proj", c.d_model, hidden, c.bias);
    linear(name + ".up_proj", c.d_model, hidden, c.bias);
    linear(name + ".down_proj", hidden, c.d_model, c.bias);
  }
  void block_params(const ModelConfig& c, int64_t layer) {
    const std::string at = "model.layers." + std::to_string(layer) + ".";
    const int64_t qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
    norm(c, at + "input_layernorm", c.d_model);
    linear(at + "self_attn.q_proj", c.d_model, qd, c.bias);
    linear(at + "self_attn.k_proj", c.d_model, kvd, c.bias);
    linear(at + "self_attn.v_proj", c.d_model, kvd, c.bias);
    linear(at + "self_attn.o_proj", qd, c.d_model, c.bias);
    if (c.qk_norm) {
      add(at + "self_attn.q_norm.weight", {c.head_dim});  // RMSNorms whatever the model's norm
      add(at + "self_attn.k_norm.weight", {c.head_dim});
    }
    if (!c.parallel_block) norm(c, at + "post_attention_layernorm", c.d_model);
    if (c.layer_is_moe(layer)) {
      const MoEConfig& m = *c.moe;
      linear(at + "mlp.gate", c.d_model, m.n_experts, false);  // the router never has a bias
      for (int64_t e = 0; e < m.n_experts; ++e) ffn(c, at + "mlp.experts." + std::to_string(e), m.expert_hidden);
      for (int64_t s = 0; s < m.n_shared; ++s) {
        ffn(c, at + "mlp.shared_experts." + std::to_string(s), m.expert_hidden);
      }
    } else {
      ffn(c, at + "mlp", c.ffn_hidden);
    }
  }
};

}  // namespace

std::vector<ParameterEntry> parameter_layout(const ModelConfig& c) {
  LayoutBuilder b;
  b.block = kTokenTable;
  b.add("model.embed_tokens.weight", {c.vocab_size, c.d_model});
  b.block = -1;
  if (c.pos == "learned") b.add("model.embed_positions.weight", {c.max_seq_len, c.d_model});
  for (int64_t layer = 0; layer < c.n_layers; ++layer) {
    b.block = layer;
    b.block_params(c, layer);
  }
  b.block = -1;
  b.norm(c, "model.norm", c.d_model);
  if (!c.tie_embeddings) b.add("lm_head.weight", {c.vocab_size, c.d_model});
  if (!c.reward.empty()) b.add("score.weight", {1, c.d_model});  // the last parameter
  return b.out;
}

}  // namespace ember::nn
