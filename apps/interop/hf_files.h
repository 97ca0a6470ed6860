// Hugging Face model folders <-> ember checkpoints, one call each, no CLI:
// export_hf writes a checkpoint as a folder transformers loads with the matching
// class; import_hf reads such a folder into a checkpoint. The config and weight
// translations they use are in apps/interop/hf_format.h.
#pragma once
#include <string>

#include "apps/interop/hf_format.h"

namespace ember::apps {

// --- export (apps/interop/hf_export.cpp) ------------------------------------------------
struct HfExport {
  HfArch arch = HfArch::Llama;
  bool tokenizer = false;  // tokenizer.json written (a checkpoint over token shards may have none)
};
// Writes out_dir/{model.safetensors, config.json, tokenizer.json, generation_config.json}.
HfExport export_hf(const std::string& checkpoint, const std::string& out_dir);

// --- import (apps/interop/hf_import.cpp) ------------------------------------------------
struct HfImportOptions {
  std::string tokenizer;      // tokenizer.json to use instead of DIR/tokenizer.json
  bool no_tokenizer = false;  // store no tokenizer (the byte tokenizer is then implied)
};
// Reads dir/config.json, dir/model.safetensors (or the shards of model.safetensors.index.json)
// and the tokenizer into an ember checkpoint (root attrs, /model, /tokenizer). Never overwrites
// a file: out_checkpoint must not exist.
void import_hf(const std::string& dir, const std::string& out_checkpoint,
               const HfImportOptions& opt);

}  // namespace ember::apps
