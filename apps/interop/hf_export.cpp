// export_hf: an ember checkpoint as a Hugging Face model folder (model.safetensors,
// config.json, tokenizer.json, generation_config.json) loadable by transformers'
// matching class; a fine-tune checkpoint as its merged model. Everything is checked
// before the first file is written.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/interop/hf_files.h"
#include "apps/interop/new_output.h"
#include "core/io/atomic_file.h"
#include "core/io/safetensors.h"
#include "data/tokenizer/stored_tokenizer.h"
#include "nn/adapters/adapters.h"
#include "nn/checkpoint_file.h"

namespace ember::apps {
namespace {

// The id of special token `name` in the checkpoint's tokenizer, if it has one.
std::optional<int64_t> special_id_of(const std::optional<data::Tokenizer>& tokenizer,
                                     std::string_view name) {
  const std::optional<uint32_t> id = tokenizer ? tokenizer->find_special(name) : std::nullopt;
  return id ? std::optional<int64_t>(*id) : std::nullopt;
}

// config.json, and the tensors under their Hugging Face names: a reward model's without lm_head
// (its head is score.weight). pad_token_id <|im_start|>: never the last token of a side (a chat
// side ends with the "\n" after <|im_end|>, a text side with <|endoftext|>), so transformers'
// last-non-pad-token rule reads the score where ember does (docs/interop.md#reward-models).
std::string config_and_tensors(const nn::ModelConfig& config, HfArch arch, bool reward,
                               const std::optional<data::Tokenizer>& tokenizer,
                               std::map<std::string, Tensor>& weights) {
  const std::optional<int64_t> eos_id = special_id_of(tokenizer, data::kEndOfText);
  if (!reward) {
    weights = hf_tensors_from_ember(config, arch, weights);
    return hf_config_json(config, arch, eos_id);
  }
  weights.erase("lm_head.weight");  // the RoPE classes' tensors are ember's names already
  return hf_reward_config_json(config, arch, eos_id, special_id_of(tokenizer, data::kImStart));
}

}  // namespace

HfExport export_hf(const std::string& checkpoint, const std::string& out_dir,
                   const std::string& moved_base) {
  require_new_output("export", "--out", out_dir, OutputKind::Folder);
  nn::Checkpoint c = nn::read_checkpoint(checkpoint, /*with_optim=*/false);
  // A fine-tune checkpoint exports as its merged model (the base with every adapter folded in).
  const bool finetuned = c.config.lora.has_value();
  const nn::ModelConfig config = finetuned ? nn::merged_config(c.config) : c.config;
  HfExport done;
  done.reward = !config.reward.empty();
  // The class: fails before anything is written.
  done.arch = done.reward ? hf_reward_arch_for(config) : hf_arch_for(config);
  // Every tensor checked against the config (names, shapes, finite values) before anything is written.
  std::map<std::string, Tensor> weights;
  {
    const std::unique_ptr<nn::Transformer> model = nn::model_from_checkpoint(c, checkpoint, moved_base);
    weights = finetuned ? nn::merged_state_dict(*model) : model->state_dict();
  }
  c.model.clear();
  c.config = config;
  // The tokenizer of the checkpoint's ids (none for a model of token shards stored without one).
  const std::optional<data::Tokenizer> tokenizer = data::stored_tokenizer(c.tokenizer_json, c.config.vocab_size, checkpoint);
  EMBER_CHECK(!tokenizer || static_cast<int64_t>(tokenizer->vocab_size()) <= c.config.vocab_size,
              checkpoint, ": the tokenizer has more tokens than the model's vocab_size");
  const std::optional<int64_t> eos_id = special_id_of(tokenizer, data::kEndOfText);
  const std::string config_json = config_and_tensors(c.config, done.arch, done.reward, tokenizer, weights);

  create_output_folder("--out", out_dir);
  const std::filesystem::path dir(out_dir);
  write_safetensors((dir / "model.safetensors").string(), weights);
  write_file_atomically((dir / "config.json").string(), config_json + "\n");
  if (tokenizer) {
    write_file_atomically((dir / "tokenizer.json").string(), tokenizer->to_json());
    done.tokenizer = true;
  }
  if (eos_id && !done.reward) {  // a reward model does not generate
    const nlohmann::json g = {{"bos_token_id", *eos_id}, {"eos_token_id", *eos_id}};
    write_file_atomically((dir / "generation_config.json").string(), g.dump(2) + "\n");
  }
  return done;
}

}  // namespace ember::apps
