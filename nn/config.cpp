// ModelConfig JSON parsing and validation (nlohmann-json).
#include "nn/config.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/io/read_file.h"
#include "core/io/json_message.h"
#include "nn/sizing/model_stats.h"

namespace ember::nn {
namespace {

using nlohmann::json;

// Reads key `k` of `obj` into `out` when present, checking its JSON type.
struct Reader {
  const json& obj;
  std::string where;  // "config.json" or "config.json: moe"

  std::string name(const std::string& k) const { return where + ": key \"" + k + "\""; }

  void integer(const std::string& k, int64_t& out) const {
    if (!obj.contains(k)) return;
    const json& v = obj.at(k);
    EMBER_CHECK(v.is_number_integer(), name(k), " must be an integer, got ", v.dump());
    EMBER_CHECK(!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t{INT64_MAX}, name(k),
                " is too large, got ", v.dump());
    out = v.get<int64_t>();
  }
  void number(const std::string& k, double& out) const {
    if (!obj.contains(k)) return;
    const json& v = obj.at(k);
    EMBER_CHECK(v.is_number(), name(k), " must be a number, got ", v.dump());
    out = v.get<double>();
    EMBER_CHECK(std::isfinite(out), name(k), " must be a finite number");
  }
  void boolean(const std::string& k, bool& out) const {
    if (!obj.contains(k)) return;
    const json& v = obj.at(k);
    EMBER_CHECK(v.is_boolean(), name(k), " must be true or false, got ", v.dump());
    out = v.get<bool>();
  }
  void choice(const std::string& k, std::string& out, const std::set<std::string>& allowed) const {
    if (!obj.contains(k)) return;
    const json& v = obj.at(k);
    std::string options;
    for (const auto& a : allowed) options += (options.empty() ? "" : ", ") + a;
    EMBER_CHECK(v.is_string(), name(k), " must be a string (one of ", options, "), got ", v.dump());
    out = v.get<std::string>();
    EMBER_CHECK(allowed.count(out), name(k), " must be one of ", options, ", got \"", out, "\"");
  }
  void only_keys(const std::set<std::string>& known) const {
    for (const auto& [k, v] : obj.items()) {
      EMBER_CHECK(known.count(k), where, ": unknown key \"", k, "\"");
    }
  }
};

void require(bool cond, const std::string& where, const std::string& key, const std::string& why) {
  EMBER_CHECK(cond, where, ": key \"", key, "\" ", why);
}

// A size key: 1 <= value <= max (a power of two, named as such).
void require_size(int64_t value, const std::string& where, const std::string& key, int64_t max) {
  const int log2 = 63 - __builtin_clzll(static_cast<unsigned long long>(max));
  require(value > 0 && value <= max, where, key,
          "must be between 1 and " + std::to_string(max) + " (2^" + std::to_string(log2) +
              "), got " + std::to_string(value));
}

// Every parameter the config describes, counted by model_stats (which throws rather
// than wrap around), must fit kMaxParameters.
void require_parameter_limit(const ModelConfig& c, const std::string& where) {
  std::optional<int64_t> params;
  try {
    params = model_stats(c, 1, 1).total_params;
  } catch (const Error&) {
  }
  EMBER_CHECK(params && *params <= kMaxParameters, where, ": the model has ",
              params ? std::to_string(*params) : "more than 2^63", " parameters, more than the limit of ",
              kMaxParameters, " (2^48); reduce d_model, n_layers, ffn_hidden, vocab_size or the moe sizes");
}

ModelConfig parse_config(const json& obj, const std::string& source);

}  // namespace

int64_t default_ffn_hidden(int64_t d_model, const std::string& ffn_act) {
  if (ffn_act == "swiglu" || ffn_act == "geglu") {
    const int64_t base = 8 * d_model / 3;
    return 256 * ((base + 255) / 256);
  }
  return 4 * d_model;
}

ModelConfig ModelConfig::from_json(const std::string& json_text, const std::string& source) {
  json obj;
  try {
    obj = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(source + ": invalid JSON: " + json_message(e.what()));
  }
  EMBER_CHECK(obj.is_object(), source, ": a model config must be a JSON object, got ",
              obj.type_name());
  try {
    return parse_config(obj, source);
  } catch (const json::exception& e) {  // a type the checks above missed: still one line
    throw Error(source + ": " + json_message(e.what()));
  }
}

namespace {

// The top-level keys as given (types checked), over ModelConfig's defaults.
ModelConfig read_model_keys(const Reader& r) {
  r.only_keys({"vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim",
               "ffn_hidden", "ffn_act", "norm", "norm_eps", "pos", "rope_theta", "max_seq_len",
               "qk_norm", "bias", "tie_embeddings", "parallel_block", "sliding_window",
               "global_every", "attn_softcap", "final_softcap", "z_loss_coef", "dropout", "moe",
               "lora", "quantize", "align", "reward", "rl"});
  ModelConfig c;
  r.integer("vocab_size", c.vocab_size);
  r.integer("d_model", c.d_model);
  r.integer("n_layers", c.n_layers);
  r.integer("n_heads", c.n_heads);
  r.integer("n_kv_heads", c.n_kv_heads);
  r.integer("head_dim", c.head_dim);
  r.integer("ffn_hidden", c.ffn_hidden);
  r.choice("ffn_act", c.ffn_act, {"swiglu", "geglu", "gelu", "gelu_tanh", "relu"});
  r.choice("norm", c.norm, {"rmsnorm", "layernorm"});
  r.number("norm_eps", c.norm_eps);
  r.choice("pos", c.pos, {"rope", "learned", "sinusoidal", "none"});
  r.number("rope_theta", c.rope_theta);
  r.integer("max_seq_len", c.max_seq_len);
  r.boolean("qk_norm", c.qk_norm);
  r.boolean("bias", c.bias);
  r.boolean("tie_embeddings", c.tie_embeddings);
  r.boolean("parallel_block", c.parallel_block);
  r.integer("sliding_window", c.sliding_window);
  r.integer("global_every", c.global_every);
  r.number("attn_softcap", c.attn_softcap);
  r.number("final_softcap", c.final_softcap);
  r.number("z_loss_coef", c.z_loss_coef);
  r.number("dropout", c.dropout);
  r.choice("quantize", c.quantize, {"none", "nf4", "nf4-dq"});
  return c;
}

// Fills the defaults that depend on other keys (n_kv_heads, head_dim, ffn_hidden) and checks
// every top-level value's range.
void complete_and_check(ModelConfig& c, const json& obj, const std::string& s) {
  require_size(c.vocab_size, s, "vocab_size", kMaxVocabSize);
  require_size(c.d_model, s, "d_model", kMaxDModel);
  require_size(c.n_layers, s, "n_layers", kMaxLayers);
  require_size(c.n_heads, s, "n_heads", kMaxHeads);
  if (!obj.contains("n_kv_heads")) c.n_kv_heads = c.n_heads;
  require_size(c.n_kv_heads, s, "n_kv_heads", kMaxHeads);
  require(c.n_heads % c.n_kv_heads == 0, s, "n_kv_heads",
          "must divide n_heads (" + std::to_string(c.n_heads) + "), got " + std::to_string(c.n_kv_heads));
  if (!obj.contains("head_dim")) {
    require(c.d_model % c.n_heads == 0, s, "n_heads",
            "must divide d_model when head_dim is not given");
    c.head_dim = c.d_model / c.n_heads;
  }
  require_size(c.head_dim, s, "head_dim", kMaxHeadDim);
  require(c.pos != "rope" || c.head_dim % 2 == 0, s, "head_dim",
          "must be even with pos \"rope\", got " + std::to_string(c.head_dim));
  require(c.pos != "sinusoidal" || c.d_model % 2 == 0, s, "d_model",
          "must be even with pos \"sinusoidal\"");
  if (!obj.contains("ffn_hidden")) c.ffn_hidden = default_ffn_hidden(c.d_model, c.ffn_act);
  require_size(c.ffn_hidden, s, "ffn_hidden", kMaxFfnHidden);
  require(c.norm_eps > 0, s, "norm_eps", "must be positive");
  require(c.rope_theta > 0, s, "rope_theta", "must be positive");
  require_size(c.max_seq_len, s, "max_seq_len", kMaxSeqLen);
  require(c.sliding_window >= 0, s, "sliding_window", "must be >= 0");
  require(c.global_every >= 0, s, "global_every", "must be >= 0");
  require(c.attn_softcap >= 0, s, "attn_softcap", "must be >= 0");
  require(c.final_softcap >= 0, s, "final_softcap", "must be >= 0");
  require(c.z_loss_coef >= 0, s, "z_loss_coef", "must be >= 0");
  require(c.dropout >= 0 && c.dropout < 1, s, "dropout", "must be in [0, 1)");
}

// The "moe" object (expert_hidden defaults to the dense ffn_hidden), read and checked.
MoEConfig parse_moe(const json& m, const std::string& s, int64_t ffn_hidden) {
  EMBER_CHECK(m.is_object(), s, ": key \"moe\" must be an object or null, got ", m.dump());
  Reader mr{m, s + ": moe"};
  mr.only_keys({"n_experts", "top_k", "expert_hidden", "n_shared", "norm_topk_prob", "every",
                "aux_loss_coef", "router_z_loss_coef"});
  MoEConfig moe;
  mr.integer("n_experts", moe.n_experts);
  mr.integer("top_k", moe.top_k);
  mr.integer("expert_hidden", moe.expert_hidden);
  mr.integer("n_shared", moe.n_shared);
  mr.boolean("norm_topk_prob", moe.norm_topk_prob);
  mr.integer("every", moe.every);
  mr.number("aux_loss_coef", moe.aux_loss_coef);
  mr.number("router_z_loss_coef", moe.router_z_loss_coef);
  const std::string ms = s + ": moe";
  if (!m.contains("expert_hidden")) moe.expert_hidden = ffn_hidden;
  require_size(moe.n_experts, ms, "n_experts", kMaxExperts);
  require(moe.top_k > 0 && moe.top_k <= moe.n_experts, ms, "top_k",
          "must be between 1 and n_experts (" + std::to_string(moe.n_experts) + "), got " +
              std::to_string(moe.top_k));
  require_size(moe.expert_hidden, ms, "expert_hidden", kMaxFfnHidden);
  require(moe.n_shared >= 0 && moe.n_shared <= kMaxExperts, ms, "n_shared",
          "must be between 0 and " + std::to_string(kMaxExperts) + " (2^16), got " + std::to_string(moe.n_shared));
  require(moe.every > 0, ms, "every", "must be positive");
  require(moe.aux_loss_coef >= 0, ms, "aux_loss_coef", "must be >= 0");
  require(moe.router_z_loss_coef >= 0, ms, "router_z_loss_coef", "must be >= 0");
  return moe;
}

// The "lora" object (docs/model.md#lora), read and checked.
LoRAConfig parse_lora(const json& l, const std::string& s) {
  EMBER_CHECK(l.is_object(), s, ": key \"lora\" must be an object, got ", l.dump());
  const std::string ls = s + ": lora";
  Reader lr{l, ls};
  lr.only_keys({"r", "alpha", "dropout", "targets"});
  LoRAConfig lora;
  lr.integer("r", lora.r);
  lr.number("alpha", lora.alpha);
  lr.number("dropout", lora.dropout);
  require(lora.r >= 1, ls, "r", "must be >= 1, got " + std::to_string(lora.r));
  require(lora.alpha > 0, ls, "alpha", "must be > 0");
  require(lora.dropout >= 0 && lora.dropout < 1, ls, "dropout", "must be in [0, 1)");
  if (l.contains("targets")) {
    const json& t = l.at("targets");
    require(t.is_array() && !t.empty(), ls, "targets", "must be a non-empty array of target names");
    lora.targets.clear();
    const std::set<std::string> known{"q", "k", "v", "o", "gate", "up", "down", "head"};
    for (const json& v : t) {
      require(v.is_string() && known.count(v.get<std::string>()), ls, "targets",
              "holds " + v.dump() + ", not one of q, k, v, o, gate, up, down, head");
      const std::string name = v.get<std::string>();
      for (const auto& seen : lora.targets) {
        require(seen != name, ls, "targets", "names \"" + name + "\" twice");
      }
      lora.targets.push_back(name);
    }
  }
  return lora;
}

ModelConfig parse_config(const json& obj, const std::string& source) {
  ModelConfig c = read_model_keys(Reader{obj, source});
  complete_and_check(c, obj, source);
  if (obj.contains("moe") && !obj.at("moe").is_null())
    c.moe = parse_moe(obj.at("moe"), source, c.ffn_hidden);
  if (obj.contains("lora")) c.lora = parse_lora(obj.at("lora"), source);
  require(c.lora || !obj.contains("quantize"), source, "quantize", "is only valid with \"lora\" (a fine-tune config)");
  if (obj.contains("align")) {
    require(obj.at("align").is_object(), source, "align", "must be an object");
    c.align = obj.at("align").dump();
  }
  if (obj.contains("reward")) {
    require(obj.at("reward").is_object(), source, "reward", "must be an object");
    c.reward = obj.at("reward").dump();
  }
  if (obj.contains("rl")) {
    require(obj.at("rl").is_object(), source, "rl", "must be an object");
    c.rl = obj.at("rl").dump();
  }
  require_parameter_limit(c, source);
  return c;
}

}  // namespace

ModelConfig ModelConfig::from_file(const std::string& path) {
  constexpr uintmax_t kMaxFileBytes = 16 << 20;  // a config is a few hundred bytes
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  EMBER_CHECK(ec || size <= kMaxFileBytes, path, ": ", size,
              " bytes is too large for a model config file (at most 16 MiB)");
  return from_json(read_file(path, "model config file", kMaxConfigFileBytes), path);
}

std::string ModelConfig::to_json() const {
  json j = {{"vocab_size", vocab_size},   {"d_model", d_model},
            {"n_layers", n_layers},       {"n_heads", n_heads},
            {"n_kv_heads", n_kv_heads},   {"head_dim", head_dim},
            {"ffn_hidden", ffn_hidden},   {"ffn_act", ffn_act},
            {"norm", norm},               {"norm_eps", norm_eps},
            {"pos", pos},                 {"rope_theta", rope_theta},
            {"max_seq_len", max_seq_len}, {"qk_norm", qk_norm},
            {"bias", bias},               {"tie_embeddings", tie_embeddings},
            {"parallel_block", parallel_block}, {"sliding_window", sliding_window},
            {"global_every", global_every}, {"attn_softcap", attn_softcap},
            {"final_softcap", final_softcap}, {"z_loss_coef", z_loss_coef},
            {"dropout", dropout}};
  if (moe) {
    j["moe"] = {{"n_experts", moe->n_experts},       {"top_k", moe->top_k},
                {"expert_hidden", moe->expert_hidden}, {"n_shared", moe->n_shared},
                {"norm_topk_prob", moe->norm_topk_prob}, {"every", moe->every},
                {"aux_loss_coef", moe->aux_loss_coef},
                {"router_z_loss_coef", moe->router_z_loss_coef}};
  } else {
    j["moe"] = nullptr;
  }
  if (lora) {
    j["lora"] = {{"r", lora->r}, {"alpha", lora->alpha}, {"dropout", lora->dropout}, {"targets", lora->targets}};
    j["quantize"] = quantize;
  }
  if (!align.empty()) j["align"] = json::parse(align);
  if (!reward.empty()) j["reward"] = json::parse(reward);
  if (!rl.empty()) j["rl"] = json::parse(rl);
  return j.dump(2);
}

bool ModelConfig::has_value_head() const {
  if (rl.empty()) return false;
  const json j = json::parse(rl);
  return j.value("algo", std::string()) == "ppo";
}

bool ModelConfig::layer_is_moe(int64_t layer) const {
  return moe.has_value() && layer % moe->every == moe->every - 1;
}

int64_t ModelConfig::layer_window(int64_t layer) const {
  if (sliding_window <= 0) return 0;
  if (global_every > 0 && layer % global_every == global_every - 1) return 0;
  return sliding_window;
}

}  // namespace ember::nn
