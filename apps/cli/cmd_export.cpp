// `ember export --checkpoint C --format hf --out DIR`: the checkpoint as a
// Hugging Face model folder (model.safetensors, config.json, tokenizer.json,
// generation_config.json) loadable by transformers' matching class. The work is
// export_hf (apps/interop/hf_export.cpp); this file is the command line.
#include <cstdio>

#include "apps/cli/commands.h"
#include "apps/interop/hf_files.h"

namespace ember::apps {

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
