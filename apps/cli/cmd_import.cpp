// `ember import --from DIR --out C`: a Hugging Face model folder (config.json,
// model.safetensors or its shards, tokenizer.json) as an ember checkpoint
// holding the root attrs, /model and /tokenizer (valid for train --init-from).
// The work is import_hf (apps/interop/hf_import.cpp); this file is the command line.
#include <cstdio>

#include "apps/cli/commands.h"
#include "apps/interop/hf_files.h"

namespace ember::apps {

CommandRunner add_import_command(CLI::App& app) {
  struct Options {
    std::string from, out;
    HfImportOptions hf;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("import",
                                     "Make a checkpoint from a Hugging Face model folder "
                                     "(Llama, Qwen3, Qwen3-MoE, GPT-2)");
  sub->add_option("--from", o->from,
                  "folder with config.json, model.safetensors (or shards), tokenizer.json")
      ->required();
  sub->add_option("--out", o->out, "checkpoint to write (.h5)")->required();
  auto* t = sub->add_option("--tokenizer", o->hf.tokenizer,
                            "tokenizer.json to store instead of the folder's");
  sub->add_flag("--no-tokenizer", o->hf.no_tokenizer, "store no tokenizer")->excludes(t);
  return [o]() {
    import_hf(o->from, o->out, o->hf);
    std::printf("wrote %s\n", o->out.c_str());
    return 0;
  };
}

}  // namespace ember::apps
