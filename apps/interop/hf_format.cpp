// ember config <-> Hugging Face config.json, both ways, exact equivalents only.
// Key conventions follow transformers' configuration_{llama,qwen3,qwen3_moe,gpt2}.py.
#include "apps/interop/hf_format.h"

#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/io/json_message.h"

namespace ember::apps {
namespace {

using nlohmann::json;

[[noreturn]] void no_equivalent(const std::string& key, const json& value, const std::string& why) {
  throw Error("cannot export to Hugging Face: config key \"" + key + "\" = " + value.dump() + ": " +
              why);
}

json training_keys(const nn::ModelConfig& c) {
  json t = {{"z_loss_coef", c.z_loss_coef}, {"dropout", c.dropout}};
  if (c.moe) t["router_z_loss_coef"] = c.moe->router_z_loss_coef;
  return t;
}

// Reads config.json keys, remembering which were used; finish() rejects the rest.
struct KeyReader {
  const json& j;
  std::string source;
  std::set<std::string> used;

  bool given(const std::string& k) {
    used.insert(k);
    return j.contains(k) && !j.at(k).is_null();
  }
  std::string where(const std::string& k) const { return source + ": key \"" + k + "\""; }
  int64_t integer(const std::string& k, std::optional<int64_t> fallback = std::nullopt) {
    if (!given(k)) {
      EMBER_CHECK(fallback, source, ": missing key \"", k, "\"");
      return *fallback;
    }
    EMBER_CHECK(j.at(k).is_number_integer(), where(k), " must be an integer, got ", j.at(k).dump());
    EMBER_CHECK(!j.at(k).is_number_unsigned() || j.at(k).get<uint64_t>() <= uint64_t{INT64_MAX},
                where(k), " is too large, got ", j.at(k).dump());
    return j.at(k).get<int64_t>();
  }
  // A size: 1 <= value <= max, the bound of the ember key it becomes (nn/config.h).
  int64_t size(const std::string& k, int64_t max, const char* ember_key,
               std::optional<int64_t> fallback = std::nullopt) {
    const int64_t v = integer(k, fallback);
    EMBER_CHECK(v > 0 && v <= max, where(k), " must be between 1 and ", max, " (ember's ",
                ember_key, " limit), got ", v);
    return v;
  }
  double number(const std::string& k, double fallback) {
    if (!given(k)) return fallback;
    EMBER_CHECK(j.at(k).is_number(), where(k), " must be a number, got ", j.at(k).dump());
    return j.at(k).get<double>();
  }
  bool boolean(const std::string& k, bool fallback) {
    if (!given(k)) return fallback;
    EMBER_CHECK(j.at(k).is_boolean(), where(k), " must be true or false, got ", j.at(k).dump());
    return j.at(k).get<bool>();
  }
  std::string string(const std::string& k, const std::string& fallback) {
    if (!given(k)) return fallback;
    EMBER_CHECK(j.at(k).is_string(), where(k), " must be a string, got ", j.at(k).dump());
    return j.at(k).get<std::string>();
  }
  // Keys that do not change the model's function (bookkeeping, inference options, dropout).
  void ignore(std::initializer_list<const char*> keys) { used.insert(keys.begin(), keys.end()); }
  void finish() const {
    for (const auto& [k, v] : j.items()) {
      EMBER_CHECK(used.count(k), where(k),
                  " is not understood by ember's import (it may change the model's math)");
    }
  }
};

// RoPE settings: plain RoPE only (rope_scaling null or "default"; v5's rope_parameters).
double read_rope_theta(KeyReader& r) {
  double theta = r.number("rope_theta", 10000.0);
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!r.given(key)) continue;
    const json& s = r.j.at(key);
    EMBER_CHECK(s.is_object(), r.where(key), " must be an object or null");
    for (const char* k : {"rope_type", "type"}) {
      EMBER_CHECK(!s.contains(k) || s.at(k).is_string(), r.where(key), ": \"", k,
                  "\" must be a string");
    }
    const std::string type = s.value("rope_type", s.value("type", std::string("default")));
    EMBER_CHECK(type == "default", r.where(key), ": rope_type \"", type,
                "\" rescales RoPE, which ember does not implement");
    for (const auto& [k, v] : s.items()) {
      EMBER_CHECK(k == "rope_type" || k == "type" || k == "rope_theta", r.where(key), ": \"", k,
                  "\" changes RoPE, which ember does not implement");
    }
    if (s.contains("rope_theta")) {
      EMBER_CHECK(s.at("rope_theta").is_number(), r.where(key), ": \"rope_theta\" must be a number");
      theta = s.at("rope_theta").get<double>();
    }
  }
  return theta;
}

// Keys of Qwen3 / Qwen3-MoE that switch on sliding-window layers.
void reject_sliding_window(KeyReader& r, int64_t n_layers) {
  EMBER_CHECK(!r.boolean("use_sliding_window", false), r.where("use_sliding_window"),
              " is true: Qwen3's sliding-window layers have no exact ember equivalent");
  r.ignore({"sliding_window", "max_window_layers"});  // inert while use_sliding_window is false
  if (r.given("layer_types")) {
    const json& t = r.j.at("layer_types");
    EMBER_CHECK(t.is_array() && static_cast<int64_t>(t.size()) == n_layers, r.where("layer_types"),
                " must list one type per layer");
    for (const json& s : t) {
      EMBER_CHECK(s == "full_attention", r.where("layer_types"), ": ", s.dump(),
                  " layers are not supported");
    }
  }
}

}  // namespace

const char* hf_arch_name(HfArch arch) {
  switch (arch) {
    case HfArch::Llama:
      return "LlamaForCausalLM";
    case HfArch::Qwen3:
      return "Qwen3ForCausalLM";
    case HfArch::Qwen3Moe:
      return "Qwen3MoeForCausalLM";
    case HfArch::GPT2:
      return "GPT2LMHeadModel";
  }
  return "?";
}

HfArch hf_arch_for(const nn::ModelConfig& c) {
  const std::string all =
      "LlamaForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM and GPT2LMHeadModel";
  if (c.sliding_window > 0)
    no_equivalent("sliding_window", c.sliding_window,
                  all + " attend over the whole causal context");
  if (c.attn_softcap > 0)
    no_equivalent("attn_softcap", c.attn_softcap, all + " have no attention soft-cap");
  if (c.final_softcap > 0)
    no_equivalent("final_softcap", c.final_softcap, all + " have no logit soft-cap");
  if (c.parallel_block)
    no_equivalent("parallel_block", true, all + " run attention and MLP one after the other");
  if (c.pos == "learned") {
    if (c.norm != "layernorm")
      no_equivalent("norm", c.norm,
                    "GPT2LMHeadModel (the class with learned positions) uses LayerNorm");
    if (c.moe) no_equivalent("moe", "object", "GPT2LMHeadModel has no mixture of experts");
    if (c.qk_norm) no_equivalent("qk_norm", true, "GPT2LMHeadModel has no q/k norm");
    if (!c.bias) no_equivalent("bias", false, "GPT2LMHeadModel's Conv1D layers always have biases");
    if (c.n_kv_heads != c.n_heads)
      no_equivalent("n_kv_heads", c.n_kv_heads, "GPT2LMHeadModel has no grouped-query attention");
    if (c.head_dim * c.n_heads != c.d_model)
      no_equivalent("head_dim", c.head_dim, "GPT2LMHeadModel's head width is n_embd / n_head");
    if (c.gated_ffn()) no_equivalent("ffn_act", c.ffn_act, "GPT2LMHeadModel's MLP is not gated");
    return HfArch::GPT2;
  }
  if (c.pos != "rope") {
    no_equivalent("pos", c.pos,
                  "the Llama/Qwen3 classes use RoPE and GPT2LMHeadModel learned positions");
  }
  if (c.norm != "rmsnorm")
    no_equivalent("norm", c.norm, "the Llama/Qwen3 classes (the RoPE models) use RMSNorm");
  if (!c.gated_ffn()) {
    no_equivalent("ffn_act", c.ffn_act,
                  "the Llama/Qwen3 MLPs are gated: swiglu (hidden_act silu) or geglu (gelu)");
  }
  if (c.moe) {
    if (!c.qk_norm)
      no_equivalent("qk_norm", false,
                    "Qwen3MoeForCausalLM, the only MoE class, always has q_norm/k_norm");
    if (c.bias)
      no_equivalent("bias", true,
                    "Qwen3MoeForCausalLM has attention_bias but no MLP or expert biases");
    if (c.moe->n_shared > 0)
      no_equivalent("moe.n_shared", c.moe->n_shared, "Qwen3MoeForCausalLM has no shared experts");
    return HfArch::Qwen3Moe;
  }
  if (c.qk_norm) {
    if (c.bias)
      no_equivalent("bias", true, "Qwen3ForCausalLM has attention_bias but no MLP biases");
    return HfArch::Qwen3;
  }
  return HfArch::Llama;
}

namespace {

// GPT2LMHeadModel's config.json keys (configuration_gpt2.py).
void add_gpt2_keys(const nn::ModelConfig& c, json& j) {
  j["model_type"] = "gpt2";
  j["n_embd"] = c.d_model;
  j["n_layer"] = c.n_layers;
  j["n_head"] = c.n_heads;
  j["n_inner"] = c.ffn_hidden;
  j["n_positions"] = j["n_ctx"] = c.max_seq_len;
  j["activation_function"] =
      c.ffn_act == "gelu_tanh" ? "gelu_new" : c.ffn_act;  // gelu (erf), relu
  j["layer_norm_epsilon"] = c.norm_eps;
  j["resid_pdrop"] = c.dropout;  // ember's dropout sits where GPT-2's residual dropouts do
  j["embd_pdrop"] = j["attn_pdrop"] = 0.0;
  j["scale_attn_weights"] = true;
  j["scale_attn_by_inverse_layer_idx"] = false;
  j["reorder_and_upcast_attn"] = false;
}

}  // namespace

std::string hf_config_json(const nn::ModelConfig& c, HfArch arch, std::optional<int64_t> eos_id) {
  json j;
  j["architectures"] = {hf_arch_name(arch)};
  j["vocab_size"] = c.vocab_size;
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  j["torch_dtype"] = "float32";
  if (eos_id) j["bos_token_id"] = j["eos_token_id"] = *eos_id;
  j["ember_training"] = training_keys(c);
  if (arch == HfArch::GPT2) {
    add_gpt2_keys(c, j);
    return j.dump(2);
  }
  j["model_type"] = arch == HfArch::Llama ? "llama" : arch == HfArch::Qwen3 ? "qwen3" : "qwen3_moe";
  j["hidden_size"] = c.d_model;
  j["intermediate_size"] = c.ffn_hidden;
  j["num_hidden_layers"] = c.n_layers;
  j["num_attention_heads"] = c.n_heads;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = c.ffn_act == "swiglu" ? "silu" : "gelu";  // geglu: exact (erf) GELU
  j["max_position_embeddings"] = c.max_seq_len;
  j["rms_norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = nullptr;
  j["attention_bias"] = c.bias;
  j["attention_dropout"] = 0.0;
  if (arch == HfArch::Llama) {
    j["mlp_bias"] = c.bias;
    j["pretraining_tp"] = 1;
  } else {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = c.n_layers;
  }
  if (arch == HfArch::Qwen3Moe) {
    j["num_experts"] = c.moe->n_experts;
    j["num_experts_per_tok"] = c.moe->top_k;
    j["moe_intermediate_size"] = c.moe->expert_hidden;
    j["norm_topk_prob"] = c.moe->norm_topk_prob;
    // Qwen3-MoE: layer i is sparse when (i + 1) % decoder_sparse_step == 0, which is
    // ember's i % every == every - 1.
    j["decoder_sparse_step"] = c.moe->every;
    j["mlp_only_layers"] = json::array();
    j["router_aux_loss_coef"] = c.moe->aux_loss_coef;
    j["output_router_logits"] = false;
  }
  return j.dump(2);
}

HfArch hf_reward_arch_for(const nn::ModelConfig& c) {
  const HfArch arch = hf_arch_for(c);  // what no Hugging Face class expresses
  if (arch == HfArch::GPT2) {
    no_equivalent("pos", c.pos,
                  "a reward model exports as the sequence classifier of a RoPE class (Llama, "
                  "Qwen3, Qwen3-MoE) only, not GPT2ForSequenceClassification");
  }
  return arch;
}

const char* hf_reward_arch_name(HfArch arch) {
  switch (arch) {
    case HfArch::Llama:
      return "LlamaForSequenceClassification";
    case HfArch::Qwen3:
      return "Qwen3ForSequenceClassification";
    case HfArch::Qwen3Moe:
      return "Qwen3MoeForSequenceClassification";
    case HfArch::GPT2:
      break;
  }
  throw Error("hf_reward_arch_name: no reward export of GPT2LMHeadModel's configs");
}

std::string hf_reward_config_json(const nn::ModelConfig& c, HfArch arch,
                                  std::optional<int64_t> eos_id, std::optional<int64_t> pad_id) {
  EMBER_CHECK(hf_reward_arch_for(c) == arch, "hf_reward_config_json: the config is not a ",
              hf_reward_arch_name(arch));
  json j = json::parse(hf_config_json(c, arch, eos_id));
  j["architectures"] = {hf_reward_arch_name(arch)};
  j["num_labels"] = 1;
  j["id2label"] = {{"0", "LABEL_0"}};
  j["label2id"] = {{"LABEL_0", 0}};
  j["tie_word_embeddings"] = false;  // no lm_head: the head is score.weight
  j["pad_token_id"] = pad_id ? json(*pad_id) : json(nullptr);
  return j.dump(2);
}

namespace {

HfModelConfig parse_hf_config(const json& j, const std::string& source);

}  // namespace

HfModelConfig hf_config_from_json(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(source + ": invalid JSON: " + json_message(e.what()));
  }
  EMBER_CHECK(j.is_object(), source, ": config.json must be a JSON object, got ", j.type_name());
  try {
    return parse_hf_config(j, source);
  } catch (const json::exception& e) {  // a type the checks missed: still one line naming the file
    throw Error(source + ": " + json_message(e.what()));
  }
}

namespace {

// The class "architectures"[0] names; an Error naming the key for any other.
HfArch read_hf_arch(KeyReader& r) {
  const json& j = r.j;
  std::string arch_name;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty()) {
    EMBER_CHECK(j["architectures"][0].is_string(), r.where("architectures"),
                " must be a list of class names, got ", j["architectures"].dump());
    arch_name = j["architectures"][0].get<std::string>();
  }
  const std::map<std::string, HfArch> by_name = {{"LlamaForCausalLM", HfArch::Llama},
                                                 {"Qwen3ForCausalLM", HfArch::Qwen3},
                                                 {"Qwen3MoeForCausalLM", HfArch::Qwen3Moe},
                                                 {"GPT2LMHeadModel", HfArch::GPT2}};
  auto it = by_name.find(arch_name);
  EMBER_CHECK(arch_name.find("ForSequenceClassification") == std::string::npos, r.source,
              ": key \"architectures\": \"", arch_name,
              "\" is a sequence classifier (a reward model's export): ember imports language models "
              "only; score with the ember reward checkpoint it was exported from (ember reward --score)");
  EMBER_CHECK(it != by_name.end(), r.source, ": key \"architectures\": unsupported architecture \"",
              arch_name,
              "\" (ember imports LlamaForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, "
              "GPT2LMHeadModel)");
  return it->second;
}

// GPT2LMHeadModel's keys (configuration_gpt2.py defaults) into the ember config e.
void read_gpt2_keys(KeyReader& r, json& e) {
  const int64_t d = r.size("n_embd", nn::kMaxDModel, "d_model");
  const int64_t h = r.size("n_head", nn::kMaxHeads, "n_heads");
  e["d_model"] = d;
  e["n_layers"] = r.size("n_layer", nn::kMaxLayers, "n_layers");
  e["n_heads"] = h;
  e["ffn_hidden"] = r.size("n_inner", nn::kMaxFfnHidden, "ffn_hidden", 4 * d);
  e["max_seq_len"] = r.size("n_positions", nn::kMaxSeqLen, "max_seq_len", 1024);
  const std::string act = r.string("activation_function", "gelu_new");
  EMBER_CHECK(act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu" || act == "relu",
              r.where("activation_function"), ": \"", act, "\" has no ember equivalent");
  e["ffn_act"] = act == "gelu" || act == "relu" ? act : "gelu_tanh";
  e["norm"] = "layernorm";
  e["norm_eps"] = r.number("layer_norm_epsilon", 1e-5);
  e["pos"] = "learned";
  e["bias"] = true;
  e["tie_embeddings"] = r.boolean("tie_word_embeddings", true);
  EMBER_CHECK(r.boolean("scale_attn_weights", true), r.where("scale_attn_weights"),
              " false is not supported");
  EMBER_CHECK(!r.boolean("scale_attn_by_inverse_layer_idx", false),
              r.where("scale_attn_by_inverse_layer_idx"), " true is not supported");
  EMBER_CHECK(!r.boolean("add_cross_attention", false), r.where("add_cross_attention"),
              " true is not supported");
  r.ignore({"n_ctx", "resid_pdrop", "embd_pdrop", "attn_pdrop", "reorder_and_upcast_attn",
            "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
            "summary_first_dropout", "task_specific_params"});
}

// Qwen3MoeForCausalLM's expert keys as ember's "moe" object.
json read_qwen3_moe_keys(KeyReader& r) {
  json m;
  m["n_experts"] = r.size("num_experts", nn::kMaxExperts, "moe.n_experts", 128);
  m["top_k"] = r.size("num_experts_per_tok", nn::kMaxExperts, "moe.top_k", 8);
  m["expert_hidden"] = r.size("moe_intermediate_size", nn::kMaxFfnHidden, "moe.expert_hidden", 768);
  m["norm_topk_prob"] = r.boolean("norm_topk_prob", false);
  m["every"] = r.integer("decoder_sparse_step", 1);
  m["aux_loss_coef"] = r.number("router_aux_loss_coef", 0.001);
  if (r.given("mlp_only_layers")) {
    EMBER_CHECK(r.j.at("mlp_only_layers").empty(), r.where("mlp_only_layers"),
                " is not empty: ember's moe.every cannot express a list of dense layers");
  }
  r.ignore({"output_router_logits"});
  return m;
}

// The Llama/Qwen3/Qwen3-MoE keys into the ember config e. Missing keys take the class's own
// defaults (configuration_{llama,qwen3,qwen3_moe}.py).
void read_llama_family_keys(KeyReader& r, HfArch arch, json& e) {
  const int64_t d = r.size("hidden_size", nn::kMaxDModel, "d_model");
  const int64_t h = r.size("num_attention_heads", nn::kMaxHeads, "n_heads");
  const int64_t layers = r.size("num_hidden_layers", nn::kMaxLayers, "n_layers");
  e["d_model"] = d;
  e["n_layers"] = layers;
  e["n_heads"] = h;
  const bool llama = arch == HfArch::Llama, qwen3 = arch == HfArch::Qwen3;
  const bool kv_null = r.j.contains("num_key_value_heads") && r.j["num_key_value_heads"].is_null();
  e["n_kv_heads"] = r.size("num_key_value_heads", nn::kMaxHeads, "n_kv_heads",
                           llama || kv_null ? h : qwen3 ? 32 : 4);
  EMBER_CHECK(r.given("head_dim") || qwen3 || d % h == 0, r.source,
              ": hidden_size must be a multiple of num_attention_heads");
  e["head_dim"] = r.size("head_dim", nn::kMaxHeadDim, "head_dim", qwen3 ? 128 : d / h);
  e["ffn_hidden"] = r.size("intermediate_size", nn::kMaxFfnHidden, "ffn_hidden");
  const std::string act = r.string("hidden_act", "silu");
  EMBER_CHECK(act == "silu" || act == "gelu", r.where("hidden_act"), ": \"", act,
              "\" has no ember equivalent (silu -> swiglu, gelu -> geglu)");
  e["ffn_act"] = act == "silu" ? "swiglu" : "geglu";
  e["norm"] = "rmsnorm";
  e["norm_eps"] = r.number("rms_norm_eps", 1e-6);
  e["pos"] = "rope";
  e["rope_theta"] = read_rope_theta(r);
  e["max_seq_len"] = r.size("max_position_embeddings", nn::kMaxSeqLen, "max_seq_len",
                             llama ? 2048 : 32768);
  e["tie_embeddings"] = r.boolean("tie_word_embeddings", false);
  const bool attn_bias = r.boolean("attention_bias", false);
  e["bias"] = attn_bias;
  e["qk_norm"] = arch != HfArch::Llama;
  r.ignore({"attention_dropout"});
  if (arch == HfArch::Llama) {
    EMBER_CHECK(r.boolean("mlp_bias", false) == attn_bias, r.where("mlp_bias"),
                " differs from attention_bias: ember's bias key covers both");
    r.ignore({"pretraining_tp"});  // a different summation order of the same products
  } else {
    EMBER_CHECK(!attn_bias, r.where("attention_bias"),
                " true: Qwen3's MLPs have no bias, ember's bias covers both");
    reject_sliding_window(r, layers);
  }
  if (arch == HfArch::Qwen3Moe) e["moe"] = read_qwen3_moe_keys(r);
}

// The training-only keys ember's export stores under "ember_training" (z_loss_coef 0 without).
void read_ember_training_keys(KeyReader& r, json& e) {
  e["z_loss_coef"] = 0.0;
  if (!r.given("ember_training")) return;
  const json& t = r.j.at("ember_training");
  EMBER_CHECK(t.is_object(), r.where("ember_training"), " must be an object");
  for (const auto& [k, v] : t.items()) {
    if (k == "router_z_loss_coef" && e.contains("moe")) {
      e["moe"][k] = v;
    } else {
      EMBER_CHECK(k == "z_loss_coef" || k == "dropout", r.where("ember_training"),
                  ": unknown key \"", k, "\"");
      e[k] = v;
    }
  }
}

HfModelConfig parse_hf_config(const json& j, const std::string& source) {
  KeyReader r{j, source, {}};
  r.ignore({"architectures", "model_type", "torch_dtype", "dtype", "transformers_version",
            "_name_or_path", "bos_token_id", "eos_token_id", "pad_token_id", "initializer_range",
            "use_cache", "tokenizer_class"});
  HfModelConfig out;
  out.arch = read_hf_arch(r);
  json e;  // the ember config
  e["vocab_size"] = r.size("vocab_size", nn::kMaxVocabSize, "vocab_size");
  if (out.arch == HfArch::GPT2) {
    read_gpt2_keys(r, e);
  } else {
    read_llama_family_keys(r, out.arch, e);
  }
  read_ember_training_keys(r, e);
  r.finish();
  out.config = nn::ModelConfig::from_json(e.dump(), source + " (as an ember config)");
  return out;
}

}  // namespace

}  // namespace ember::apps
