// `ember export --checkpoint C --format hf --out DIR`: the checkpoint as a
// Hugging Face model folder (model.safetensors, config.json, tokenizer.json,
// generation_config.json) loadable by transformers' matching class.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "nn/checkpoint.h"
#include "apps/cli/commands.h"
#include "apps/interop/hf_format.h"
#include "apps/train/model_io.h"
#include "core/io/safetensors.h"
#include "core/io/atomic_file.h"

namespace ember::apps {

HfExport export_hf(const std::string& checkpoint, const std::string& out_dir) {
  nn::Checkpoint c = nn::read_checkpoint(checkpoint, /*with_optim=*/false);
  HfExport done;
  done.arch = hf_arch_for(c.config);  // fails before anything is written
  // Every tensor checked against the config (names, shapes, finite values) before anything is written.
  const std::map<std::string, Tensor> weights = nn::model_from_checkpoint(c, checkpoint)->state_dict();
  c.model.clear();
  // The tokenizer of the checkpoint's ids (none for a model of token shards stored without one).
  const std::optional<data::Tokenizer> tokenizer = checkpoint_tokenizer(c, checkpoint);
  EMBER_CHECK(!tokenizer || static_cast<int64_t>(tokenizer->vocab_size()) <= c.config.vocab_size,
              checkpoint, ": the tokenizer has more tokens than the model's vocab_size");
  const std::optional<uint32_t> eos =
      tokenizer ? tokenizer->find_special(data::kEndOfText) : std::nullopt;
  const std::optional<int64_t> eos_id = eos ? std::optional<int64_t>(*eos) : std::nullopt;

  const std::map<std::string, Tensor> tensors = hf_tensors_from_ember(c.config, done.arch, weights);
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  EMBER_CHECK(std::filesystem::is_directory(out_dir), "--out ", out_dir,
              ": cannot create the folder");
  const std::filesystem::path dir(out_dir);
  write_safetensors((dir / "model.safetensors").string(), tensors);
  write_file_atomically((dir / "config.json").string(),
                        hf_config_json(c.config, done.arch, eos_id) + "\n");
  if (tokenizer) {
    write_file_atomically((dir / "tokenizer.json").string(), tokenizer->to_json());
    done.tokenizer = true;
  }
  if (eos_id) {
    const nlohmann::json g = {{"bos_token_id", *eos_id}, {"eos_token_id", *eos_id}};
    write_file_atomically((dir / "generation_config.json").string(), g.dump(2) + "\n");
  }
  return done;
}

CommandRunner add_export_command(CLI::App& app) {
  struct Options {
    std::string checkpoint, format = "hf", out;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "export", "Write a checkpoint in another format (hf: a Hugging Face model folder)");
  sub->add_option("--checkpoint", o->checkpoint, "checkpoint (.h5)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--format", o->format, "output format")
      ->check(CLI::IsMember({"hf"}))
      ->capture_default_str();
  sub->add_option("--out", o->out, "output folder")->required();
  return [o]() {
    const HfExport done = export_hf(o->checkpoint, o->out);
    std::printf("wrote %s (%s): model.safetensors, config.json%s\n", o->out.c_str(),
                hf_arch_name(done.arch),
                done.tokenizer ? ", tokenizer.json" : " (no tokenizer: the checkpoint has none)");
    return 0;
  };
}

}  // namespace ember::apps
