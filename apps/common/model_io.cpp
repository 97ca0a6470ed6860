// A checkpoint's model with its tokenizer, and the default corpus (see model_io.h).
#include "apps/common/model_io.h"

#include <filesystem>

#include "nn/checkpoint_file.h"
#include "data/tokenizer/stored_tokenizer.h"

namespace ember::apps {

std::string default_corpus() {
  const std::string dir = "/usr/share/games/fortunes";
  EMBER_CHECK(std::filesystem::is_directory(dir), "no --data given and the default corpus ", dir,
              " is missing: install Debian's fortunes package (apt-get install fortunes)");
  return dir;
}

namespace {

// The one check of a checkpoint's kind (a reward model or a language model), before its weights
// are read.
void check_reward_kind(const std::string& checkpoint_path, bool want_reward) {
  const bool reward = !nn::read_checkpoint_config(checkpoint_path).reward.empty();
  EMBER_CHECK(reward || !want_reward, checkpoint_path,
              ": not a reward model (its config has no \"reward\"; ember reward writes one): "
              "ember reward --score needs a reward checkpoint");
  EMBER_CHECK(!reward || want_reward, checkpoint_path,
              ": a reward model (it scores text; it does not generate): use ember reward --score");
}

LoadedModel load_checked(const std::string& checkpoint_path, const std::string& moved_base) {
  const nn::Checkpoint c = nn::read_checkpoint(checkpoint_path, /*with_optim=*/false);
  LoadedModel out;
  out.model = nn::model_from_checkpoint(c, checkpoint_path, moved_base);
  std::optional<data::Tokenizer> tokenizer = data::stored_tokenizer(c.tokenizer_json, c.config.vocab_size, checkpoint_path);
  out.has_tokenizer = tokenizer.has_value();
  out.tokenizer = tokenizer ? std::move(*tokenizer) : data::byte_tokenizer(c.config.vocab_size);
  return out;
}

}  // namespace

LoadedModel load_model(const std::string& checkpoint_path, const std::string& moved_base) {
  check_reward_kind(checkpoint_path, /*want_reward=*/false);
  return load_checked(checkpoint_path, moved_base);
}

LoadedModel load_reward_model(const std::string& checkpoint_path, const std::string& moved_base) {
  check_reward_kind(checkpoint_path, /*want_reward=*/true);
  return load_checked(checkpoint_path, moved_base);
}

LoadedModel load_model_for_text(const std::string& checkpoint_path, const std::string& tokenizer_path,
                                const std::string& moved_base) {
  LoadedModel lm = load_model(checkpoint_path, moved_base);
  if (!tokenizer_path.empty()) {
    lm.tokenizer = data::Tokenizer::load(tokenizer_path);
    lm.has_tokenizer = true;
    EMBER_CHECK(static_cast<int64_t>(lm.tokenizer.vocab_size()) <= lm.model->config().vocab_size,
                "--tokenizer ", tokenizer_path, ": ", lm.tokenizer.vocab_size(),
                " tokens, more than the model's vocab_size ", lm.model->config().vocab_size,
                " (not the tokenizer its training data was encoded with)");
  }
  EMBER_CHECK(lm.has_tokenizer, checkpoint_path, ": the checkpoint stores no tokenizer and its vocabulary (",
              lm.model->config().vocab_size,
              " tokens) is not bytes; give --tokenizer FILE (the tokenizer.json its training data was encoded "
              "with)");
  return lm;
}

}  // namespace ember::apps
