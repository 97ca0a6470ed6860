// KV cache for inference: per attention layer, K and V with n_kv_heads heads
// (GQA/MQA store fewer), pre-allocated once. Position p lives in slot
// p % capacity: capacity is max_seq_len on full-attention layers (no wrap) and
// the window on sliding-window layers (a ring holding the last `window` keys).
// Shapes: k, v [B, capacity, Hkv, D]; a chunk of T new tokens k, v [B, T, Hkv, D].
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "nn/config.h"

namespace ember::nn {

// What the T queries of a chunk attend to: keys and values [B, S, Hkv, D] in
// position order (or, for one query over a full ring, in any order), where
// query t sits at relative position S - T + t, and the window to mask with.
struct KVView {
  Tensor k, v;
  int64_t window = 0;
};

class LayerKVCache {
 public:
  LayerKVCache(int64_t batch, int64_t capacity, int64_t n_kv_heads, int64_t head_dim,
               int64_t window, DType dtype);
  // Stores k, v [B, T, Hkv, D] of positions pos0 .. pos0 + T - 1 (after the pos0
  // positions already cached) and returns what the chunk's queries attend to.
  KVView append(const Tensor& k, const Tensor& v, int64_t pos0);
  int64_t capacity() const { return k_.size(1); }
  int64_t window() const { return window_; }
  size_t bytes() const { return k_.nbytes() + v_.nbytes(); }
  const Tensor& keys() const { return k_; }
  const Tensor& values() const { return v_; }
  LayerKVCache clone() const;

 private:
  // Copies rows [from, from + n) of a chunk starting at position p0 into their slots.
  void write(const Tensor& k, const Tensor& v, int64_t p0, int64_t from, int64_t n);
  // Cached positions [p0, p1) in order: [B, p1 - p0, Hkv, D] (a copy when the ring wraps).
  Tensor ordered(const Tensor& cache, int64_t p0, int64_t p1) const;

  Tensor k_, v_;
  int64_t window_;
};

// The caches of every layer of a model, and how many tokens they hold. Move-only
// (a copy would share the tensors); clone() makes an independent copy, e.g. to
// draw several samples after one prefill.
class KVCache {
 public:
  KVCache(const ModelConfig& cfg, int64_t batch = 1, DType dtype = DType::Float32);
  KVCache(KVCache&&) = default;
  KVCache& operator=(KVCache&&) = default;
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;
  KVCache clone() const;
  // Tokens cached so far: the absolute position of the next token.
  int64_t length() const { return length_; }
  int64_t max_seq_len() const { return max_seq_len_; }
  int64_t batch() const { return batch_; }
  DType dtype() const { return dtype_; }
  int64_t n_layers() const { return static_cast<int64_t>(layers_.size()); }
  LayerKVCache& layer(int64_t i) { return layers_[static_cast<size_t>(i)]; }
  // Bytes held by every layer's K and V.
  size_t bytes() const;
  // Forgets every token (the memory stays allocated).
  void clear() { length_ = 0; }
  // Marks n more tokens as cached (Transformer::forward_cached calls it after all layers).
  void advance(int64_t n);

 private:
  KVCache() = default;  // for clone()

  std::vector<LayerKVCache> layers_;
  int64_t length_ = 0, max_seq_len_ = 0, batch_ = 0;
  DType dtype_ = DType::Float32;
};

}  // namespace ember::nn
