// ember state dict <-> Hugging Face weight names and layouts.
// Llama / Qwen3 / Qwen3-MoE use the names of docs/model.md#parameter-names already (model.*,
// self_attn.{q,k,v,o}_proj, q_norm/k_norm, mlp.gate, mlp.experts.{e}.*).
// GPT-2 (modeling_gpt2.py): transformer.wte / wpe / h.{i}.ln_1, attn.c_attn,
// attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj / ln_f. Its Conv1D computes
// y = x W + b with W [in, out], the transpose of ember's Linear [out, in];
// c_attn is q, k and v side by side: W [d, 3d], bias [3d].
#include <string>

#include "apps/interop/hf_format.h"
#include "core/error.h"

namespace ember::apps {
namespace {

const Tensor& need(const std::map<std::string, Tensor>& m, const std::string& name) {
  auto it = m.find(name);
  EMBER_CHECK(it != m.end(), "missing tensor \"", name, "\"");
  return it->second;
}

Tensor transposed(const Tensor& w) {
  return w.transpose(0, 1).contiguous();
}

// Concatenates tensors along their last dim (1-D biases or 2-D Conv1D weights).
Tensor cat_last(const std::vector<Tensor>& parts) {
  Shape shape = parts[0].shape();
  const int64_t last = static_cast<int64_t>(shape.size()) - 1;
  int64_t total = 0;
  for (const Tensor& p : parts) total += p.size(last);
  shape[last] = total;
  Tensor out = Tensor::empty(shape, DType::Float32);
  int64_t at = 0;
  for (const Tensor& p : parts) {
    out.narrow(last, at, p.size(last)).copy_(p);
    at += p.size(last);
  }
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::map<std::string, Tensor> hf_tensors_from_ember(const nn::ModelConfig& cfg, HfArch arch,
                                                    const std::map<std::string, Tensor>& s) {
  if (arch != HfArch::GPT2) return s;  // same names, same [out, in] layout
  std::map<std::string, Tensor> o;
  o["transformer.wte.weight"] = need(s, "model.embed_tokens.weight");
  o["transformer.wpe.weight"] = need(s, "model.embed_positions.weight");
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    const std::string e = "model.layers." + std::to_string(i) + ".",
                      h = "transformer.h." + std::to_string(i) + ".";
    for (const char* p : {"weight", "bias"}) {
      o[h + "ln_1." + p] = need(s, e + "input_layernorm." + p);
      o[h + "ln_2." + p] = need(s, e + "post_attention_layernorm." + p);
    }
    const std::string a = e + "self_attn.";
    o[h + "attn.c_attn.weight"] = cat_last({transposed(need(s, a + "q_proj.weight")),
                                            transposed(need(s, a + "k_proj.weight")),
                                            transposed(need(s, a + "v_proj.weight"))});
    o[h + "attn.c_attn.bias"] = cat_last(
        {need(s, a + "q_proj.bias"), need(s, a + "k_proj.bias"), need(s, a + "v_proj.bias")});
    o[h + "attn.c_proj.weight"] = transposed(need(s, a + "o_proj.weight"));
    o[h + "attn.c_proj.bias"] = need(s, a + "o_proj.bias");
    o[h + "mlp.c_fc.weight"] = transposed(need(s, e + "mlp.up_proj.weight"));
    o[h + "mlp.c_fc.bias"] = need(s, e + "mlp.up_proj.bias");
    o[h + "mlp.c_proj.weight"] = transposed(need(s, e + "mlp.down_proj.weight"));
    o[h + "mlp.c_proj.bias"] = need(s, e + "mlp.down_proj.bias");
  }
  o["transformer.ln_f.weight"] = need(s, "model.norm.weight");
  o["transformer.ln_f.bias"] = need(s, "model.norm.bias");
  if (!cfg.tie_embeddings) o["lm_head.weight"] = need(s, "lm_head.weight");
  return o;
}

namespace {

// Llama / Qwen3 / Qwen3-MoE files hold ember's names already: drops HF's rotary buffers and a
// tied lm_head (HF ties it over the file's).
std::map<std::string, Tensor> drop_llama_buffers(const nn::ModelConfig& cfg,
                                                 std::map<std::string, Tensor> hf) {
  for (auto it = hf.begin(); it != hf.end();) {
    const bool tied_head =
        cfg.tie_embeddings && it->first == "lm_head.weight";  // HF ties it over the file's
    it = tied_head || ends_with(it->first, "rotary_emb.inv_freq") ? hf.erase(it) : std::next(it);
  }
  return hf;
}

// GPT-2 tensors under "transformer." names (files from GPT2Model, the Hub's gpt2, have no such
// prefix), without the mask buffers or a tied lm_head.
std::map<std::string, Tensor> gpt2_prefixed(const nn::ModelConfig& cfg,
                                            const std::map<std::string, Tensor>& hf) {
  std::map<std::string, Tensor> g;
  for (auto& [name, t] : hf) {
    if (ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias"))
      continue;  // mask buffers
    if (name == "lm_head.weight") {
      if (!cfg.tie_embeddings) g[name] = t;
      continue;
    }
    g[name.rfind("transformer.", 0) == 0 ? name : "transformer." + name] = t;
  }
  return g;
}

// Removes tensor `name` from g and returns it; a missing one is an Error naming the source.
struct TensorTaker {
  std::map<std::string, Tensor>& g;
  const std::string& source;
  Tensor operator()(const std::string& name) {
    auto it = g.find(name);
    EMBER_CHECK(it != g.end(), source, ": missing tensor \"", name, "\"");
    Tensor t = it->second;
    g.erase(it);
    return t;
  }
};

// GPT-2 layer i in ember's names and layouts: q, k, v split out of c_attn, Conv1D weights
// transposed to Linear's [out, in].
void gpt2_layer_from_hf(const nn::ModelConfig& cfg, int64_t i, TensorTaker& take,
                        std::map<std::string, Tensor>& s) {
  const int64_t d = cfg.d_model;
  const std::string& source = take.source;
  const std::string e = "model.layers." + std::to_string(i) + ".",
                    h = "transformer.h." + std::to_string(i) + ".";
  for (const char* p : {"weight", "bias"}) {
    s[e + "input_layernorm." + p] = take(h + "ln_1." + p);
    s[e + "post_attention_layernorm." + p] = take(h + "ln_2." + p);
  }
  const Tensor w = take(h + "attn.c_attn.weight"), b = take(h + "attn.c_attn.bias");
  EMBER_CHECK(w.shape() == Shape({d, 3 * d}) && b.shape() == Shape({3 * d}), source, ": ", h,
              "attn.c_attn weight/bias must be [", d, ", ", 3 * d, "] / [", 3 * d, "], got ",
              shape_str(w.shape()), " / ", shape_str(b.shape()));
  const char* names[3] = {"q_proj", "k_proj", "v_proj"};
  for (int64_t k = 0; k < 3; ++k) {
    s[e + "self_attn." + names[k] + ".weight"] = transposed(w.narrow(1, k * d, d));
    s[e + "self_attn." + names[k] + ".bias"] = b.narrow(0, k * d, d).contiguous();
  }
  for (const auto& [hf_name, ember_name] :
       {std::pair{"attn.c_proj", "self_attn.o_proj"}, std::pair{"mlp.c_fc", "mlp.up_proj"},
        std::pair{"mlp.c_proj", "mlp.down_proj"}}) {
    const Tensor cw = take(h + hf_name + ".weight");
    EMBER_CHECK(cw.dim() == 2, source, ": ", h, hf_name, ".weight must be 2-D, got ",
                shape_str(cw.shape()));
    s[e + ember_name + ".weight"] = transposed(cw);
    s[e + ember_name + ".bias"] = take(h + hf_name + ".bias");
  }
}

}  // namespace

std::map<std::string, Tensor> ember_tensors_from_hf(const nn::ModelConfig& cfg, HfArch arch,
                                                    std::map<std::string, Tensor> hf,
                                                    const std::string& source) {
  if (arch != HfArch::GPT2) return drop_llama_buffers(cfg, std::move(hf));
  std::map<std::string, Tensor> g = gpt2_prefixed(cfg, hf);
  TensorTaker take{g, source};
  std::map<std::string, Tensor> s;
  s["model.embed_tokens.weight"] = take("transformer.wte.weight");
  s["model.embed_positions.weight"] = take("transformer.wpe.weight");
  for (int64_t i = 0; i < cfg.n_layers; ++i) gpt2_layer_from_hf(cfg, i, take, s);
  s["model.norm.weight"] = take("transformer.ln_f.weight");
  s["model.norm.bias"] = take("transformer.ln_f.bias");
  if (!cfg.tie_embeddings) s["lm_head.weight"] = take("lm_head.weight");
  EMBER_CHECK(g.empty(), source, ": unexpected tensor \"", g.empty() ? "" : g.begin()->first,
              "\" for GPT2LMHeadModel");
  return s;
}

}  // namespace ember::apps
