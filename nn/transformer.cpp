// TransformerBlock and Transformer forward passes (whole, or one pipeline stage) and the training loss.
#include "nn/transformer.h"

#include <cmath>

#include "autograd/backward_hook.h"
#include "autograd/recompute.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/parallel_ops.h"
#include "nn/sizing/model_stats.h"

namespace ember::nn {
namespace {

// A module with no parameters of its own that only groups children under a name.
class Group : public Module {
 public:
  template <class M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> m) {
    return register_module(name, std::move(m));
  }
};

}  // namespace

TransformerBlock::TransformerBlock(const ModelConfig& cfg, int64_t layer,
                                   std::shared_ptr<const RotaryEmbedding> rotary,
                                   std::shared_ptr<Generator> dropout_gen, Generator& init_gen,
                                   DType dtype)
    : parallel_(cfg.parallel_block) {
  input_norm_ = register_module("input_layernorm", make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, dtype));
  AttentionOptions opt;
  opt.d_model = cfg.d_model;
  opt.n_heads = cfg.n_heads;
  opt.n_kv_heads = cfg.n_kv_heads;
  opt.head_dim = cfg.head_dim;
  opt.qk_norm = cfg.qk_norm;
  opt.bias = cfg.bias;
  opt.window = cfg.layer_window(layer);
  opt.softcap = cfg.attn_softcap;
  opt.norm_eps = cfg.norm_eps;
  opt.dropout = cfg.dropout;
  opt.n_layers = static_cast<int>(cfg.n_layers);
  attn_ = register_module("self_attn", std::make_shared<Attention>(opt, std::move(rotary), dropout_gen, init_gen, dtype));
  if (!parallel_) {
    post_norm_ = register_module("post_attention_layernorm", make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, dtype));
  }
  const double down_std = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.n_layers));
  if (cfg.layer_is_moe(layer)) {
    moe_ = register_module("mlp", std::make_shared<MoE>(cfg.d_model, *cfg.moe, cfg.ffn_act, cfg.bias, init_gen, down_std, dtype));
  } else {
    ffn_ = register_module("mlp", std::make_shared<FFN>(cfg.d_model, cfg.ffn_hidden, cfg.ffn_act, cfg.bias, init_gen, down_std, dtype));
  }
  ffn_dropout_ = register_module("mlp_dropout", std::make_shared<Dropout>(cfg.dropout, std::move(dropout_gen)));
}

void TransformerBlock::set_tensor_parallel(const ParallelGroup* group) {
  attn_->set_tensor_parallel(group);
  if (moe_) moe_->set_tensor_parallel(group);
  if (ffn_) ffn_->set_tensor_parallel(group);
}

Variable TransformerBlock::mlp_forward(const Variable& h, std::vector<MoEAux>& moe_aux,
                                       const Tensor& real) const {
  if (moe_) {
    MoEAux aux;
    Variable y = moe_->forward(h, aux, real);
    moe_aux.push_back(aux);
    return ffn_dropout_->forward(y);
  }
  return ffn_dropout_->forward(ffn_->forward(h));
}

Variable TransformerBlock::forward(const Variable& x, std::vector<MoEAux>& moe_aux,
                                   const Tensor& real) const {
  if (parallel_) {
    const Variable h = input_norm_->forward(x);
    return x + attn_->forward(h) + mlp_forward(h, moe_aux, real);
  }
  const Variable x1 = x + attn_->forward(input_norm_->forward(x));
  return x1 + mlp_forward(post_norm_->forward(x1), moe_aux, real);
}

Transformer::Transformer(const ModelConfig& cfg, uint64_t seed, DType dtype, TensorParallel tp,
                         PipelineStage pp)
    : cfg_(cfg), dtype_(dtype), tp_(tp), stage_(checked_stage(cfg, pp)),
      moe_layers_(moe_layer_count(cfg, 0, cfg.n_layers)),
      stage_moe_layers_(moe_layer_count(cfg, stage_.first_layer, stage_.n_layers)),
      dropout_gen_(std::make_shared<Generator>(seed ^ 0x9e3779b97f4a7c15ull)) {
  require_fits_in_memory(inference_memory(cfg, dtype));  // before any layer is allocated
  if (tp_.active()) check_tensor_parallel(cfg_, tp_.size());
  Generator init_gen(seed);
  auto model = register_module("model", std::make_shared<Group>());
  embed_tokens_ = model->add("embed_tokens", std::make_shared<Embedding>(cfg.vocab_size, cfg.d_model, init_gen, 0.02, dtype));
  shard_now(*embed_tokens_, "model.embed_tokens.");
  if (cfg.pos == "learned") {
    embed_positions_ = model->add("embed_positions", std::make_shared<Embedding>(cfg.max_seq_len, cfg.d_model, init_gen, 0.02, dtype));
  } else if (cfg.pos == "sinusoidal") {
    sinusoidal_ = sinusoidal_positions(cfg.max_seq_len, cfg.d_model, dtype);
  }
  std::shared_ptr<const RotaryEmbedding> rotary;
  if (cfg.pos == "rope") {
    rotary = std::make_shared<RotaryEmbedding>(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta, dtype);
  }
  auto layers = model->add("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    blocks_.push_back(layers->push_back(
        std::make_shared<TransformerBlock>(cfg, i, rotary, dropout_gen_, init_gen, dtype)));
    shard_now(*blocks_.back(), "model.layers." + std::to_string(i) + ".");
  }
  final_norm_ = model->add("norm", make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, dtype));
  if (!cfg.tie_embeddings) {
    lm_head_ = std::make_shared<Linear>(cfg.d_model, cfg.vocab_size, false, init_gen, 0.02, dtype);
    register_replaceable("lm_head", lm_head_);
    shard_now(*lm_head_, "lm_head.");
  }
  if (!cfg.reward.empty()) add_score_head(init_gen, cfg.reward);  // drawn last
  if (cfg.has_value_head()) set_rl(cfg.rl, std::make_shared<ValueHead>(cfg.d_model, init_gen, dtype));
  if (stage_.active()) keep_stage(*model, *layers);
  if (tp_.active()) shard_for_tensor_parallel();
}

void Transformer::keep_stage(Module& model, ModuleList& layers) {
  EMBER_CHECK(!score_head_, "pipeline parallelism of a reward model is not available yet: use --pp 1");
  EMBER_CHECK(!value_head_, "pipeline parallelism of a PPO policy is not available yet: use --pp 1");
  const bool first = stage_.first(), last = stage_.last();
  if (!first && !(last && cfg_.tie_embeddings)) {
    model.unregister_module("embed_tokens");
    embed_tokens_.reset();
  }
  if (!first && embed_positions_) {
    model.unregister_module("embed_positions");
    embed_positions_.reset();
  }
  if (!first) sinusoidal_ = Tensor();
  std::vector<std::shared_ptr<TransformerBlock>> kept;
  const int64_t begin = stage_.first_layer, end = begin + stage_.n_layers;
  for (int64_t i = 0; i < cfg_.n_layers; ++i) {
    if (i >= begin && i < end) {
      kept.push_back(blocks_[static_cast<size_t>(i)]);
    } else {
      layers.drop(static_cast<size_t>(i));
    }
  }
  blocks_ = std::move(kept);
  if (!last) {
    model.unregister_module("norm");
    final_norm_.reset();
    if (lm_head_) unregister_module("lm_head");
    lm_head_.reset();
  }
}

Embedding& Transformer::embed_tokens() const {
  EMBER_CHECK(embed_tokens_, "Transformer: pipeline stage ", stage_.stage,
              " does not hold the token embedding");
  return *embed_tokens_;
}

void Transformer::shard_now(Module& module, const std::string& prefix) {
  if (!tp_.active()) return;
  for (auto& [name, p] : module.named_parameters())
    p.set_data(tensor_shard(p.data(), tensor_split(prefix + name), tp_.rank(), tp_.size()));
}

void Transformer::shard_for_tensor_parallel() {
  EMBER_CHECK(!score_head_, "tensor parallelism of a reward model is not available yet: use --tp 1");
  EMBER_CHECK(!value_head_, "tensor parallelism of a PPO policy is not available yet: use --tp 1");
  for (const auto& block : blocks_) block->set_tensor_parallel(tp_.group);
}

void Transformer::add_score_head(Generator& gen, const std::string& reward) {
  EMBER_CHECK(!score_head_, "Transformer: the model already has a score head (score.weight)");
  EMBER_CHECK(!reward.empty(), "Transformer: a score head needs the reward options (config \"reward\")");
  score_head_ = std::make_shared<ScoreHead>(cfg_.d_model, gen, dtype_);
  register_module("score", score_head_->linear());
  cfg_.reward = reward;
}

Variable Transformer::scores(const Tensor& ids, const Tensor& last) const {
  EMBER_CHECK(score_head_, "Transformer: scores() needs a reward model (a config with \"reward\")");
  return score_head_->forward(hidden_states(ids), last);
}

void Transformer::set_rl(const std::string& rl, std::shared_ptr<ValueHead> head) {
  EMBER_CHECK(!value_head_, "Transformer: the model already has a value head (value.weight)");
  cfg_.rl = rl;
  EMBER_CHECK(cfg_.has_value_head() == (head != nullptr), "Transformer: the \"rl\" options ",
              cfg_.has_value_head() ? "ask for" : "take no", " value head (value.weight)");
  if (!head) return;
  EMBER_CHECK(head->weight().size(1) == cfg_.d_model, "Transformer: a value head of ",
              head->weight().size(1), " inputs on a model of d_model ", cfg_.d_model);
  value_head_ = std::move(head);
  register_module("value", value_head_->linear());
}

Transformer::PolicyOutput Transformer::forward_with_values(const Tensor& ids) const {
  EMBER_CHECK(value_head_, "Transformer: forward_with_values() needs a PPO policy (a value head)");
  std::vector<MoEAux> moe_aux;  // the RL losses take no MoE terms
  const Variable h = trunk(ids, Tensor(), moe_aux);
  return {head(h), value_head_->forward(h)};
}

void Transformer::set_tied_head_adapter(std::shared_ptr<UnaryModule> adapter) {
  EMBER_CHECK(cfg_.tie_embeddings && !tied_head_adapter_ && adapter,
              "Transformer: a tied head adapter needs tied embeddings and is added once");
  tied_head_adapter_ = register_module("lm_head", std::move(adapter));
}

void Transformer::set_vocab_size(int64_t vocab_size) {
  EMBER_CHECK(!embed_tokens_ || vocab_size == embed_tokens_->num_embeddings(),
              "Transformer: vocab_size ", vocab_size, " does not match the embedding's ",
              embed_tokens_->num_embeddings(), " rows");
  cfg_.vocab_size = vocab_size;
}

Variable Transformer::add_positions(const Variable& x, int64_t T) const {
  if (embed_positions_) {
    return x + embed_positions_->forward(Tensor::arange(0.0, static_cast<double>(T)));
  }
  if (sinusoidal_.defined()) return x + Variable(sinusoidal_.narrow(0, 0, T));
  return x;
}

Variable Transformer::head(const Variable& h) const {
  std::function<void()> table_read;
  if (residency_) table_read = [r = residency_] { r->tied_table_read(); };
  Variable logits;
  if (tp_.active()) {  // this rank's vocabulary rows of the table (a LoRA head: its adapter's too)
    EMBER_CHECK(!residency_ && !(embed_tokens_ && embed_tokens_->added_rows().defined()),
                "tensor parallelism: the head takes no ZeRO-3 or added rows");
    const Variable hc = copy_to_group(h, *tp_.group);
    const auto* linear = dynamic_cast<const Linear*>(lm_head_.get());
    logits = lm_head_ && !linear
                 ? lm_head_->forward(hc)
                 : matmul(hc, linear ? linear->weight() : embed_tokens_->weight(), false, true);
    if (tied_head_adapter_) logits = logits + tied_head_adapter_->forward(hc);
  } else {
    logits = lm_head_ ? lm_head_->forward(h) : embed_tokens_->project(h, std::move(table_read));
    if (tied_head_adapter_) logits = logits + tied_head_adapter_->forward(h);
  }
  if (cfg_.final_softcap > 0) {
    logits = tanh(logits / cfg_.final_softcap) * cfg_.final_softcap;
  }
  return logits;
}

Variable Transformer::embed(const Tensor& ids, const Tensor& real) const {
  EMBER_CHECK(ids.dim() == 2, "Transformer: token ids must be [B, T], got ", shape_str(ids.shape()));
  const int64_t T = ids.size(1);
  EMBER_CHECK(T <= cfg_.max_seq_len, "Transformer: sequence length ", T, " exceeds max_seq_len ",
              cfg_.max_seq_len);
  if (residency_) residency_->forward_begins();
  const Variable tokens = tp_.active() ? vocab_parallel_embedding(embed_tokens_->weight(), ids, *tp_.group)
                                       : embed_tokens_->forward(ids);
  Variable x = add_positions(tokens, T);  // [B, T, C]
  EMBER_CHECK(!real.defined() || real.shape() == ids.shape(),
              "Transformer: the real-token mask of shape ", shape_str(real.shape()),
              " does not match the ids' ", shape_str(ids.shape()));
  return x;
}

Variable Transformer::run_blocks(Variable x, const Tensor& real, std::vector<MoEAux>& moe_aux) const {
  for (size_t i = 0; i < blocks_.size(); ++i) x = resident_block_forward(i, x, moe_aux, real);
  return x;
}

Variable Transformer::trunk(const Tensor& ids, const Tensor& real,
                            std::vector<MoEAux>& moe_aux) const {
  EMBER_CHECK(!stage_.active(), "Transformer: pipeline stage ", stage_.stage,
              " runs forward_stage, not forward or hidden_states");
  Variable x = run_blocks(embed(ids, real), real, moe_aux);
  if (residency_) {
    const std::shared_ptr<BlockResidency> r = residency_;
    x = on_backward(x, [r] { r->after_head_backward(); });  // runs after every node of the head
  }
  return final_norm_->forward(x);
}

ModelOutput Transformer::forward(const Tensor& ids, const Tensor& real) const {
  ModelOutput out;
  out.logits = head(trunk(ids, real, out.moe_aux));
  return out;
}

StageOutput Transformer::forward_stage(const Tensor& ids, const Variable& x,
                                       const Tensor& real) const {
  EMBER_CHECK(!residency_, "pipeline parallelism does not take ZeRO-3");
  StageOutput out;
  Variable h;
  if (stage_.first()) {
    h = embed(ids, real);
  } else {
    EMBER_CHECK(x.defined() && x.dim() == 3 && x.size(2) == cfg_.d_model, "pipeline stage ",
                stage_.stage, ": expected the previous stage's hidden states [B, T, ",
                cfg_.d_model, "], got ", x.defined() ? shape_str(x.shape()) : "none");
    EMBER_CHECK(!real.defined() || real.shape() == Shape({x.size(0), x.size(1)}),
                "Transformer: the real-token mask of shape ", shape_str(real.shape()),
                " does not match the hidden states' ", shape_str(x.shape()));
    h = x;
  }
  h = run_blocks(h, real, out.moe_aux);
  out.output = stage_.last() ? head(final_norm_->forward(h)) : h;
  return out;
}

Variable Transformer::hidden_states(const Tensor& ids, const Tensor& real) const {
  std::vector<MoEAux> moe_aux;  // not used: a head on the hidden states adds no MoE terms
  return trunk(ids, real, moe_aux);
}

void Transformer::set_activation_checkpointing(int64_t every) {
  EMBER_CHECK(every >= 0, "Transformer: activation checkpointing every ", every,
              " blocks; expected >= 1, or 0 for none");
  checkpoint_every_ = every;
}

Variable Transformer::resident_block_forward(size_t i, const Variable& x,
                                            std::vector<MoEAux>& moe_aux, const Tensor& real) const {
  if (!residency_) return block_forward(i, x, moe_aux, real);
  const std::shared_ptr<BlockResidency> r = residency_;
  r->before_forward(i);
  // Backward runs nodes latest first: the output's marker before every node of the block, the
  // input's after them all (and after the block's parameter gradients are final).
  const Variable in = on_backward(x, [r, i] { r->after_backward(i); });
  const Variable y = on_backward(block_forward(i, in, moe_aux, real), [r, i] { r->before_backward(i); });
  r->after_forward(i);
  return y;
}

Variable Transformer::block_forward(size_t i, const Variable& x, std::vector<MoEAux>& moe_aux,
                                    const Tensor& real) const {
  const std::shared_ptr<TransformerBlock>& block = blocks_[i];
  const size_t layer = i + static_cast<size_t>(stage_.first_layer);  // the global index
  const bool checkpointed =
      checkpoint_every_ > 0 && layer % static_cast<size_t>(checkpoint_every_) == 0;
  if (!checkpointed || !grad_enabled()) return block->forward(x, moe_aux, real);
  // outputs: the block's, then (aux, router_z) of its MoE layer if it has one
  const RecomputeFn fn = [block, real](const std::vector<Variable>& in) {
    std::vector<MoEAux> aux;
    std::vector<Variable> outs{block->forward(in[0], aux, real)};
    for (const MoEAux& a : aux) {
      outs.push_back(a.aux);
      outs.push_back(a.router_z);
    }
    return outs;
  };
  const std::vector<Variable> outs =
      recompute(fn, {x}, {block->parameters(), {dropout_gen_.get()}});
  for (size_t k = 1; k + 1 < outs.size(); k += 2) moe_aux.push_back({outs[k], outs[k + 1]});
  return outs[0];
}

Variable Transformer::flat_logits(const ModelOutput& out, const Tensor& targets) const {
  const Variable& logits = out.logits;
  EMBER_CHECK(targets.shape() == Shape({logits.size(0), logits.size(1)}), "loss: targets of shape ",
              shape_str(targets.shape()), " do not match logits of shape ", shape_str(logits.shape()));
  return reshape(logits, {logits.size(0) * logits.size(1), logits.size(2)});
}

LossTerms Transformer::loss(const ModelOutput& out, const Tensor& targets) const {
  EMBER_CHECK(stage_.last(), "Transformer: pipeline stage ", stage_.stage, " has no loss head");
  const Tensor flat_targets = targets.reshape({targets.numel()});
  const CrossEntropyResult ce =
      tp_.active() ? vocab_parallel_cross_entropy(flat_logits(out, targets), flat_targets,
                                                  cfg_.vocab_size, *tp_.group, cfg_.z_loss_coef)
                   : cross_entropy(flat_logits(out, targets), flat_targets, cfg_.z_loss_coef);
  return with_moe_losses(out, {ce.loss, ce.ce, ce.z}, 1.0);
}

LossTerms Transformer::loss(const ModelOutput& out, const Tensor& targets, const Tensor& weight,
                            double norm, double moe_scale) const {
  EMBER_CHECK(stage_.last(), "Transformer: pipeline stage ", stage_.stage, " has no loss head");
  EMBER_CHECK(weight.shape() == targets.shape(), "loss: weight of shape ",
              shape_str(weight.shape()), " does not match targets of shape ",
              shape_str(targets.shape()));
  const int64_t N = targets.numel();
  const Tensor flat_weight = weight.contiguous().reshape({N});
  const CrossEntropyResult ce =
      tp_.active() ? vocab_parallel_cross_entropy(flat_logits(out, targets), targets.reshape({N}),
                                                  cfg_.vocab_size, flat_weight, norm, *tp_.group,
                                                  cfg_.z_loss_coef)
                   : cross_entropy(flat_logits(out, targets), targets.reshape({N}), flat_weight,
                                   norm, cfg_.z_loss_coef);
  return with_moe_losses(out, {ce.loss, ce.ce, ce.z}, moe_scale);
}

LossTerms Transformer::stage_loss(const StageOutput& out, const Tensor& targets) const {
  const ModelOutput whole{out.output, out.moe_aux};
  return stage_.last() ? loss(whole, targets) : with_moe_losses(whole, LossTerms{}, 1.0);
}

LossTerms Transformer::stage_loss(const StageOutput& out, const Tensor& targets,
                                  const Tensor& weight, double norm, double moe_scale) const {
  const ModelOutput whole{out.output, out.moe_aux};
  return stage_.last() ? loss(whole, targets, weight, norm, moe_scale)
                       : with_moe_losses(whole, LossTerms{}, moe_scale);
}

LossTerms Transformer::with_moe_losses(const ModelOutput& out, LossTerms terms,
                                       double moe_scale) const {
  const auto add = [&terms](const Variable& v) {
    terms.total = terms.total.defined() ? terms.total + v : v;
  };
  if (!out.moe_aux.empty()) {
    Variable aux_sum, rz_sum;
    for (const MoEAux& a : out.moe_aux) {
      aux_sum = aux_sum.defined() ? aux_sum + a.aux : a.aux;
      rz_sum = rz_sum.defined() ? rz_sum + a.router_z : a.router_z;
    }
    // The model's MoE layers per this stage's (1 in one process) times the entries: the mean
    // over every layer, of which a pipeline stage adds its share.
    const double L = static_cast<double>(out.moe_aux.size()) * static_cast<double>(moe_layers_) /
                     static_cast<double>(stage_moe_layers_);
    const Variable aux_mean = aux_sum / L, rz_mean = rz_sum / L;
    terms.aux = aux_mean.item();
    terms.router_z = rz_mean.item();
    const MoEConfig& moe = *cfg_.moe;
    if (moe.aux_loss_coef > 0) add(aux_mean * (moe.aux_loss_coef * moe_scale));
    if (moe.router_z_loss_coef > 0) add(rz_mean * (moe.router_z_loss_coef * moe_scale));
  }
  return terms;
}

}  // namespace ember::nn
