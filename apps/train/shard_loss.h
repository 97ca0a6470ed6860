// The loss of a model on token shards, used by `ember train`'s validation and by
// `ember loss` (old spelling `ember eval`): the mean loss over N sequential batches and
// bits per byte (docs/cli.md, "Evaluation"):
//   bits per byte = sum over target tokens of CE in nats / (ln 2 x UTF-8 bytes of their text)
// where a special token (<|endoftext|>) stands for no text (0 bytes; its CE counts).
// And `ember finetune`'s on held-out conversations: the same over their trained tokens only.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "data/batch_loader.h"
#include "data/chat_loader.h"
#include "data/tokenizer/tokenizer.h"
#include "nn/transformer.h"

namespace ember::apps {

struct ShardLoss {
  int64_t batches = 0;
  int64_t tokens = 0;  // target tokens scored: batches x B x T
  int64_t bytes = 0;   // UTF-8 bytes of their text (= tokens when counted per token)
  double loss = 0;     // mean cross-entropy, nats per target token
  double total = 0, z = 0, aux = 0, router_z = 0;  // the loss terms, mean over batches
  double bits_per_byte = 0;  // bits per token when !per_byte
  bool per_byte = false;     // false: no tokenizer, every token counted as one "byte"
  // ember align and reward: the held-out pairs' reward accuracy (the share with the chosen
  // side's reward above the rejected's); bits_per_byte is then not measured.
  std::optional<double> accuracy;
  // ember rl: the held-out prompts' greedy completions, their mean reward (loss is not measured)
  // and the share that is the answer exactly.
  std::optional<double> reward, exact;
};

// Bytes of the text each token id stands for: its decoded UTF-8 length; 0 for
// special tokens and for ids the tokenizer lacks.
std::vector<int64_t> token_byte_lengths(const data::Tokenizer& tokenizer, int64_t vocab_size);

// What shard_loss sums over its batches (a pipeline stage sums its share of the terms, the
// stages' sums add up to the whole model's); mean() turns them into its figures.
struct ShardLossSums {
  int64_t batches = 0, tokens = 0, bytes = 0;
  double ce = 0, total = 0, z = 0, aux = 0, router_z = 0;
  // One batch's terms (total: l.total's value, 0 when undefined) and, with count_targets, its
  // targets: their count and, with token_bytes, their bytes.
  void add(const nn::LossTerms& l);
  void count_targets(const Tensor& targets, const std::vector<int64_t>& token_bytes);
  ShardLoss mean(bool per_byte) const;
};

// Batches 0..batches-1 of `loader` (built sequential, grad_accum 1) through the model
// in eval mode (dropout off; the mode is restored after). token_bytes from
// token_byte_lengths, or empty for bits per token. With `with_grads` each batch's
// total loss / batches is back-propagated into the parameters' gradients.
ShardLoss shard_loss(nn::Transformer& model, const data::BatchLoader& loader, int64_t batches,
                     const std::vector<int64_t>& token_bytes, bool with_grads = false);

// Every conversation of `rows` once, in order, in batches of `rows_per_batch`, in eval mode
// and no graph: loss = sum of CE over trained tokens / their count (docs/model.md#loss-of-a-step;
// tokens counts those), bits per byte over the same tokens. An Error when no row has a
// trained token.
ShardLoss chat_shard_loss(nn::Transformer& model, std::shared_ptr<const data::ChatRows> rows,
                          int64_t rows_per_batch, const std::vector<int64_t>& token_bytes);
// The same with each batch's loss terms from `loss` (inputs and targets [B, T], the trained
// weight [B, T] -> the terms of Transformer::loss with that weight, norm 1 and no MoE terms),
// called in no-graph mode: a pipeline stage's share (nothing but on the last stage).
using ChatBatchLoss =
    std::function<nn::LossTerms(const Tensor& inputs, const Tensor& targets, const Tensor& weight)>;
ShardLoss chat_shard_loss(std::shared_ptr<const data::ChatRows> rows, int64_t rows_per_batch,
                          const std::vector<int64_t>& token_bytes, const ChatBatchLoss& loss);

}  // namespace ember::apps
