// Perplexity and bits per byte of a text under a model (`ember evaluate --text`).
// The text's tokens follow document_prefix() (<|endoftext|>) and every token is
// scored once, in windows of at most seq_len input tokens that advance by stride:
// window k scores the tokens after the previous window's, each with the longest
// context the window gives (at least seq_len - stride tokens past the first window;
// stride == seq_len: windows whose inputs do not overlap, as lm-evaluation-harness's
// rolling windows). nats = -sum of log-probabilities;
//   perplexity = exp(nats / tokens), bits per byte = nats / ln 2 / UTF-8 bytes of the text.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "apps/evaluate/loglikelihood.h"
#include "data/tokenizer/tokenizer.h"
#include "nn/transformer.h"

namespace ember::apps {

struct TextMetrics {
  int64_t tokens = 0, bytes = 0, windows = 0;
  double nats = 0, nats_per_token = 0, perplexity = 0, bits_per_byte = 0;
};

// The windows over `ids` whose first `prefix` tokens are context only.
std::vector<ScoredSequence> rolling_windows(const std::vector<int64_t>& ids, int64_t prefix,
                                            int64_t seq_len, int64_t stride);

// Called after each batch of windows: windows done, total.
using TextProgress = std::function<void(int64_t done, int64_t total)>;

// seq_len 0: the model's max_seq_len; stride 0: seq_len.
// inference: score on that InferenceModel's forward (score_sequences), else on model's.
TextMetrics evaluate_text(nn::Transformer& model, const data::Tokenizer& tokenizer,
                          const std::string& text, int64_t seq_len, int64_t stride,
                          int64_t batch_size, const TextProgress& progress = {},
                          const inference::InferenceModel* inference = nullptr);

}  // namespace ember::apps
