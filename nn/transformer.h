// The Transformer of docs/model.md#blocks-and-the-model: token embedding (+ learned or sinusoidal
// positions), n_layers blocks (pre-norm, or parallel), final norm, tied or
// separate lm_head, final soft-cap; and its loss. Parameter names follow
// docs/model.md#parameter-names straight from the module tree.
// ids [B, T] -> logits [B, T, V]. Inference (generation, serving) runs the same weights
// through inference/model_runner/paged_forward.h.
#pragma once
#include <memory>
#include <vector>

#include "nn/alignment/reward_model.h"
#include "nn/alignment/value_head.h"
#include "nn/attention.h"
#include "nn/block_residency.h"
#include "nn/config.h"
#include "nn/moe.h"
#include "nn/layers.h"
#include "nn/pipeline_stage.h"
#include "nn/tensor_parallel.h"

namespace ember::nn {

// One block: x + attn(norm(x)), then + mlp(norm(x)); or with parallel_block
// x + attn(norm(x)) + mlp(norm(x)) sharing one norm.
class TransformerBlock : public Module {
 public:
  TransformerBlock(const ModelConfig& cfg, int64_t layer, std::shared_ptr<const RotaryEmbedding> rotary,
                   std::shared_ptr<Generator> dropout_gen, Generator& init_gen, DType dtype);
  // Appends this block's MoE losses to moe_aux when it is an MoE block (over the real tokens
  // only when the mask `real` is given: MoE::forward).
  Variable forward(const Variable& x, std::vector<MoEAux>& moe_aux,
                   const Tensor& real = Tensor()) const;
  const std::shared_ptr<MoE>& moe() const { return moe_; }
  // Tensor parallelism of the attention and the dense or MoE MLP (nn/tensor_parallel.h).
  void set_tensor_parallel(const ParallelGroup* group);

 private:
  Variable mlp_forward(const Variable& h, std::vector<MoEAux>& moe_aux, const Tensor& real) const;
  bool parallel_;
  std::shared_ptr<UnaryModule> input_norm_, post_norm_;
  std::shared_ptr<Attention> attn_;
  std::shared_ptr<FFN> ffn_;
  std::shared_ptr<MoE> moe_;
  std::shared_ptr<Dropout> ffn_dropout_;
};

struct ModelOutput {
  Variable logits;              // [B, T, V]
  std::vector<MoEAux> moe_aux;  // one per MoE layer
};

// What a pipeline stage's forward returns (Transformer::forward_stage).
struct StageOutput {
  Variable output;              // the last stage's logits [B, T, V]; another's hidden states [B, T, C]
  std::vector<MoEAux> moe_aux;  // one per MoE layer of this stage
};

// The loss terms of docs/model.md#loss; total is what is differentiated.
struct LossTerms {
  Variable total;
  double ce = 0, z = 0, aux = 0, router_z = 0;
};

class Transformer : public Module {
 public:
  // Weights drawn from a Generator seeded with `seed`: normal(0, 0.02), o_proj and
  // down_proj with std 0.02 / sqrt(2 n_layers), norms 1, biases 0.
  // With tp active (nn/tensor_parallel.h: the group outlives the model), each module is drawn
  // whole as above, then its parameters keep their tensor rank's shard; logits are then this
  // rank's vocabulary shard [B, T, padded V / T] and the losses vocabulary-parallel. An Error
  // for a config --tp does not divide and for a reward model's head.
  // With pp active (nn/pipeline_stage.h; docs/scaling.md#pipeline-parallelism), the model built
  // whole as above (and sharded by tp) keeps only its stage's blocks, the embeddings on the
  // first stage, the final norm and lm_head on the last, a tied table on both; parameter names
  // are unchanged (model.layers.<global index>...). It then runs forward_stage, not forward.
  // An Error for a stage outside the model's blocks and a reward model's head.
  explicit Transformer(const ModelConfig& cfg, uint64_t seed = 0, DType dtype = DType::Float32,
                       TensorParallel tp = {}, PipelineStage pp = {});
  // real: optional float32 [B, T] mask of the real (non-padding) ids; the MoE losses are then
  // taken over those only (docs/model.md#loss-of-a-step).
  ModelOutput forward(const Tensor& ids, const Tensor& real = Tensor()) const;
  // The final norm's output [B, T, C], the lm_head's input (forward's logits are the head of
  // these, bit for bit): what a score or value head reads (nn/alignment/reward_model.h).
  Variable hidden_states(const Tensor& ids, const Tensor& real = Tensor()) const;
  // A pipeline stage's forward: the first stage embeds ids [B, T] (x unused), the others run
  // their blocks on x, the previous stage's output [B, T, C]; the last stage returns the logits,
  // the others their last block's output. real: as forward's, [B, T], given to every stage.
  StageOutput forward_stage(const Tensor& ids, const Variable& x, const Tensor& real = Tensor()) const;
  // A stage's loss: the last stage's is loss()'s cross-entropy and z-loss; every stage adds its
  // MoE layers' share, coef x (sum over its MoE layers) / (MoE layers of the whole model), so the
  // stages' totals sum to the one-process total; aux and router_z are these shares (their sum
  // over the stages is the one-process mean). total is undefined on a stage with neither.
  LossTerms stage_loss(const StageOutput& out, const Tensor& targets) const;
  LossTerms stage_loss(const StageOutput& out, const Tensor& targets, const Tensor& weight,
                       double norm, double moe_scale) const;
  const PipelineStage& stage() const { return stage_; }
  DType dtype() const { return dtype_; }
  const TensorParallel& tensor_parallel() const { return tp_; }
  // ce + z_loss_coef z + aux_loss_coef mean(aux) + router_z_loss_coef mean(router_z)
  // for targets [B, T]. On a pipeline stage: only the last, with its StageOutput (stage_loss).
  LossTerms loss(const ModelOutput& out, const Tensor& targets) const;
  // docs/model.md#loss-of-a-step: the weighted cross_entropy (autograd/ops.h) of targets
  // [B, T] with weight [B, T] (the trained mask) over norm, plus moe_scale x the MoE terms above.
  LossTerms loss(const ModelOutput& out, const Tensor& targets, const Tensor& weight, double norm,
                 double moe_scale) const;
  const ModelConfig& config() const { return cfg_; }
  // The blocks this model holds: all, or a pipeline stage's (blocks()[i] is block
  // stage().first_layer + i).
  const std::vector<std::shared_ptr<TransformerBlock>>& blocks() const { return blocks_; }
  // Activation checkpointing (autograd/recompute.h) of blocks 0, every, 2 every, ... (1: every
  // block; 0: none, the default): when forward() records a graph, such a block keeps only its
  // input and is recomputed in backward, with the same dropout masks; the results are
  // bit-identical to the plain forward's.
  void set_activation_checkpointing(int64_t every);
  int64_t activation_checkpointing() const { return checkpoint_every_; }
  // ZeRO-3 (nn/block_residency.h): forward() tells `residency` when each block's parameters are
  // needed (null, the default: they always are).
  void set_block_residency(std::shared_ptr<BlockResidency> residency) {
    residency_ = std::move(residency);
  }
  // The dropout stream (its offset is training state).
  Generator& dropout_generator() { return *dropout_gen_; }
  const std::shared_ptr<Generator>& shared_dropout_generator() const { return dropout_gen_; }

  // Fine-tuning (nn/adapters/adapters.h). The token embedding (rows can be added to it); an
  // Error on a pipeline stage that does not hold it.
  Embedding& embed_tokens() const;
  // With tied embeddings: adds `adapter` (registered as "lm_head") to the tied output layer,
  // logits = h E^T + adapter(h); the embedding's forward is unchanged.
  void set_tied_head_adapter(std::shared_ptr<UnaryModule> adapter);
  const std::shared_ptr<UnaryModule>& tied_head_adapter() const { return tied_head_adapter_; }
  // Records the fine-tune's adapters and quantization in config() (add_adapters does).
  void set_finetune_config(const LoRAConfig& lora, const std::string& quantize) {
    cfg_.lora = lora;
    cfg_.quantize = quantize;
  }
  // Bumps cfg.vocab_size after rows were added to the embedding (and untied head).
  void set_vocab_size(int64_t vocab_size);

  // A reward model (docs/model.md#reward-model). A reward config (non-empty cfg.reward) builds its
  // head `score.weight` [1, d_model] (no bias) after every other parameter, drawn from the same
  // generator, so a base's weights are those of the same seed without it. add_score_head gives a
  // model without one its head, drawn normal(0, 0.02) from gen, trainable, registered last; it
  // records `reward` (a JSON object's text) in config().reward.
  void add_score_head(Generator& gen, const std::string& reward);
  bool has_score_head() const { return score_head_ != nullptr; }
  // The score of each row at its last token: hidden_states(ids) gathered at last[b] (in [0, T)),
  // times score.weight -> [B]. ids [B, T], last [B] (int).
  Variable scores(const Tensor& ids, const Tensor& last) const;

  // RL from a reward (docs/model.md#rl-from-a-reward). set_rl records `rl` (the "rl" object's
  // text) in config().rl; for ppo it registers `head` (the value head `value.weight`, trained)
  // after every other parameter. A config whose "rl" asks for ppo builds its head, drawn last.
  void set_rl(const std::string& rl, std::shared_ptr<ValueHead> head);
  bool has_value_head() const { return value_head_ != nullptr; }
  // One trunk, two heads: forward()'s logits [B, T, V] (bit for bit) and the value head's values
  // [B, T] (values[b, t] read at position t, whose logits predict the token after it).
  struct PolicyOutput {
    Variable logits, values;
  };
  PolicyOutput forward_with_values(const Tensor& ids) const;

 private:
  ModelConfig cfg_;
  DType dtype_;
  TensorParallel tp_;
  PipelineStage stage_;
  int64_t moe_layers_ = 0, stage_moe_layers_ = 0;  // MoE layers of the model, of this stage
  std::shared_ptr<Generator> dropout_gen_;
  std::shared_ptr<Embedding> embed_tokens_, embed_positions_;
  Tensor sinusoidal_;
  std::vector<std::shared_ptr<TransformerBlock>> blocks_;
  std::shared_ptr<UnaryModule> final_norm_;
  std::shared_ptr<UnaryModule> lm_head_;            // a Linear, or its LoRALinear (replaceable)
  std::shared_ptr<UnaryModule> tied_head_adapter_;  // tied embeddings with a head adapter
  std::shared_ptr<ScoreHead> score_head_;           // a reward model's
  std::shared_ptr<ValueHead> value_head_;           // a PPO policy's
  int64_t checkpoint_every_ = 0;
  std::shared_ptr<BlockResidency> residency_;
  // block_forward between the residency calls: before/after its forward, and markers in the
  // graph at its input and output that call after/before its backward.
  Variable resident_block_forward(size_t i, const Variable& x, std::vector<MoEAux>& moe_aux,
                                  const Tensor& real) const;
  // Block i's forward (TransformerBlock::forward), checkpointed when set_activation_checkpointing
  // says so: its MoE losses are then outputs of the checkpoint, back-propagated with its output.
  Variable block_forward(size_t i, const Variable& x, std::vector<MoEAux>& moe_aux,
                         const Tensor& real) const;
  // Position embeddings (learned or sinusoidal) of positions 0 .. T - 1 added to x.
  Variable add_positions(const Variable& x, int64_t T) const;
  // Embedding, positions, blocks and the final norm: ids [B, T] -> [B, T, C]; the MoE losses
  // of its blocks appended to moe_aux.
  Variable trunk(const Tensor& ids, const Tensor& real, std::vector<MoEAux>& moe_aux) const;
  // lm_head (tied or not) and final soft-cap on the final norm's output: [B, T, C] -> [B, T, V].
  Variable head(const Variable& h) const;
  // Under tensor parallelism: each parameter of `module` (named prefix + its name) replaced by
  // its tensor rank's shard, right after the module is drawn whole, so that the whole model
  // never exists at once; and the blocks told once all are sharded (the constructor's).
  void shard_now(Module& module, const std::string& prefix);
  void shard_for_tensor_parallel();
  // Unregisters what stage_ does not hold from `model` and `layers` (the constructor's).
  void keep_stage(Module& model, ModuleList& layers);
  // Token embedding and positions of ids [B, T] -> [B, T, C], after checking ids and real.
  Variable embed(const Tensor& ids, const Tensor& real) const;
  // The blocks this model holds, in order, on x [B, T, C]; their MoE losses appended to moe_aux.
  Variable run_blocks(Variable x, const Tensor& real, std::vector<MoEAux>& moe_aux) const;
  // logits [B, T, V] as [B T, V], after checking targets [B, T].
  Variable flat_logits(const ModelOutput& out, const Tensor& targets) const;
  // terms (the cross-entropy's) plus moe_scale x (aux_loss_coef mean(aux) + router_z_loss_coef
  // mean(router_z)); on a pipeline stage its share of the means (stage_loss).
  LossTerms with_moe_losses(const ModelOutput& out, LossTerms terms, double moe_scale) const;
};

}  // namespace ember::nn
