// Hugging Face form of an ember model: the transformers class that computes
// the same function (LlamaForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM,
// GPT2LMHeadModel; a reward model's *ForSequenceClassification), its config.json, and its
// weight names and layouts.
// Only exact equivalents are produced or accepted: a config with no such
// class, or a config.json key that would change the math, is an Error naming
// the key. Training-only keys with no Hugging Face counterpart (z_loss_coef,
// dropout, moe.router_z_loss_coef) travel in config.json under "ember_training".
// Whole folders are written and read by apps/interop/hf_files.h.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "nn/config.h"

namespace ember::apps {

enum class HfArch { Llama, Qwen3, Qwen3Moe, GPT2 };

// "LlamaForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "GPT2LMHeadModel".
const char* hf_arch_name(HfArch arch);

// --- config (apps/interop/hf_format.cpp) ---------------------------------------------------
// The class that expresses cfg exactly; otherwise an Error naming the config key.
HfArch hf_arch_for(const nn::ModelConfig& cfg);
// config.json text of cfg as `arch` (bos/eos_token_id written when eos_id is given).
std::string hf_config_json(const nn::ModelConfig& cfg, HfArch arch, std::optional<int64_t> eos_id);

// A reward model (config "reward", docs/model.md#reward-model) exports as the sequence classifier
// of the class hf_arch_for picks, with one label (docs/interop.md#reward-models): Llama, Qwen3
// (qk_norm) or Qwen3-MoE (moe); learned positions (GPT-2) are an Error naming "pos", and so is
// what hf_arch_for refuses (naming its key).
HfArch hf_reward_arch_for(const nn::ModelConfig& cfg);
// "LlamaForSequenceClassification", "Qwen3ForSequenceClassification",
// "Qwen3MoeForSequenceClassification": a `score` Linear [num_labels, hidden_size] without bias on
// the `model.*` decoder's final-norm output.
const char* hf_reward_arch_name(HfArch arch);
// Its config.json: the keys of hf_config_json(cfg, arch) with architectures
// [hf_reward_arch_name(arch)], num_labels 1, id2label / label2id of one label,
// tie_word_embeddings false (there is no lm_head), and pad_token_id = pad_id (null when not
// given), the id transformers' last-non-pad-token rule skips.
std::string hf_reward_config_json(const nn::ModelConfig& cfg, HfArch arch,
                                  std::optional<int64_t> eos_id, std::optional<int64_t> pad_id);

struct HfModelConfig {
  HfArch arch = HfArch::Llama;
  nn::ModelConfig config;
};
// Parses config.json text; `source` names the file in errors.
HfModelConfig hf_config_from_json(const std::string& json_text, const std::string& source);

// --- weights (apps/interop/hf_weights.cpp) -----------------------------------------------------
// ember state dict (docs/model.md#parameter-names, Linear [out, in]) -> Hugging Face names and
// layouts (for GPT-2: transformer.* names, Conv1D [in, out] weights, q,k,v fused in c_attn).
std::map<std::string, Tensor> hf_tensors_from_ember(const nn::ModelConfig& cfg, HfArch arch,
                                                    const std::map<std::string, Tensor>& state);
// The inverse; drops Hugging Face buffers (rotary inv_freq, GPT-2 attn.bias/masked_bias) and a
// tied lm_head. Names and shapes are checked against the model by the caller (load_state_dict).
std::map<std::string, Tensor> ember_tensors_from_hf(const nn::ModelConfig& cfg, HfArch arch,
                                                    std::map<std::string, Tensor> hf,
                                                    const std::string& source);

}  // namespace ember::apps
