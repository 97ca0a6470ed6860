// ModelConfig: the JSON object of docs/model.md#config that fully describes a
// model. Parsing fills every default, rejects unknown keys and wrong types,
// checks each size against the bounds below and the relations between keys,
// and bounds the parameter count (counted without overflow); each error
// names the file and the key.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ember::nn {

// Inclusive upper bounds of the size keys (each must also be positive). They
// are far above any published model and keep every size product within int64.
inline constexpr int64_t kMaxVocabSize = int64_t{1} << 24;   // 16,777,216
inline constexpr int64_t kMaxDModel = int64_t{1} << 20;      // d_model: 1,048,576
inline constexpr int64_t kMaxLayers = int64_t{1} << 16;      // n_layers: 65,536
inline constexpr int64_t kMaxHeads = int64_t{1} << 16;       // n_heads, n_kv_heads
inline constexpr int64_t kMaxHeadDim = int64_t{1} << 16;     // head_dim
inline constexpr int64_t kMaxFfnHidden = int64_t{1} << 22;   // ffn_hidden, moe.expert_hidden: 4,194,304
inline constexpr int64_t kMaxSeqLen = int64_t{1} << 24;      // max_seq_len: 16,777,216
inline constexpr int64_t kMaxExperts = int64_t{1} << 16;     // moe.n_experts, moe.top_k, moe.n_shared
inline constexpr int64_t kMaxParameters = int64_t{1} << 48;  // all parameters: 281,474,976,710,656

struct MoEConfig {
  int64_t n_experts = 8;
  int64_t top_k = 2;
  int64_t expert_hidden = 0;  // 0 in JSON means "= ffn_hidden"; resolved on parse
  int64_t n_shared = 0;
  bool norm_topk_prob = true;
  int64_t every = 1;  // layer i is MoE when i % every == every - 1
  double aux_loss_coef = 0.01;
  double router_z_loss_coef = 0;
};

// LoRA of a fine-tune (docs/model.md#lora): JSON key "lora". targets are short names of
// kLoRATargets (nn/adapters/adapters.h): q, k, v, o, gate, up, down, head.
struct LoRAConfig {
  int64_t r = 8;
  double alpha = 16;
  double dropout = 0;
  std::vector<std::string> targets{"q", "v"};
};

struct ModelConfig {
  int64_t vocab_size = 256;
  int64_t d_model = 256;
  int64_t n_layers = 4;
  int64_t n_heads = 8;
  int64_t n_kv_heads = 0;  // resolved: = n_heads
  int64_t head_dim = 0;    // resolved: = d_model / n_heads
  int64_t ffn_hidden = 0;  // resolved: see default_ffn_hidden
  std::string ffn_act = "swiglu";  // swiglu, geglu, gelu, gelu_tanh, relu
  std::string norm = "rmsnorm";    // rmsnorm, layernorm
  double norm_eps = 1e-5;
  std::string pos = "rope";  // rope, learned, sinusoidal, none
  double rope_theta = 10000;
  int64_t max_seq_len = 256;
  bool qk_norm = false;
  bool bias = false;
  bool tie_embeddings = true;
  bool parallel_block = false;
  int64_t sliding_window = 0;
  int64_t global_every = 0;
  double attn_softcap = 0;
  double final_softcap = 0;
  double z_loss_coef = 0;
  double dropout = 0;
  std::optional<MoEConfig> moe;
  // A fine-tune's adapters and base quantization ("none", "nf4", "nf4-dq"). to_json writes
  // "lora" and "quantize" only when lora is set, so a base model's JSON is unchanged.
  std::optional<LoRAConfig> lora;
  std::string quantize = "none";
  // A preference-optimised fine-tune's loss and its options (docs/model.md#config): the JSON
  // object of key "align", kept as text; empty for any other model (to_json then omits it).
  std::string align;
  // A reward model's options (docs/model.md#reward-model): the JSON object of key "reward", kept
  // as text; non-empty means the model has the score head `score.weight` (to_json omits it empty).
  std::string reward;
  // An RL fine-tune's options (docs/model.md#rl-from-a-reward): the JSON object of key "rl", kept
  // as text; empty for any other model (to_json omits it). Its "algo" "ppo" means the model has
  // the value head `value.weight` (has_value_head).
  std::string rl;

  // Parses a docs/model.md#config JSON object; `source` names it in errors.
  static ModelConfig from_json(const std::string& json_text, const std::string& source = "config");
  static ModelConfig from_file(const std::string& path);
  // Canonical JSON with every key, resolved values included.
  std::string to_json() const;

  // An "rl" object whose "algo" is "ppo": the model holds PPO's value head.
  bool has_value_head() const;
  bool gated_ffn() const { return ffn_act == "swiglu" || ffn_act == "geglu"; }
  bool layer_is_moe(int64_t layer) const;
  // Sliding-window size of a layer: 0 means full causal attention.
  int64_t layer_window(int64_t layer) const;
};

// 256 * ceil((8 * d_model / 3) / 256) for gated FFNs (integer 8*d/3 first), else 4 * d_model.
int64_t default_ffn_hidden(int64_t d_model, const std::string& ffn_act);

}  // namespace ember::nn
