// `ember export --checkpoint C --format hf --out DIR`: the checkpoint as a
// Hugging Face model folder (model.safetensors, config.json, tokenizer.json,
// generation_config.json) loadable by transformers' matching class. A fine-tune
// checkpoint exports as a PEFT adapter folder, or with --merge as the merged model
// (--format hf: a model folder; --format ember: a plain checkpoint file); a reward model as
// the *ForSequenceClassification of its class, merged when it is a fine-tune. --format gguf
// writes one GGUF file llama.cpp runs (a fine-tune merged), its weights float32, bf16 or
// int8 (Q8_0). The work is in apps/interop (hf_export.cpp, peft_export.cpp,
// gguf_export.cpp); this file is the command line.
#include <cstdio>

#include "apps/cli/commands.h"
#include "apps/cli/moved_base_option.h"
#include "apps/interop/gguf_export.h"
#include "apps/interop/hf_files.h"
#include "nn/checkpoint_file.h"

namespace ember::apps {

namespace {

struct ExportOptions {
  std::string checkpoint, format = "hf", out, base, weights = "float32";
  bool merge = false;
};

int run_gguf_export(const ExportOptions& o) {
  const GgufExport done = export_gguf(o.checkpoint, o.out, o.weights, o.base);
  std::printf("wrote %s (GGUF v3, %s, %s weights): %lld tensors, %.1f MB\n", o.out.c_str(), done.arch.c_str(),
              o.weights.c_str(), static_cast<long long>(done.tensors), done.file_bytes / 1e6);
  return 0;
}

int run_export(const ExportOptions& o) {
  EMBER_CHECK(o.weights == "float32" || o.format == "gguf", "--weights is for --format gguf (hf and ember "
              "exports keep the checkpoint's float32 weights)");
  if (o.format == "gguf") return run_gguf_export(o);
  const nn::ModelConfig config = nn::read_checkpoint_config(o.checkpoint);
  const bool finetuned = config.lora.has_value();
  // A reward model exports merged: a *ForSequenceClassification (docs/interop.md#reward-models).
  const bool reward = !config.reward.empty();
  EMBER_CHECK(!o.merge || finetuned, "--merge: ", o.checkpoint,
              " is not a fine-tune checkpoint (it has no adapters to merge)");
  EMBER_CHECK(o.format == "hf" || o.merge, "--format ember needs --merge (the merged model of a "
              "fine-tune checkpoint; a plain checkpoint is already in ember's format)");
  if (o.format == "ember") {
    export_merged_checkpoint(o.checkpoint, o.out, o.base);
    std::printf("wrote %s: the merged model (base + adapters)\n", o.out.c_str());
  } else if (finetuned && !o.merge && !reward) {
    export_peft(o.checkpoint, o.out, o.base);
    std::printf("wrote %s: PEFT adapter (adapter_config.json, adapter_model.safetensors)\n", o.out.c_str());
  } else {
    const HfExport done = export_hf(o.checkpoint, o.out, o.base);
    const char* arch = done.reward ? hf_reward_arch_name(done.arch) : hf_arch_name(done.arch);
    std::printf("wrote %s (%s%s): model.safetensors, config.json%s\n", o.out.c_str(), arch,
                finetuned ? ", merged" : "",
                done.tokenizer ? ", tokenizer.json" : " (no tokenizer: the checkpoint has none)");
  }
  return 0;
}

}  // namespace

CommandRunner add_export_command(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* sub = app.add_subcommand(
      "export", "Write a checkpoint in another format (hf: a Hugging Face model folder, or the PEFT "
                "adapter of a fine-tune checkpoint; gguf: one file llama.cpp runs)");
  sub->add_option("--checkpoint", o->checkpoint, "checkpoint (.h5)")
      ->required()
      ->check(CLI::ExistingFile);
  add_moved_base_option(*sub, o->base);
  sub->add_option("--format", o->format, "output format (ember: with --merge only; gguf: merged always)")
      ->check(CLI::IsMember({"hf", "ember", "gguf"}))
      ->capture_default_str();
  sub->add_option("--weights", o->weights, "--format gguf: weight type (int8: GGUF's Q8_0)")
      ->check(CLI::IsMember({"float32", "bf16", "int8"}))
      ->capture_default_str();
  sub->add_flag("--merge", o->merge,
                "fine-tune checkpoint: write the merged full model instead of the adapter");
  sub->add_option("--out", o->out, "output folder (--format ember, gguf: output file)")->required();
  return [o]() { return run_export(*o); };
}

}  // namespace ember::apps
