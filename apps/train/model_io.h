// Shared pieces of the commands: the default tokenizer and corpus, building a
// model from a checkpoint (every tensor checked against its config) with the
// tokenizer its ids are in, and a plain sampler for the end-of-training sample.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/checkpoint.h"

#include "data/tokenizer/tokenizer.h"
#include "nn/transformer.h"

namespace ember::apps {

// The byte tokenizer: plain (vocab 256) when the model has 256 tokens,
// else bytes + <|endoftext|> (id 256).
data::Tokenizer default_tokenizer(const nn::ModelConfig& cfg);
// Debian's fortunes (package `fortunes`): /usr/share/games/fortunes.
std::string default_corpus();
// The tokenizer a checkpoint's token ids are in: the one it stores; else the byte
// tokenizer when its vocabulary is the bytes (256, or 257 with <|endoftext|>); else
// none (a model of token shards whose tokenizer was not stored).
// A stored tokenizer that does not parse is an Error naming `path` (the checkpoint file).
std::optional<data::Tokenizer> checkpoint_tokenizer(const nn::Checkpoint& c, const std::string& path = "");

// The tensors of c.model against the model c.config describes: exactly its
// parameter names, each of its shape, float and finite. An Error names the file
// (path), the tensor, and the expected and found shape.
void nn::check_model_tensors(const nn::Checkpoint& c, const std::string& path);
// The model of a checkpoint (after check_model_tensors), float32, eval mode.
std::unique_ptr<nn::Transformer> nn::model_from_checkpoint(const nn::Checkpoint& c, const std::string& path);

struct LoadedModel {
  std::unique_ptr<nn::Transformer> model;
  // checkpoint_tokenizer(), else the byte tokenizer as a stand-in (has_tokenizer false).
  data::Tokenizer tokenizer;
  bool has_tokenizer = true;
};
// Model weights (float32) and tokenizer of a checkpoint; eval mode.
LoadedModel load_model(const std::string& checkpoint_path);

// Samples n tokens after the prompt (temperature 1, top-k 40) by running the
// full forward over the last max_seq_len tokens, and prints prompt + text.
void print_sample(const nn::Transformer& model, const data::Tokenizer& tokenizer, const std::string& prompt,
                  int64_t n, uint64_t seed);

}  // namespace ember::apps
