// Closed-form costs of a config, for `ember info` and the benchmarks.
// FLOPs per token for forward + backward (PaLM, appendix B):
//   6 * active_matmul_params + 12 * n_layers * n_heads * head_dim * T_eff
// where active_matmul_params counts every weight a token multiplies with
// (attention, FFN or top_k + shared experts and router, and the lm_head,
// tied or not) but not the embedding lookups, and T_eff is the attended
// context, min(T, window) on sliding-window layers, averaged over layers.
// The second term is the attention score and value products (Q K^T and P V:
// 2 x 2 x qd x T_eff FLOPs forward, twice that backward), counted over the
// full T x T square; a causal kernel needs only about half of them.
// Every count is exact int64 arithmetic that throws ember::Error rather than
// wrap around; memory needs are compared with the machine's before a model is built.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "nn/config.h"

namespace ember::nn {

struct ModelStats {
  int64_t total_params = 0;     // every stored parameter
  int64_t active_params = 0;    // used per token (MoE: top_k experts + shared + router)
  int64_t embedding_params = 0; // token (+ position) embedding tables
  int64_t active_matmul_params = 0;
  double flops_per_token = 0;   // forward + backward at sequence length T
  double attention_flops_per_token = 0;  // its Q K^T and P V part (full T x T)
  int64_t kv_cache_bytes_per_token = 0;  // float32 K and V over all layers
  // Training step at batch B, length T in float32: weights, grads, AdamW moments,
  // and the activations backward keeps (an estimate).
  int64_t train_memory_bytes = 0;
  int64_t activation_bytes = 0;        // its activations part
  int64_t position_table_elements = 0; // RoPE cos/sin or sinusoidal table (buffers, not parameters)
};

// Throws ember::Error when a count exceeds int64 (possible only for huge batch x seq_len:
// ModelConfig::from_json bounds every size and the parameter count).
ModelStats model_stats(const ModelConfig& cfg, int64_t batch = 8, int64_t seq_len = 256);

// Floats per token that block `layer`'s forward keeps for backward (the estimate inside
// ModelStats::activation_bytes): norm inputs, q/k/v, attention out, FFN hidden (x3 gated).
int64_t block_activation_floats(const ModelConfig& cfg, int64_t layer);
// Its two parts: what tensor parallelism splits over the T ranks (q, k, v, the attention
// output, the FFN or experts' hidden) and what every tensor rank keeps whole (the norms' inputs).
struct BlockActivations {
  int64_t whole = 0, split = 0;
};
BlockActivations block_activation_parts(const ModelConfig& cfg, int64_t layer);

// Bytes a model needs (an estimate): weights and position tables to run it; for a
// training step (float32) also gradients, AdamW's two moments and activations.
struct MemoryNeed {
  std::string purpose;  // "to run it (float32)", "for training at B = 8, T = 256"
  int64_t weights = 0, position_tables = 0, gradients = 0, adamw = 0, activations = 0;
  int64_t kv_cache = 0;
  int64_t total() const;  // the sum (checked)
};
MemoryNeed inference_memory(const ModelConfig& cfg, DType dtype = DType::Float32);
// inference_memory in float32 (the paged forward's weights) + a KV cache of kv_tokens positions
// of every layer in kv_dtype (inference/model_runner/paged_forward.h: PagedKVStore checks it before allocating).
MemoryNeed generation_memory(const ModelConfig& cfg, int64_t kv_tokens,
                             DType kv_dtype = DType::Float32);
MemoryNeed training_memory(const ModelConfig& cfg, int64_t batch, int64_t seq_len);

// Throws ember::Error when `need` exceeds this machine's memory (core/system_memory.h):
// "the model needs 644 GiB for training at B = 8, T = 256 (weights 161 GiB, ...) but this
// machine has 23.4 GiB of physical memory" (after "SOURCE: " when a source is given).
// Nothing is refused when the machine's memory is unknown.
void require_fits_in_memory(const MemoryNeed& need, const std::string& source = "");

}  // namespace ember::nn
