// Log-likelihoods of token continuations under a Transformer, batched: the
// primitive under `ember evaluate`'s multiple-choice and text modes.
//   score(seq, k) = sum over the last k tokens s_i of seq of log softmax(logits_{i-1})[s_i]
// with the logits of one forward over seq[0 .. n-2] (eval mode, no graph), the
// log-softmax in double. Several sequences go through one forward, padded on the
// right (causal attention: the padding changes no earlier position).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer/tokenizer.h"
#include "inference/model_runner/paged_forward.h"
#include "nn/transformer.h"

namespace ember::apps {

struct ScoredSequence {
  std::vector<int64_t> tokens;  // 2 <= n <= max_seq_len + 1
  int64_t targets = 0;          // how many tokens at the end are scored, 0 .. n - 1 (0: score 0)
};

// The sum of log-probabilities of each sequence's targets, in order; batch_size
// sequences per forward. The model is put in eval mode for the call. With `inference` (the
// model's InferenceModel, `ember evaluate --weights`), the logits are those of the serving
// forward in its weight type instead (inference/model_runner/paged_forward.h), one sequence
// per forward (each row is batch-invariant there, so the batch changes nothing).
std::vector<double> score_sequences(nn::Transformer& model,
                                    const std::vector<ScoredSequence>& sequences,
                                    int64_t batch_size,
                                    const inference::InferenceModel* inference = nullptr);

// The tokens put before text that has no context: <|endoftext|> when the tokenizer has
// it (lm-evaluation-harness's prefix token), else the tokens of "\n".
std::vector<int64_t> document_prefix(const data::Tokenizer& tokenizer);

// lm-evaluation-harness's split of a (context, continuation) pair: trailing white
// space of the context moves to the front of the continuation; whole =
// encode(context + continuation), context tokens = encode(context), continuation
// tokens = whole[len(context tokens):]. An empty context (or one of white space
// only) gets document_prefix() as its tokens and the continuation encoded alone.
struct SplitPair {
  std::vector<int64_t> context, continuation;
};
SplitPair split_pair(const data::Tokenizer& tokenizer, const std::string& context,
                     const std::string& continuation);

// context + continuation as a ScoredSequence of at most max_len + 1 tokens: cut from
// the left when longer (as lm-evaluation-harness does); an Error when the
// continuation alone has more than max_len tokens.
ScoredSequence scored_pair(const SplitPair& pair, int64_t max_len);

}  // namespace ember::apps
