// Parameter counts from the config alone; a test checks them against
// named_parameters() of a built model.
#include "nn/model_stats.h"

#include <algorithm>

namespace ember::nn {

ModelStats model_stats(const ModelConfig& c, int64_t B, int64_t T) {
  ModelStats s;
  const int64_t d = c.d_model, qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
  const int64_t b = c.bias ? 1 : 0;
  const int64_t norm = c.norm == "layernorm" ? 2 * d : d;
  auto ffn_params = [&](int64_t hidden) {
    const int64_t mats = c.gated_ffn() ? 3 : 2;
    return mats * d * hidden + b * ((mats - 1) * hidden + d);
  };
  const int64_t attn = d * qd + 2 * d * kvd + qd * d + b * (qd + 2 * kvd + d) +
                       (c.qk_norm ? 2 * c.head_dim : 0);
  s.embedding_params = c.vocab_size * d + (c.pos == "learned" ? c.max_seq_len * d : 0);
  s.total_params = s.embedding_params + norm;  // final norm
  s.active_params = s.total_params;
  const int64_t head = c.vocab_size * d;
  if (!c.tie_embeddings) {
    s.total_params += head;
    s.active_params += head;
  }
  s.active_matmul_params = head;
  double attn_context = 0;
  int64_t activation_floats = 0;
  for (int64_t layer = 0; layer < c.n_layers; ++layer) {
    const int64_t norms = c.parallel_block ? norm : 2 * norm;
    int64_t stored = attn + norms, active = attn + norms, matmul = attn;
    int64_t hidden_live = c.ffn_hidden;
    if (c.layer_is_moe(layer)) {
      const auto& m = *c.moe;
      const int64_t expert = ffn_params(m.expert_hidden);
      stored += m.n_experts * expert + m.n_shared * expert + m.n_experts * d;
      const int64_t used = (m.top_k + m.n_shared) * expert + m.n_experts * d;
      active += used;
      matmul += used;
      hidden_live = (m.top_k + m.n_shared) * m.expert_hidden;
    } else {
      stored += ffn_params(c.ffn_hidden);
      active += ffn_params(c.ffn_hidden);
      matmul += ffn_params(c.ffn_hidden);
    }
    s.total_params += stored;
    s.active_params += active;
    s.active_matmul_params += matmul;
    const int64_t window = c.layer_window(layer);
    attn_context += static_cast<double>(window > 0 ? std::min(window, T) : T);
    // Kept for backward per token: norm inputs, q/k/v, attention out, FFN hidden (x3 for gated).
    activation_floats += 4 * d + qd + 2 * kvd + qd + (c.gated_ffn() ? 3 : 2) * hidden_live;
  }
  s.attention_flops_per_token = 12.0 * static_cast<double>(qd) * attn_context;
  s.flops_per_token = 6.0 * static_cast<double>(s.active_matmul_params) + s.attention_flops_per_token;
  s.kv_cache_bytes_per_token = c.n_layers * 2 * kvd * 4;
  activation_floats += 2 * c.vocab_size;  // logits and their gradient
  s.train_memory_bytes = 4 * (4 * s.total_params + B * T * activation_floats);
  return s;
}

}  // namespace ember::nn
