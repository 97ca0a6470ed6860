// gguf_arch_for: which llama.cpp architecture computes an ember config exactly, and the
// refusal naming the feature when none does (docs/interop.md#running-an-ember-model-in-llamacpp).
#include "apps/interop/gguf_export.h"

#include "core/error.h"

namespace ember::apps {
namespace {

// The first feature of `c` that no GGUF architecture computes, or "".
std::string unsupported_feature(const nn::ModelConfig& c) {
  if (!c.reward.empty()) return "a reward model (its head scores, llama.cpp's heads predict tokens)";
  if (c.parallel_block) return "parallel_block (attention and MLP from one norm)";
  if (c.sliding_window > 0) return "sliding_window attention";
  if (c.attn_softcap > 0) return "attn_softcap (soft-capped attention scores)";
  if (c.final_softcap > 0) return "final_softcap (soft-capped logits)";
  if (c.pos == "sinusoidal" || c.pos == "none") return "pos \"" + c.pos + "\"";
  if (c.moe) {
    if (c.moe->n_shared > 0) return "MoE shared experts (n_shared)";
    if (c.moe->every != 1) return "MoE on some layers only (moe.every > 1)";
    if (!c.moe->norm_topk_prob) return "MoE without norm_topk_prob (llama.cpp renormalises the top-k)";
  }
  return "";
}

std::string rope_rmsnorm_arch(const nn::ModelConfig& c) {
  EMBER_CHECK(c.ffn_act == "swiglu", "export --format gguf: ffn_act \"", c.ffn_act, "\" with RMSNorm and "
              "RoPE has no GGUF architecture (llama and qwen3 compute SwiGLU)");
  EMBER_CHECK(!c.bias, "export --format gguf: bias (Linear biases) with RMSNorm and RoPE has no GGUF "
              "architecture that computes it exactly (llama and qwen3 have none)");
  if (c.qk_norm) return c.moe ? "qwen3moe" : "qwen3";
  return "llama";
}

std::string gpt2_arch(const nn::ModelConfig& c) {
  EMBER_CHECK(c.ffn_act == "gelu_tanh", "export --format gguf: ffn_act \"", c.ffn_act, "\" with LayerNorm "
              "and learned positions has no GGUF architecture (gpt2 computes gelu_tanh)");
  EMBER_CHECK(!c.qk_norm, "export --format gguf: qk_norm with LayerNorm has no GGUF architecture");
  EMBER_CHECK(!c.moe, "export --format gguf: MoE with LayerNorm has no GGUF architecture");
  EMBER_CHECK(c.n_heads * c.head_dim == c.d_model, "export --format gguf: head_dim * n_heads != d_model "
              "has no GGUF architecture with LayerNorm (gpt2 needs them equal)");
  return "gpt2";
}

}  // namespace

std::string gguf_arch_for(const nn::ModelConfig& c) {
  const std::string feature = unsupported_feature(c);
  EMBER_CHECK(feature.empty(), "export --format gguf: ", feature, " has no GGUF architecture that "
              "llama.cpp computes exactly; export --format hf instead");
  if (c.norm == "rmsnorm" && c.pos == "rope") return rope_rmsnorm_arch(c);
  if (c.norm == "layernorm" && c.pos == "learned") return gpt2_arch(c);
  EMBER_CHECK(false, "export --format gguf: norm \"", c.norm, "\" with pos \"", c.pos, "\" has no GGUF "
              "architecture (llama/qwen3: rmsnorm + rope; gpt2: layernorm + learned)");
  return "";
}

}  // namespace ember::apps
