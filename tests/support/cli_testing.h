// Fixtures shared by the tests of the `ember` program (tests/cli/test_cli*.cpp): a tiny model
// config and checkpoints written here (zero weights; a chat model that always draws one
// token), a fortune-like corpus, a short `ember train`'s arguments, a run's `latest`, and
// the check that an error message is one plain "ember: error:" line.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "data/tokenizer/tokenizer.h"
#include "nn/checkpoint_file.h"
#include "nn/transformer.h"
#include "temp_dir.h"
#include "tiny_train.h"

namespace ember::testing {

// A tiny model config (d_model 16, one layer, context 32) of `vocab` tokens.
inline std::string tiny_config(int vocab) {
  std::string s = R"({"vocab_size": VOCAB, "d_model": 16, "n_layers": 1, "n_heads": 2,
  "ffn_hidden": 32, "max_seq_len": 32})";
  s.replace(s.find("VOCAB"), 5, std::to_string(vocab));
  return s;
}

// A corpus of fortune-like documents separated by "%" lines.
inline void write_corpus(const TempDir& dir, const std::string& name) {
  std::ofstream f(dir.path / name);
  for (int i = 0; i < 120; ++i) {
    f << "fortune " << i << ": the quick brown fox jumps over the lazy dog, " << (i * 7) % 13 << " times.\n";
    if (i % 4 == 3) f << "%\n";
  }
}

// No raw library text in a message.
inline void check_plain_message(const std::string& err) {
  CHECK(err.starts_with("ember: error: "));
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  for (const char* raw : {"std::", "bad_alloc", "basic_string", "[json.exception", "filesystem error"})
    CHECK(err.find(raw) == std::string::npos);
}

// A checkpoint of the tiny model (vocab 257, every weight zero: logits 0, CE = ln 257 per token).
inline nn::Checkpoint zero_checkpoint(const std::string& config_json) {
  nn::Checkpoint c;
  c.config = nn::ModelConfig::from_json(config_json, "test config");
  for (const auto& [name, t] : nn::Transformer(c.config, 0).state_dict()) c.model[name] = Tensor::zeros(t.shape());
  return c;
}

// A chat model whose hidden state is constant (every embedding row is ones, every block weight
// zero, the final norm's weight ones), so its logits are lm_head.weight · ones: `vocab` rows over
// the 259-token byte tokenizer (its specials chat tokens or not); row `favoured` of lm_head is
// ones (logit 16), the others zero, so `favoured` is the greedy token at every step.
inline nn::Checkpoint chat_checkpoint(int64_t favoured, bool chat_tokens, int64_t vocab = 259) {
  nn::Checkpoint c = zero_checkpoint(R"({"vocab_size": )" + std::to_string(vocab) +
                                     R"(, "d_model": 16, "n_layers": 1, "n_heads": 2,
          "ffn_hidden": 32, "max_seq_len": 64, "tie_embeddings": false})");
  c.model["model.embed_tokens.weight"] = Tensor::ones(c.model.at("model.embed_tokens.weight").shape());
  c.model["model.norm.weight"] = Tensor::ones(c.model.at("model.norm.weight").shape());
  float* head = c.model.at("lm_head.weight").data<float>();
  for (int64_t j = 0; j < 16; ++j) head[favoured * 16 + j] = 1.0f;
  const std::vector<std::string> specials = chat_tokens
                                                ? std::vector<std::string>{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
                                                : std::vector<std::string>{"<|endoftext|>", "<|pad|>", "<|x|>"};
  c.tokenizer_json = data::Tokenizer::bytes(specials).to_json();
  return c;
}

// A tiny model and corpus in dir; the arguments of a short `ember train` writing to dir/OUT.
inline std::string tiny_train(const TempDir& dir, const std::string& out = "run") {
  return tiny_train_args(dir, out) + " --lr 0.01 --log-every 1000";
}

// The checkpoint file a run folder's `latest` names.
inline std::string latest_name(const std::string& run) {
  std::ifstream f(std::filesystem::path(run) / "latest");
  std::string name;
  f >> name;
  return name;
}

}  // namespace ember::testing
