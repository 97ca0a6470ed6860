// Shared pieces of the commands: the default tokenizer and corpus, building a
// model from a checkpoint, byte lengths of tokens (for bits per byte), and a
// plain sampler for the end-of-training sample.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "nn/transformer.h"

namespace ember::apps {

// The byte tokenizer: plain (vocab 256) when the model has 256 tokens,
// else bytes + <|endoftext|> (id 256).
Tokenizer default_tokenizer(const nn::ModelConfig& cfg);
// Debian's fortunes (package `fortunes`): /usr/share/games/fortunes.
std::string default_corpus();
// Bytes each token id decodes to (0 for ids the tokenizer lacks).
std::vector<int64_t> token_byte_lengths(const Tokenizer& tokenizer, int64_t vocab_size);

struct LoadedModel {
  std::unique_ptr<nn::Transformer> model;
  Tokenizer tokenizer;
};
// Model weights (float32) and tokenizer of a checkpoint; eval mode.
LoadedModel load_model(const std::string& checkpoint_path);

// Samples n tokens after the prompt (temperature 1, top-k 40) by running the
// full forward over the last max_seq_len tokens, and prints prompt + text.
void print_sample(const nn::Transformer& model, const Tokenizer& tokenizer, const std::string& prompt,
                  int64_t n, uint64_t seed);

}  // namespace ember::apps
