// KV cache slots and the keys a chunk of queries attends to. A chunk that fits
// without wrapping is written in place and attended as a prefix of the cache;
// one query over a wrapped ring attends to every slot (they are exactly its
// window); a longer chunk over a wrapped ring gets the ordered history + itself.
#include "nn/kv_cache.h"

#include <algorithm>

#include "core/kernels/shape_ops.h"
#include "nn/model_stats.h"

namespace ember::nn {

LayerKVCache::LayerKVCache(int64_t batch, int64_t capacity, int64_t n_kv_heads, int64_t head_dim,
                           int64_t window, DType dtype)
    : k_(Tensor::zeros({batch, capacity, n_kv_heads, head_dim}, dtype)),
      v_(Tensor::zeros({batch, capacity, n_kv_heads, head_dim}, dtype)),
      window_(window) {}

void LayerKVCache::write(const Tensor& k, const Tensor& v, int64_t p0, int64_t from, int64_t n) {
  const int64_t cap = capacity();
  int64_t done = 0;
  while (done < n) {  // at most two runs: up to the end of the ring, then from slot 0
    const int64_t slot = (p0 + from + done) % cap;
    const int64_t run = std::min(n - done, cap - slot);
    k_.narrow(1, slot, run).copy_(k.narrow(1, from + done, run));
    v_.narrow(1, slot, run).copy_(v.narrow(1, from + done, run));
    done += run;
  }
}

Tensor LayerKVCache::ordered(const Tensor& cache, int64_t p0, int64_t p1) const {
  const int64_t cap = capacity(), n = p1 - p0, slot = p0 % cap;
  if (slot + n <= cap) return cache.narrow(1, slot, n);
  return kernels::cat({cache.narrow(1, slot, cap - slot), cache.narrow(1, 0, n - (cap - slot))}, 1);
}

KVView LayerKVCache::append(const Tensor& k, const Tensor& v, int64_t pos0) {
  EMBER_CHECK(k.dim() == 4 && k.shape() == v.shape() && k.size(0) == k_.size(0) &&
                  k.size(2) == k_.size(2) && k.size(3) == k_.size(3) && k.dtype() == k_.dtype(),
              "KV cache: new keys ", shape_str(k.shape()), " / values ", shape_str(v.shape()),
              " do not fit a cache of ", shape_str(k_.shape()), " ", dtype_name(k_.dtype()));
  const int64_t T = k.size(1), cap = capacity();
  EMBER_CHECK(pos0 >= 0 && T >= 1, "KV cache: bad chunk (position ", pos0, ", ", T, " tokens)");
  if (pos0 + T <= cap) {  // slot == position: the cache prefix is in order
    write(k, v, pos0, 0, T);
    return {k_.narrow(1, 0, pos0 + T), v_.narrow(1, 0, pos0 + T), window_};
  }
  EMBER_CHECK(window_ == cap, "KV cache: positions up to ", pos0 + T - 1,
              " exceed the cache capacity ", cap, " (max_seq_len)");
  if (T == 1) {  // the ring holds positions pos0 - cap + 1 .. pos0: exactly the query's window
    write(k, v, pos0, 0, 1);
    return {k_, v_, 0};
  }
  // Earlier positions the chunk's first query still sees, in order, then the chunk.
  const int64_t h0 = std::max<int64_t>(0, pos0 - (cap - 1));
  KVView view{k, v, window_};
  if (h0 < pos0) {
    view.k = kernels::cat({ordered(k_, h0, pos0), k}, 1);
    view.v = kernels::cat({ordered(v_, h0, pos0), v}, 1);
  }
  const int64_t kept = std::min(T, cap);  // only the last `cap` positions stay in the ring
  write(k, v, pos0, T - kept, kept);
  return view;
}

KVCache::KVCache(const ModelConfig& cfg, int64_t batch, DType dtype)
    : max_seq_len_(cfg.max_seq_len), batch_(batch), dtype_(dtype) {
  EMBER_CHECK(batch >= 1, "KV cache: batch must be >= 1, got ", batch);
  require_fits_in_memory(generation_memory(cfg, batch, dtype));  // weights + this cache
  layers_.reserve(static_cast<size_t>(cfg.n_layers));
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    const int64_t window = cfg.layer_window(i);
    const int64_t capacity = window > 0 ? std::min(window, cfg.max_seq_len) : cfg.max_seq_len;
    layers_.emplace_back(batch, capacity, cfg.n_kv_heads, cfg.head_dim, window, dtype);
  }
}

LayerKVCache LayerKVCache::clone() const {
  LayerKVCache c = *this;
  c.k_ = k_.clone();
  c.v_ = v_.clone();
  return c;
}

KVCache KVCache::clone() const {
  KVCache c;
  for (const LayerKVCache& l : layers_) c.layers_.push_back(l.clone());
  c.length_ = length_;
  c.max_seq_len_ = max_seq_len_;
  c.batch_ = batch_;
  c.dtype_ = dtype_;
  return c;
}

size_t KVCache::bytes() const {
  size_t total = 0;
  for (const LayerKVCache& l : layers_) total += l.bytes();
  return total;
}

void KVCache::advance(int64_t n) {
  EMBER_CHECK(n >= 0 && length_ + n <= max_seq_len_, "KV cache: ", length_ + n,
              " tokens exceed max_seq_len ", max_seq_len_);
  length_ += n;
}

}  // namespace ember::nn
