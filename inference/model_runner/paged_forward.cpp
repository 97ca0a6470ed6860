// PagedKVStore and InferenceModel: the Transformer's forward (nn/transformer.cpp)
// over the new tokens of many sequences, with row-wise kernels only
// (kernels::matmul_rows, inference/model_runner/paged_kernels.h) so that each row is batch-invariant.
#include "inference/model_runner/paged_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/kernels/matmul_rows.h"
#include "nn/adapters/adapters.h"
#include "nn/sizing/model_stats.h"
#include "inference/model_runner/paged_kernels.h"
#include "nn/rotary.h"
#include "nn/transformer.h"

namespace ember::inference {

DType kv_cache_dtype_named(const std::string& name) {
  EMBER_CHECK(name == "float32" || name == "bfloat16",
              "the KV cache holds float32 or bfloat16, not '", name, "'");
  return name == "bfloat16" ? DType::BFloat16 : DType::Float32;
}

PagedKVStore::PagedKVStore(const nn::ModelConfig& cfg, int64_t n_blocks, DType dtype)
    : n_blocks_(n_blocks), dtype_(dtype) {
  EMBER_CHECK(n_blocks > 0, "PagedKVStore: n_blocks must be positive, got ", n_blocks);
  EMBER_CHECK(dtype == DType::Float32 || dtype == DType::BFloat16,
              "PagedKVStore: the KV cache holds float32 or bfloat16, not ", dtype_name(dtype));
  int64_t tokens = 0;
  EMBER_CHECK(!__builtin_mul_overflow(n_blocks, kKVBlockSize, &tokens), "PagedKVStore: ", n_blocks,
              " blocks of ", kKVBlockSize, " tokens overflow 64-bit integers");
  require_fits_in_memory(generation_memory(cfg, tokens, dtype));  // weights + cache
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    for (std::vector<Tensor>* kv : {&k_, &v_}) {
      Tensor t = Tensor::empty({n_blocks, kKVBlockSize, cfg.n_kv_heads, cfg.head_dim}, dtype);
      std::memset(t.raw_data(), 0, static_cast<size_t>(t.numel()) * dtype_size(dtype));
      kv->push_back(std::move(t));
    }
  }
}

void PagedKVStore::copy_block(int32_t src, int32_t dst) {
  EMBER_CHECK(src >= 0 && src < n_blocks_ && dst >= 0 && dst < n_blocks_,
              "PagedKVStore: block copy ", src, " -> ", dst, " outside the ", n_blocks_, " blocks");
  for (std::vector<Tensor>* kv : {&k_, &v_}) {
    for (Tensor& t : *kv) {
      const size_t bytes = static_cast<size_t>(t.numel() / n_blocks_) * dtype_size(dtype_);
      char* base = static_cast<char*>(t.raw_data());
      std::memcpy(base + static_cast<size_t>(dst) * bytes, base + static_cast<size_t>(src) * bytes,
                  bytes);
    }
  }
}

size_t PagedKVStore::bytes_per_block(const nn::ModelConfig& cfg, DType dtype) {
  return static_cast<size_t>(2 * cfg.n_layers * kKVBlockSize * cfg.n_kv_heads * cfg.head_dim) *
         dtype_size(dtype);
}

namespace {

// The weights stored in the WeightType of --weights: every Linear's but the MoE router's (a
// rounded router could pick other experts), and the token embeddings (tied heads read them).
bool packs(const std::string& name) {
  const auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return ends("_proj.weight") || name == "lm_head.weight" || name == "model.embed_tokens.weight";
}
bool is_router(const std::string& name) {
  const std::string s = ".mlp.gate.weight";
  return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
}

bool needs_merge(const nn::Transformer& model) {
  const nn::ModelConfig& c = model.config();
  if (c.lora.has_value() || c.quantize != "none") return true;
  for (const auto& [name, t] : model.state_dict()) {
    if (name.find("added_rows") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

InferenceModel::InferenceModel(const nn::Transformer& model, kernels::WeightType type)
    : InferenceModel(needs_merge(model) ? merged_config(model.config()) : model.config(),
                     needs_merge(model) ? merged_state_dict(model) : model.state_dict(), type) {}

InferenceModel::InferenceModel(const nn::ModelConfig& cfg, std::map<std::string, Tensor> weights,
                               kernels::WeightType type)
    : cfg_(cfg), type_(type), w_(std::move(weights)) {
  for (auto& [name, t] : w_) {
    if (t.dtype() != DType::Float32) t = t.to(DType::Float32);
    t = t.contiguous();
  }
  EMBER_CHECK(w_.count("model.embed_tokens.weight") != 0,
              "InferenceModel: the weights lack model.embed_tokens.weight");
  for (auto it = w_.begin(); it != w_.end();) {
    if (is_router(it->first) && it->second.dim() == 2) {
      packed_.emplace(it->first, kernels::PackedWeight(it->second, kernels::WeightType::Float32));
    }
    if (!packs(it->first) || it->second.dim() != 2) {
      ++it;
      continue;
    }
    packed_.emplace(it->first, kernels::PackedWeight(it->second, type));
    // float32 keeps its tensors listed (shared, not copied); a converted one is dropped.
    it = type == kernels::WeightType::Float32 ? std::next(it) : w_.erase(it);
  }
  if (cfg_.pos == "rope") {
    const nn::RotaryEmbedding rotary(cfg_.head_dim, cfg_.max_seq_len, cfg_.rope_theta, DType::Float32);
    w_["#rope.cos"] = rotary.cos().contiguous();
    w_["#rope.sin"] = rotary.sin().contiguous();
  } else if (cfg_.pos == "sinusoidal") {
    w_["#sinusoidal"] = nn::sinusoidal_positions(cfg_.max_seq_len, cfg_.d_model, DType::Float32).contiguous();
  }
}

}  // namespace ember::inference
