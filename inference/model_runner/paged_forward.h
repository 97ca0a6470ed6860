// Inference over a paged KV cache: one forward pass over the new tokens of
// many sequences at once (continuous batching), each sequence's keys and
// values kept in blocks of 16 positions named by its block table. Every kernel
// on this path is row-wise (kernels/matmul_rows.h, one query at a time in
// attention), so a token's logits do not depend on what else is in the batch or
// on how its prompt was split into chunks.
// Shapes: per layer K, V [n_blocks, 16, Hkv, D]; logits [R, V].
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/kernels/packed_weights.h"
#include "core/tensor.h"
#include "nn/config.h"

namespace ember::nn {
class Transformer;
}  // namespace ember::nn

namespace ember::inference {

inline constexpr int64_t kKVBlockSize = 16;

// A KV cache's dtype by its option value: "float32" or "bfloat16"; an Error otherwise.
DType kv_cache_dtype_named(const std::string& name);

// The K/V blocks of every layer, allocated once: float32, or bfloat16 (half the memory and
// the bytes a decode step reads; keys and values rounded to nearest-even when written).
// Refused before allocation (an Error naming the sizes) when the model's weights and these
// blocks exceed the machine's memory (nn/sizing/model_stats.h: generation_memory).
class PagedKVStore {
 public:
  PagedKVStore(const nn::ModelConfig& cfg, int64_t n_blocks, DType dtype = DType::Float32);
  // Bytes one block takes over all layers (K and V).
  static size_t bytes_per_block(const nn::ModelConfig& cfg, DType dtype = DType::Float32);
  int64_t n_blocks() const { return n_blocks_; }
  DType dtype() const { return dtype_; }
  // Copies block src's keys and values of every layer into block dst.
  void copy_block(int32_t src, int32_t dst);
  Tensor& k(int64_t layer) { return k_[static_cast<size_t>(layer)]; }
  Tensor& v(int64_t layer) { return v_[static_cast<size_t>(layer)]; }

 private:
  int64_t n_blocks_ = 0;
  DType dtype_ = DType::Float32;
  std::vector<Tensor> k_, v_;
};

// The new tokens of one sequence in a step.
struct SeqChunk {
  const int64_t* tokens = nullptr;  // n_tokens ids
  int64_t n_tokens = 0;
  int64_t pos0 = 0;  // position of tokens[0]; positions [0, pos0) are already in the cache
  // Blocks holding positions [0, pos0 + n_tokens): position p is in block (*block_table)[p / 16],
  // slot p % 16.
  const std::vector<int32_t>* block_table = nullptr;
  bool all_logits = false;  // logits for every new token; else for the last one only
};

// A model's weights for inference: LoRA adapters merged, NF4 dequantized; the Linears' weights
// and the token embeddings in the WeightType asked for (kernels/packed_weights.h, converted once
// here: --weights), norms, biases, position tables and MoE routers in float32.
class InferenceModel {
 public:
  // Plain weights are shared with `model` (no copy); adapters are merged (nn/adapters/adapters.h).
  explicit InferenceModel(const nn::Transformer& model,
                          kernels::WeightType weights = kernels::WeightType::Float32);
  // A plain model of cfg (no LoRA) from its state dict (names of docs/model.md#parameter-names).
  InferenceModel(const nn::ModelConfig& cfg, std::map<std::string, Tensor> weights,
                 kernels::WeightType type = kernels::WeightType::Float32);
  const nn::ModelConfig& config() const { return cfg_; }
  kernels::WeightType weight_type() const { return type_; }
  // The float32 weights the forward reads, by parameter name (a plain model's own tensors); under
  // bf16 or int8 the packed ones are in packed() instead.
  const std::map<std::string, Tensor>& weights() const { return w_; }
  // The Linears' weights and the token embeddings, in weight_type().
  const std::map<std::string, kernels::PackedWeight>& packed() const { return packed_; }
  // Runs every chunk in one batch: writes each new token's K and V into its slot, attends each
  // token over positions [0, its own] of its sequence (sliding window and soft-cap applied).
  // Returns logits [R, V]: per chunk in order, n_tokens rows when all_logits, else 1 row.
  // Batch-invariant: a row is bit-identical whatever the other chunks are and however the
  // sequence was chunked. Under no-grad, thread-safe only for one caller at a time.
  Tensor forward(const std::vector<SeqChunk>& chunks, PagedKVStore& kv) const;

 private:
  nn::ModelConfig cfg_;
  kernels::WeightType type_ = kernels::WeightType::Float32;
  std::map<std::string, Tensor> w_;  // names of docs/model.md#parameter-names, float32, contiguous
  std::map<std::string, kernels::PackedWeight> packed_;
};

}  // namespace ember::inference
