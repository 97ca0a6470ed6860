// Mirrors the constructors of Transformer, TransformerBlock, Attention, FFN,
// MoE, Linear, Embedding and the norms (weight before bias, a module's own
// parameters before its children's).
#include "nn/sizing/parameter_layout.h"

namespace ember::nn {
namespace {

struct LayoutBuilder {
  std::vector<ParameterEntry> out;
  int64_t block = -1;
  void add(int64_t numel) { out.push_back({numel, block}); }
  void linear(int64_t in, int64_t out_features, bool bias) {
    add(in * out_features);
    if (bias) add(out_features);
  }
  void norm(const ModelConfig& c, int64_t dim) {
    add(dim);
    if (c.norm == "layernorm") add(dim);
  }
  void ffn(const ModelConfig& c, int64_t hidden) {
    if (c.gated_ffn()) linear(c.d_model, hidden, c.bias);
    linear(c.d_model, hidden, c.bias);
    linear(hidden, c.d_model, c.bias);
  }
  void block_params(const ModelConfig& c, int64_t layer) {
    const int64_t qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
    norm(c, c.d_model);
    linear(c.d_model, qd, c.bias);
    linear(c.d_model, kvd, c.bias);
    linear(c.d_model, kvd, c.bias);
    linear(qd, c.d_model, c.bias);
    if (c.qk_norm) {
      add(c.head_dim);  // q_norm and k_norm are RMSNorms whatever the model's norm
      add(c.head_dim);
    }
    if (!c.parallel_block) norm(c, c.d_model);
    if (c.layer_is_moe(layer)) {
      const MoEConfig& m = *c.moe;
      linear(c.d_model, m.n_experts, false);  // the router never has a bias
      for (int64_t e = 0; e < m.n_experts + m.n_shared; ++e) ffn(c, m.expert_hidden);
    } else {
      ffn(c, c.ffn_hidden);
    }
  }
};

}  // namespace

std::vector<ParameterEntry> parameter_layout(const ModelConfig& c) {
  LayoutBuilder b;
  b.block = kTokenTable;
  b.add(c.vocab_size * c.d_model);
  b.block = -1;
  if (c.pos == "learned") b.add(c.max_seq_len * c.d_model);
  for (int64_t layer = 0; layer < c.n_layers; ++layer) {
    b.block = layer;
    b.block_params(c, layer);
  }
  b.block = -1;
  b.norm(c, c.d_model);
  if (!c.tie_embeddings) b.add(c.vocab_size * c.d_model);
  if (!c.reward.empty()) b.add(c.d_model);  // score.weight, the last parameter
  return b.out;
}

}  // namespace ember::nn
