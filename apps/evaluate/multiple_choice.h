// Multiple-choice scoring in the manner of lm-evaluation-harness (docs/cli.md#evaluating):
// each choice's score is the sum of log-probabilities of its continuation tokens
// after the context (loglikelihood.h); acc = share of items whose best-scored choice
// (the first on ties) is gold; acc_norm the same with score / the choice's length in
// Unicode code points; standard error of a share p over n items: sqrt(p (1 - p) / (n - 1)).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "apps/evaluate/loglikelihood.h"
#include "apps/evaluate/task_file.h"
#include "data/tokenizer/tokenizer.h"
#include "nn/transformer.h"

namespace ember::apps {

struct ChoiceMetrics {
  int64_t n = 0;                                                      // items scored
  double acc = 0, acc_stderr = 0, acc_norm = 0, acc_norm_stderr = 0;  // stderr NaN when n < 2
};

// Code points of UTF-8 text (bytes that are not continuation bytes 10xxxxxx).
int64_t utf8_length(const std::string& text);
// Index of the first largest value.
int64_t first_argmax(const std::vector<double>& values);
// lm-evaluation-harness's standard error of the mean of n 0/1 values whose mean is p.
double share_stderr(double p, int64_t n);

// The sequence to score for each choice of `item` (split_pair + scored_pair).
std::vector<ScoredSequence> choice_sequences(const data::Tokenizer& tokenizer,
                                             const ChoiceItem& item, int64_t max_len);

// Called after each group of items: items done, total, acc so far.
using ChoiceProgress = std::function<void(int64_t done, int64_t total, double acc)>;

// Scores every item (batch_size sequences per forward) and returns the metrics;
// `source` (the task file) names an item's line in errors.
ChoiceMetrics evaluate_choices(nn::Transformer& model, const data::Tokenizer& tokenizer,
                               const std::vector<ChoiceItem>& items, int64_t batch_size,
                               const std::string& source, const ChoiceProgress& progress = {},
                               const inference::InferenceModel* inference = nullptr);

}  // namespace ember::apps
