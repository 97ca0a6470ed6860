// Parameter counts from the config alone; a test checks them against
// named_parameters() of a built model. All sums and products go through
// Count, which throws instead of wrapping around.
#include "nn/sizing/model_stats.h"

#include <algorithm>

#include "core/error.h"
#include "core/system_memory.h"

namespace ember::nn {
namespace {

// An int64 whose + and * throw ember::Error on overflow.
class Count {
 public:
  Count(int64_t v = 0) : v_(v) {}  // NOLINT: implicit, so formulas read as plain arithmetic
  int64_t value() const { return v_; }
  friend Count operator+(Count a, Count b) {
    int64_t r;
    if (__builtin_add_overflow(a.v_, b.v_, &r)) overflow();
    return r;
  }
  friend Count operator*(Count a, Count b) {
    int64_t r;
    if (__builtin_mul_overflow(a.v_, b.v_, &r)) overflow();
    return r;
  }
  Count& operator+=(Count b) { return *this = *this + b; }

 private:
  [[noreturn]] static void overflow() {
    throw Error("the model's size overflows 64-bit integers (more than 2^63)");
  }
  int64_t v_;
};

}  // namespace

BlockActivations block_activation_parts(const ModelConfig& c, int64_t layer) {
  const Count d = c.d_model, qd = Count(c.n_heads) * c.head_dim, kvd = Count(c.n_kv_heads) * c.head_dim;
  const Count hidden_live = c.layer_is_moe(layer) ? Count(c.moe->top_k + c.moe->n_shared) * c.moe->expert_hidden
                                                  : Count(c.ffn_hidden);
  // Kept for backward per token: norm inputs, q/k/v, attention out, FFN hidden (x3 for gated).
  return {(Count(4) * d).value(), (qd + Count(2) * kvd + qd + Count(c.gated_ffn() ? 3 : 2) * hidden_live).value()};
}

int64_t block_activation_floats(const ModelConfig& c, int64_t layer) {
  const BlockActivations parts = block_activation_parts(c, layer);
  return (Count(parts.whole) + parts.split).value();
}

ModelStats model_stats(const ModelConfig& c, int64_t B, int64_t T) {
  ModelStats s;
  const Count d = c.d_model, qd = Count(c.n_heads) * c.head_dim, kvd = Count(c.n_kv_heads) * c.head_dim;
  const Count b = c.bias ? 1 : 0;
  const Count norm = c.norm == "layernorm" ? Count(2) * d : d;
  auto ffn_params = [&](Count hidden) {
    const Count mats = c.gated_ffn() ? 3 : 2;
    return mats * d * hidden + b * (Count(mats.value() - 1) * hidden + d);
  };
  const Count attn = d * qd + Count(2) * d * kvd + qd * d + b * (qd + Count(2) * kvd + d) +
                     (c.qk_norm ? Count(2) * c.head_dim : Count(0));
  const Count embedding = Count(c.vocab_size) * d + (c.pos == "learned" ? Count(c.max_seq_len) * d : Count(0));
  Count total = embedding + norm;  // final norm
  Count active = total;
  const Count head = Count(c.vocab_size) * d;
  if (!c.tie_embeddings) {
    total += head;
    active += head;
  }
  if (!c.reward.empty()) {  // a reward model's score.weight
    total += d;
    active += d;
  }
  Count active_matmul = head;
  double attn_context = 0;
  Count activation_floats = 0;
  for (int64_t layer = 0; layer < c.n_layers; ++layer) {
    const Count norms = c.parallel_block ? norm : Count(2) * norm;
    Count stored = attn + norms, used_here = attn + norms, matmul = attn;
    if (c.layer_is_moe(layer)) {
      const auto& m = *c.moe;
      const Count expert = ffn_params(m.expert_hidden);
      stored += Count(m.n_experts) * expert + Count(m.n_shared) * expert + Count(m.n_experts) * d;
      const Count used = Count(m.top_k + m.n_shared) * expert + Count(m.n_experts) * d;
      used_here += used;
      matmul += used;
    } else {
      stored += ffn_params(c.ffn_hidden);
      used_here += ffn_params(c.ffn_hidden);
      matmul += ffn_params(c.ffn_hidden);
    }
    total += stored;
    active += used_here;
    active_matmul += matmul;
    const int64_t window = c.layer_window(layer);
    attn_context += static_cast<double>(window > 0 ? std::min(window, T) : T);
    activation_floats += block_activation_floats(c, layer);
  }
  s.embedding_params = embedding.value();
  s.total_params = total.value();
  s.active_params = active.value();
  s.active_matmul_params = active_matmul.value();
  s.attention_flops_per_token = 12.0 * static_cast<double>(qd.value()) * attn_context;
  s.flops_per_token = 6.0 * static_cast<double>(s.active_matmul_params) + s.attention_flops_per_token;
  s.kv_cache_bytes_per_token = (Count(c.n_layers) * 2 * kvd * 4).value();
  activation_floats += Count(2) * c.vocab_size;  // logits and their gradient
  try {
    s.activation_bytes = (Count(4) * B * T * activation_floats).value();
  } catch (const Error&) {
    throw Error("the activation memory at batch " + std::to_string(B) + ", sequence length " +
                std::to_string(T) + " overflows 64-bit integers (more than 2^63 bytes)");
  }
  s.train_memory_bytes = (Count(16) * total + s.activation_bytes).value();
  if (c.pos == "rope") {
    s.position_table_elements = (Count(c.max_seq_len) * c.head_dim).value();  // cos and sin, head_dim / 2 each
  } else if (c.pos == "sinusoidal") {
    s.position_table_elements = (Count(c.max_seq_len) * d).value();
  }
  return s;
}

int64_t MemoryNeed::total() const {
  return (Count(weights) + position_tables + gradients + adamw + activations + kv_cache).value();
}

MemoryNeed inference_memory(const ModelConfig& cfg, DType dtype) {
  const ModelStats s = model_stats(cfg, 1, 1);
  const int64_t bytes = static_cast<int64_t>(dtype_size(dtype));
  MemoryNeed need;
  need.purpose = std::string("to run it (") + dtype_name(dtype) + ")";
  need.weights = (Count(s.total_params) * bytes).value();
  need.position_tables = (Count(s.position_table_elements) * bytes).value();
  return need;
}

MemoryNeed generation_memory(const ModelConfig& cfg, int64_t kv_tokens, DType kv_dtype) {
  MemoryNeed need = inference_memory(cfg, DType::Float32);
  need.purpose = "to generate with a KV cache of " + std::to_string(kv_tokens) + " tokens (" +
                 dtype_name(kv_dtype) + ")";
  const Count kv_row = Count(2) * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim *
                       static_cast<int64_t>(dtype_size(kv_dtype));
  need.kv_cache = (Count(kv_tokens) * kv_row).value();
  return need;
}

MemoryNeed training_memory(const ModelConfig& cfg, int64_t batch, int64_t seq_len) {
  const ModelStats s = model_stats(cfg, batch, seq_len);
  MemoryNeed need;
  need.purpose = "for training at B = " + std::to_string(batch) + ", T = " + std::to_string(seq_len);
  need.weights = need.gradients = (Count(s.total_params) * 4).value();
  need.adamw = (Count(s.total_params) * 8).value();
  need.activations = s.activation_bytes;
  need.position_tables = (Count(s.position_table_elements) * 4).value();
  return need;
}

void require_fits_in_memory(const MemoryNeed& need, const std::string& source) {
  const SystemMemory machine = system_memory();
  const int64_t total = need.total();
  if (machine.bytes <= 0 || total <= machine.bytes) return;
  std::string parts = "weights " + bytes_str(need.weights);
  if (need.gradients) parts += ", gradients " + bytes_str(need.gradients);
  if (need.adamw) parts += ", AdamW moments " + bytes_str(need.adamw);
  if (need.activations) parts += ", activations " + bytes_str(need.activations);
  if (need.position_tables) parts += ", position tables " + bytes_str(need.position_tables);
  if (need.kv_cache) parts += ", KV cache " + bytes_str(need.kv_cache);
  throw Error((source.empty() ? "" : source + ": ") + "the model needs " + bytes_str(total) + " " + need.purpose + " (" + parts +
              ") but this machine has " + bytes_str(machine.bytes) + " of " + machine.what);
}

}  // namespace ember::nn
