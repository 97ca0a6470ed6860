// Next-token sampling from a row of logits [V]: repetition penalty (CTRL),
// greedy (temperature 0) or temperature, then top-k, then top-p (nucleus)
// over what top-k kept, then one draw by inverse CDF. Draw i of a sampler
// uses Philox counter (seed, i): a seed reproduces the same tokens.
#pragma once
#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"

namespace ember::inference {

struct SamplingOptions {
  int64_t max_tokens = 256;  // tokens to generate at most
  double temperature = 1.0;  // logits / T; 0: greedy (argmax, ties: lower id)
  int64_t top_k = 0;         // keep the k most probable tokens; 0: off
  double top_p = 1.0;        // keep the smallest most-probable set with mass >= top_p; 1: off
  double repetition_penalty = 1.0;  // seen tokens: logit > 0 ? logit / r : logit * r; 1: off
  uint64_t seed = 0;
  int64_t stop_token = -1;  // generation ends when it is drawn (e.g. <|endoftext|>); -1: none
  // Only ids below it are drawn (0: every id of the logits): a tokenizer smaller than the
  // model's vocabulary (a preset's 50257 rows over a 257-token byte tokenizer) never sees
  // ids it cannot decode, whose rows no training target reached. vLLM cuts the logits of a
  // padded vocabulary to the tokenizer's the same way.
  int64_t vocab_limit = 0;
};

// Throws an Error naming the first bad option (e.g. temperature < 0, top_p outside (0, 1]).
void check_sampling_options(const SamplingOptions& opt);

// The distribution a draw uses after every filter: the kept tokens, in id
// order, and their renormalised probabilities. Where tokens tie at a top-k or
// top-p cut, the lower ids are kept.
struct Candidates {
  std::vector<int64_t> tokens;
  std::vector<double> probs;
};

class TokenSampler {
 public:
  explicit TokenSampler(const SamplingOptions& opt);
  // The filtered distribution of logits (float32 or float64, V elements in any
  // [1, ..., V] shape); history holds the tokens the repetition penalty applies to.
  Candidates candidates(const Tensor& logits, const std::vector<int64_t>& history = {}) const;
  // One draw from candidates(logits, history); advances the generator by one counter.
  int64_t sample(const Tensor& logits, const std::vector<int64_t>& history = {});
  const SamplingOptions& options() const { return opt_; }
  // The draw counter (seed, offset): its state is all a resume would need.
  const Generator& generator() const { return gen_; }

 private:
  // Leaves the kept ids in order_[0, n) (id order) with weights w_[id]; returns n.
  int64_t filter(const Tensor& logits, const std::vector<int64_t>& history) const;

  SamplingOptions opt_;
  Generator gen_;
  mutable std::vector<double> z_, w_;   // scratch: penalised logits, exp((z - max) / T)
  mutable std::vector<double> tmp_;     // scratch: logits partially ordered by top-k
  mutable std::vector<int64_t> order_;  // scratch: ids, partially ordered by logit
  mutable std::vector<unsigned char> seen_;
};

}  // namespace ember::inference
