// Fine-tuning a Transformer (docs/model.md#fine-tuning): LoRA adapters on chosen
// projections, NF4 quantization of the frozen block weights (QLoRA), new
// vocabulary rows (--add-chat-tokens), the trainable tensors, and the merge of
// everything back into a plain model's state_dict and config.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nn/config.h"
#include "nn/transformer.h"

namespace ember::nn {

// The short target names of docs/model.md#lora, in this order.
inline const std::vector<std::string> kLoRATargets{"q",    "k",  "v",    "o",
                                                   "gate", "up", "down", "head"};

// "q,k,v" -> {"q","k","v"}; an Error `--lora-targets: unknown target "x" (expected q, k, v, o,
// gate, up, down, head)` for an unknown or empty name, and on a duplicate.
std::vector<std::string> parse_lora_targets(const std::string& list);

// Under tensor parallelism (model.tensor_parallel(): its projections hold shards) each adapter is
// drawn whole, as above, then cut to its tensor rank's shard (nn/parallel_plan.h's split of
// `<target>.lora_A.weight` / `.lora_B.weight`) and runs column- or row-parallel as its base
// (LoRAParallel); an NF4 base must have been quantized while it was read (load_model_weights);
// an MoE model is an Error.
// Freezes every parameter of model (requires_grad false; rows added by add_vocab_rows stay
// trainable), then, when quantize is "nf4"/"nf4-dq", replaces each frozen 2-D weight of the
// blocks (attention q/k/v/o, FFN and expert and shared-expert gate/up/down; not embeddings,
// norms, router, lm_head) by its NF4 form (no float32 copy kept), then wraps each target
// projection in a LoRALinear whose adapters are drawn from Generator(seed) (in the order of
// model.named_parameters()). After it, model.named_parameters() lists the frozen base tensors
// (float32 ones only; NF4 weights are not parameters) and the trainable
// `<target>.lora_A.weight` / `.lora_B.weight`. The head of tied embeddings gets an adapter of
// its own ("lm_head.lora_A.weight", ...) over the shared embedding matrix. Sets
// model.config().lora and .quantize. Adapter dropout draws from the model's dropout stream.
void add_adapters(Transformer& model, const LoRAConfig& lora, const std::string& quantize,
                  uint64_t seed);

// The projections of block `layer` (model.layers.<layer>: q/k/v/o, gate/up/down of its FFN or
// experts) replaced by their NF4 form as add_adapters makes it (nf4-dq when double_quant); their
// float32 weights are released once nothing else holds them. add_adapters then leaves them as
// they are, so quantizing block by block while loading gives the same model.
// Under tensor parallelism (the model's projections hold shards) each projection is the shard
// of its whole weight quantized as one rank quantizes it (Nf4Linear::quantize_shard): whole_of
// gives that whole float weight by parameter name.
using WholeWeight = std::function<Tensor(const std::string& name)>;
void quantize_block(Transformer& model, int64_t layer, bool double_quant,
                    const WholeWeight& whole_of = {});

// --add-chat-tokens: grows the vocabulary by n rows: model.embed_tokens (and lm_head when untied)
// get n new rows, trainable, drawn normal(0, 0.02) from Generator(seed); the old rows stay frozen
// and unchanged. Trainable tensors: "model.embed_tokens.added_rows" [n, C] and, untied,
// "lm_head.added_rows" [n, C]. Updates model.config().vocab_size. Call before add_adapters.
void add_vocab_rows(Transformer& model, int64_t n, uint64_t seed);

// The trainable tensors (name -> Variable), in named_parameters order: what a fine-tune
// checkpoint's /model holds and what the optimizer updates.
std::vector<std::pair<std::string, Variable>> trainable_parameters(const Module& model);

// Every adapter folded into its base (W' = W + (alpha/r) B A, NF4 bases dequantized, added rows
// appended): a state_dict for a plain Transformer of merged_config(model.config()), in the
// model's dtype.
std::map<std::string, Tensor> merged_state_dict(const Transformer& model);
// lora dropped, quantize "none"; a tied model with a "head" adapter becomes untied (its merged
// head differs from its embedding).
ModelConfig merged_config(const ModelConfig& finetune_config);

}  // namespace ember::nn
