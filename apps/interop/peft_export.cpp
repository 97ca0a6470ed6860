// A fine-tune checkpoint as a Hugging Face PEFT adapter folder (docs/formats.md#peft-adapter):
// adapter_config.json (peft_type LORA, r, lora_alpha, lora_dropout, target_modules,
// bias "none", task_type CAUSAL_LM) and adapter_model.safetensors holding
// base_model.model.<name>.lora_A.weight / .lora_B.weight. ember's parameter names are
// Hugging Face's for the Llama / Qwen3 / Qwen3-MoE classes, so a name maps to itself.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "apps/interop/hf_files.h"
#include "apps/interop/new_output.h"
#include "core/io/atomic_file.h"
#include "core/io/safetensors.h"
#include "nn/adapters/adapters.h"
#include "nn/checkpoint_file.h"

namespace ember::apps {
namespace {

// The Hugging Face module name of each short target (docs/model.md#lora).
std::string hf_module_name(const std::string& target) {
  return target == "head" ? "lm_head" : target + "_proj";  // q_proj, ..., down_proj
}

bool is_adapter_tensor(const std::string& name) {
  for (const char* suffix : {".lora_A.weight", ".lora_B.weight"}) {
    const std::string s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
  }
  return false;
}

std::string adapter_config_json(const nn::ModelConfig& cfg, const std::string& base) {
  const nn::LoRAConfig& lora = *cfg.lora;
  nlohmann::json modules = nlohmann::json::array();
  for (const std::string& t : lora.targets) modules.push_back(hf_module_name(t));
  const nlohmann::json j = {{"peft_type", "LORA"},
                            {"task_type", "CAUSAL_LM"},
                            {"r", lora.r},
                            {"lora_alpha", lora.alpha},
                            {"lora_dropout", lora.dropout},
                            {"target_modules", modules},
                            {"bias", "none"},
                            {"fan_in_fan_out", false},
                            {"inference_mode", true},
                            {"init_lora_weights", true},
                            {"use_rslora", false},
                            {"modules_to_save", nullptr},
                            {"base_model_name_or_path", base}};
  return j.dump(2) + "\n";
}

}  // namespace

void export_peft(const std::string& checkpoint, const std::string& out_dir,
                 const std::string& moved_base) {
  require_new_output("export", "--out", out_dir, OutputKind::Folder);
  nn::Checkpoint c = nn::read_checkpoint(checkpoint, /*with_optim=*/false);
  EMBER_CHECK(c.config.lora, checkpoint,
              ": not a fine-tune checkpoint (no \"lora\" in its config): nothing to export as an adapter");
  // PEFT's names must exist in the Hugging Face class: GPT-2 fuses q, k and v into c_attn.
  const HfArch arch = hf_arch_for(nn::merged_config(c.config));
  EMBER_CHECK(arch != HfArch::GPT2, checkpoint, ": its base exports as ", hf_arch_name(arch),
              ", whose fused c_attn has no q/k/v modules for a PEFT adapter; export with --merge");
  for (const auto& [name, t] : c.model) {
    EMBER_CHECK(is_adapter_tensor(name), checkpoint, ": holds ", name,
                " besides the adapters (rows added by --add-chat-tokens): a PEFT adapter cannot carry "
                "them; export with --merge");
  }
  // Loads the base and checks every tensor (names, shapes, finite) before anything is written.
  nn::model_from_checkpoint(c, checkpoint, moved_base);
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, t] : c.model) tensors["base_model.model." + name] = t;

  create_output_folder("--out", out_dir);
  const std::filesystem::path dir(out_dir);
  write_safetensors((dir / "adapter_model.safetensors").string(), tensors);
  write_file_atomically((dir / "adapter_config.json").string(), adapter_config_json(c.config, moved_base.empty() ? c.base : moved_base));
}

void export_merged_checkpoint(const std::string& checkpoint, const std::string& out_file,
                              const std::string& moved_base) {
  nn::Checkpoint c = nn::read_checkpoint(checkpoint, /*with_optim=*/false);
  EMBER_CHECK(c.config.lora, checkpoint, ": not a fine-tune checkpoint (no \"lora\" in its config): "
              "nothing to merge");
  require_new_output("export", "--out", out_file, OutputKind::File);
  nn::Checkpoint merged;
  merged.config = nn::merged_config(c.config);
  merged.model = nn::merged_state_dict(*nn::model_from_checkpoint(c, checkpoint, moved_base));
  merged.tokenizer_json = c.tokenizer_json;
  nn::write_checkpoint(out_file, merged);
}

}  // namespace ember::apps
