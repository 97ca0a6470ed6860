// Shared pieces of the commands: the default corpus, a checkpoint's model
// (nn::model_from_checkpoint) together with the tokenizer its ids are in
// (data::stored_tokenizer).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer/tokenizer.h"
#include "nn/checkpoint_file.h"
#include "nn/transformer.h"

namespace ember::apps {

// Debian's fortunes (package `fortunes`): /usr/share/games/fortunes.
std::string default_corpus();
struct LoadedModel {
  std::unique_ptr<nn::Transformer> model;
  // data::stored_tokenizer(), else the byte tokenizer as a stand-in (has_tokenizer false).
  data::Tokenizer tokenizer;
  bool has_tokenizer = true;
};
// Model weights (float32) and tokenizer of a checkpoint; eval mode. moved_base: a fine-tune
// checkpoint's base read from there instead (the command's --base; nn::model_from_checkpoint).
// A reward model (config "reward", docs/model.md#reward-model) is refused: the commands that
// generate or compute a language-model loss (generate, chat, loss, evaluate, serve) load here.
LoadedModel load_model(const std::string& checkpoint_path, const std::string& moved_base = "");
// load_model for `ember reward --score`: the checkpoint must be a reward model (LoRA or full).
LoadedModel load_reward_model(const std::string& checkpoint_path, const std::string& moved_base = "");
// load_model for the commands that read and write text (generate, evaluate, serve): with
// tokenizer_path, that tokenizer.json replaces the stored one (at most vocab_size tokens);
// an Error when the model then has no real tokenizer (a stored vocabulary that is not bytes).
LoadedModel load_model_for_text(const std::string& checkpoint_path, const std::string& tokenizer_path,
                                const std::string& moved_base = "");

}  // namespace ember::apps
