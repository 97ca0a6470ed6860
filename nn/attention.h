// Attention (docs/model.md#attention): q/k/v projections, optional QK RMSNorm over
// head_dim, RoPE, causal (optionally sliding-window) soft-capped attention
// with MHA/GQA/MQA head sharing, o_proj and dropout.
// x [B, T, C] -> [B, T, C]; q [B, T, Hq, D], k and v [B, T, Hkv, D].
// (Inference runs inference/model_runner/paged_forward.h over the same weights.)
#pragma once
#include <memory>

#include "autograd/parallel_group.h"
#include "nn/config.h"
#include "nn/layers.h"
#include "nn/rotary.h"

namespace ember::nn {

struct AttentionOptions {
  int64_t d_model = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  bool qk_norm = false;
  bool bias = false;
  int64_t window = 0;  // 0: full causal
  double softcap = 0;
  double norm_eps = 1e-5;
  double dropout = 0;
  int n_layers = 1;  // scales o_proj's initial std by 1 / sqrt(2 n_layers)
};

class Attention : public Module {
 public:
  // rotary may be null (no RoPE); dropout_gen is shared with the whole model.
  Attention(const AttentionOptions& opt, std::shared_ptr<const RotaryEmbedding> rotary,
            std::shared_ptr<Generator> dropout_gen, Generator& init_gen,
            DType dtype = DType::Float32);
  Variable forward(const Variable& x) const;
  const AttentionOptions& options() const { return opt_; }
  // Tensor parallelism (nn/tensor_parallel.h), once the projections hold this rank's shards:
  // n_heads / T query and n_kv_heads / T key/value heads, o_proj row-parallel.
  void set_tensor_parallel(const ParallelGroup* group);

 private:
  AttentionOptions opt_;
  const ParallelGroup* tp_ = nullptr;
  int64_t heads_ = 0, kv_heads_ = 0;  // this rank's: opt_'s over the group size
  std::shared_ptr<const RotaryEmbedding> rotary_;
  // Linear, or a LoRALinear / Nf4Linear once fine-tuning replaced them (Module::replace_module).
  std::shared_ptr<UnaryModule> q_proj_, k_proj_, v_proj_, o_proj_;
  std::shared_ptr<RMSNorm> q_norm_, k_norm_;
  std::shared_ptr<Dropout> dropout_;
  // q [B, T, Hq, D], k, v [B, T, Hkv, D] after projections, QK-norm and RoPE.
  void project(const Variable& x, Variable& q, Variable& k, Variable& v) const;
};

}  // namespace ember::nn
