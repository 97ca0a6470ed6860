// Hugging Face model folders <-> ember checkpoints, one call each, no CLI (and a fine-tune
// checkpoint as a PEFT adapter or a merged model):
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
  bool reward = false;     // a reward model: hf_reward_arch_name(arch), score.weight, no lm_head
  bool tokenizer = false;  // tokenizer.json written (a checkpoint over token shards may have none)
};
// Writes out_dir/{model.safetensors, config.json, tokenizer.json, generation_config.json};
// a fine-tune checkpoint (docs/formats.md#fine-tune-checkpoints) as its merged model; a reward
// model (docs/interop.md#reward-models) as the *ForSequenceClassification of its class: model.* and
// score.weight [1, d_model], no lm_head, pad_token_id <|im_start|>, no generation_config.json.
// out_dir must not exist or be an empty folder (apps/interop/new_output.h), as for export_peft.
// moved_base (here and below): a fine-tune's base read from there instead
// (nn::model_from_checkpoint).
HfExport export_hf(const std::string& checkpoint, const std::string& out_dir,
                   const std::string& moved_base = "");

// --- fine-tune checkpoints (apps/interop/peft_export.cpp) -------------------------------
// Writes out_dir/{adapter_config.json, adapter_model.safetensors}: the PEFT LoRA adapter of
// docs/formats.md#peft-adapter. An Error for a plain checkpoint, a GPT-2-class base (fused qkv) or
// rows added by --add-chat-tokens (those need the merged export).
// out_dir must not exist or be an empty folder.
void export_peft(const std::string& checkpoint, const std::string& out_dir,
                 const std::string& moved_base = "");
// Writes the merged model (base + adapters folded in) as a plain ember checkpoint with the
// fine-tune's tokenizer; out_file must not exist.
void export_merged_checkpoint(const std::string& checkpoint, const std::string& out_file,
                              const std::string& moved_base = "");

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
