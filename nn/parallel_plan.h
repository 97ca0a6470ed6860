// How a model splits over T tensor ranks and P pipeline stages (docs/scaling.md, "Choosing
// T, P and D"): the config checks of --tp, each parameter's split rule and per-rank shape,
// the blocks of each stage and the parameters each stage holds. Pure functions of the
// config: nothing is built or communicated.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/config.h"

namespace ember::nn {

// How a parameter is divided over the T tensor ranks.
enum class TensorSplit {
  Rows,       // by output rows (dim 0): q, k, v, gate, up (weight and bias), of every expert too
  Columns,    // by input columns (dim 1): o, down (their bias stays whole, added once)
  VocabRows,  // by vocabulary rows, padded to a multiple of T: embed_tokens, lm_head
  Whole,      // on every tensor rank: norms, learned positions, the router, the score head
};

const char* split_name(TensorSplit split);  // "rows", "columns", "vocab rows", "whole"

// Throws ember::Error naming the first config key T does not divide, in the order n_heads,
// n_kv_heads (n_kv_heads < T included), ffn_hidden (when a layer is dense), moe.expert_hidden
// (the width of every routed and shared expert): "--tp 4: n_kv_heads 2 is not divisible by 4".
// T < 1 is an error too. The vocabulary is never an error (padded_vocab).
void check_tensor_parallel(const ModelConfig& cfg, int64_t tp);

// vocab_size rounded up to a multiple of T; the padded rows' logits never count.
int64_t padded_vocab(int64_t vocab_size, int64_t tp);

// The split rule of a parameter by its name (docs/model.md#parameter-names), LoRA adapters'
// included (`<target>.lora_A.weight`: whole for q, k, v, gate, up and the head, by columns for
// o and down; `.lora_B.weight`: by rows, whole, by vocabulary rows); an Error for a name the
// Transformer does not have (rows added by --add-chat-tokens, say).
TensorSplit tensor_split(const std::string& name);

// One tensor rank's shape of a parameter of `shape` split by `split` over T ranks; an Error
// when T does not divide the split dimension (VocabRows: ceil(rows / T)).
std::vector<int64_t> rank_shape(TensorSplit split, const std::vector<int64_t>& shape, int64_t tp);

// The blocks of each of the P stages: with `counts` empty, n_layers / P each and one more for
// the first n_layers mod P; else `counts` (--pp-layers), checked: P counts, each >= 1, summing
// to n_layers. Errors name the option and what is wrong.
std::vector<int64_t> stage_layers(int64_t n_layers, int64_t pp, const std::vector<int64_t>& counts = {});

// --pp-layers' text: "3,3,2" -> {3, 3, 2}; anything but decimal counts separated by commas is
// an Error naming the option.
std::vector<int64_t> parse_layer_counts(const std::string& text);
// A layout of T tensor ranks and the blocks of each stage (P = stage_layers.size()).
struct ParallelLayout {
  int64_t tp = 1;
  std::vector<int64_t> stage_layers;
  int64_t pp() const { return static_cast<int64_t>(stage_layers.size()); }
  int64_t first_layer(int64_t stage) const;  // the stage's blocks: [first_layer, first_layer + count)
  int64_t stage_of_layer(int64_t layer) const;
};

// check_tensor_parallel, then stage_layers.
ParallelLayout make_parallel_layout(const ModelConfig& cfg, int64_t tp, int64_t pp,
                                    const std::vector<int64_t>& pp_layers = {});

// A parameter as a layout places it.
struct PlacedParameter {
  std::string name;
  std::vector<int64_t> shape, rank_shape;  // whole, and on one tensor rank
  int64_t numel = 0, rank_numel = 0;
  TensorSplit split = TensorSplit::Whole;
  std::vector<int64_t> stages;  // the stages holding it: its block's; the embeddings stage 0; the
                                // final norm, lm_head and score head the last; a tied table both ends
};
std::vector<PlacedParameter> place_parameters(const ModelConfig& cfg, const ParallelLayout& layout);

// What one stage holds: elements of the whole tensors and of one tensor rank's shards.
struct StageParameters {
  int64_t numel = 0, rank_numel = 0;
};
std::vector<StageParameters> stage_parameters(const ModelConfig& cfg, const ParallelLayout& layout);

// Micro-batches whose activations stage s keeps at once: min(P - s, M) with 1F1B, M with GPipe.
int64_t micro_batches_in_flight(int64_t stage, int64_t pp, int64_t micro_batches, bool gpipe);

// The idle share of a pipeline step: (P - 1) / (M + P - 1).
double bubble_fraction(int64_t pp, int64_t micro_batches);

}  // namespace ember::nn
