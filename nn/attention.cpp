// Attention module: projections, QK-norm, RoPE, the fused attention op, o_proj.
#include "nn/attention.h"

#include <cmath>

#include "autograd/ops.h"
#include "autograd/parallel_ops.h"
#include "nn/tensor_parallel.h"

namespace ember::nn {

Attention::Attention(const AttentionOptions& opt, std::shared_ptr<const RotaryEmbedding> rotary,
                     std::shared_ptr<Generator> dropout_gen, Generator& init_gen, DType dtype)
    : opt_(opt), rotary_(std::move(rotary)) {
  EMBER_CHECK(opt.n_heads > 0 && opt.n_kv_heads > 0 && opt.n_heads % opt.n_kv_heads == 0,
              "Attention: n_kv_heads (", opt.n_kv_heads, ") must divide n_heads (", opt.n_heads, ")");
  const int64_t q_out = opt.n_heads * opt.head_dim, kv_out = opt.n_kv_heads * opt.head_dim;
  const double out_std = 0.02 / std::sqrt(2.0 * opt.n_layers);
  q_proj_ = std::make_shared<Linear>(opt.d_model, q_out, opt.bias, init_gen, 0.02, dtype);
  register_replaceable("q_proj", q_proj_);
  k_proj_ = std::make_shared<Linear>(opt.d_model, kv_out, opt.bias, init_gen, 0.02, dtype);
  register_replaceable("k_proj", k_proj_);
  v_proj_ = std::make_shared<Linear>(opt.d_model, kv_out, opt.bias, init_gen, 0.02, dtype);
  register_replaceable("v_proj", v_proj_);
  o_proj_ = std::make_shared<Linear>(q_out, opt.d_model, opt.bias, init_gen, out_std, dtype);
  register_replaceable("o_proj", o_proj_);
  if (opt.qk_norm) {
    q_norm_ = register_module("q_norm", std::make_shared<RMSNorm>(opt.head_dim, opt.norm_eps, dtype));
    k_norm_ = register_module("k_norm", std::make_shared<RMSNorm>(opt.head_dim, opt.norm_eps, dtype));
  }
  dropout_ = std::make_shared<Dropout>(opt.dropout, std::move(dropout_gen));
  register_module("dropout", dropout_);
  heads_ = opt.n_heads;
  kv_heads_ = opt.n_kv_heads;
}

void Attention::set_tensor_parallel(const ParallelGroup* group) {
  tp_ = group && group->size() > 1 ? group : nullptr;
  const int64_t T = tp_ ? tp_->size() : 1;
  EMBER_CHECK(opt_.n_heads % T == 0 && opt_.n_kv_heads % T == 0, "Attention: ", T,
              " tensor ranks do not divide n_heads ", opt_.n_heads, " and n_kv_heads ", opt_.n_kv_heads);
  heads_ = opt_.n_heads / T;
  kv_heads_ = opt_.n_kv_heads / T;
}

void Attention::project(const Variable& x, Variable& q, Variable& k, Variable& v) const {
  EMBER_CHECK(x.dim() == 3 && x.size(2) == opt_.d_model, "Attention: input must be [B, T, ",
              opt_.d_model, "], got ", shape_str(x.shape()));
  const int64_t B = x.size(0), T = x.size(1);
  const Variable in = tp_ ? copy_to_group(x, *tp_) : x;  // column-parallel q, k, v
  q = view(q_proj_->forward(in), {B, T, heads_, opt_.head_dim});
  k = view(k_proj_->forward(in), {B, T, kv_heads_, opt_.head_dim});
  v = view(v_proj_->forward(in), {B, T, kv_heads_, opt_.head_dim});
  if (q_norm_ && tp_) {  // whole weights over this rank's heads: their gradients sum over ranks
    q = rms_norm(q, copy_to_group(q_norm_->weight(), *tp_), q_norm_->eps());
    k = rms_norm(k, copy_to_group(k_norm_->weight(), *tp_), k_norm_->eps());
  } else if (q_norm_) {
    q = q_norm_->forward(q);
    k = k_norm_->forward(k);
  }
  if (rotary_) {
    q = rotary_->apply(q);
    k = rotary_->apply(k);
  }
}

Variable Attention::forward(const Variable& x) const {
  Variable q, k, v;
  project(x, q, k, v);
  const int64_t B = x.size(0), T = x.size(1);
  Variable o = attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(opt_.head_dim)), opt_.window,
                         opt_.softcap);
  o = view(o, {B, T, heads_ * opt_.head_dim});
  o = tp_ ? row_parallel_forward(*o_proj_, o, *tp_) : o_proj_->forward(o);
  return dropout_->forward(o);
}

}  // namespace ember::nn
