// `ember export --format gguf`: an ember checkpoint as one GGUF v3 file that llama.cpp
// (and ollama, LM Studio, node-llama-cpp) loads: the llama.cpp architecture whose graph
// computes the model's math exactly, the tensors under llama.cpp's converter's names,
// and the byte-level BPE tokenizer with its merges, special tokens and ChatML template
// (docs/interop.md#running-an-ember-model-in-llamacpp).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "core/tensor.h"
#include "nn/config.h"

namespace ember::data {
class Tokenizer;
}

namespace ember::apps {

// The llama.cpp architecture that computes `config` exactly: "llama" (RMSNorm, RoPE,
// SwiGLU, MHA/GQA, dense or MoE), "qwen3" / "qwen3moe" (the same with QK-norm), "gpt2"
// (LayerNorm, learned positions, tanh GELU). Any other config is an Error naming the
// feature no GGUF architecture expresses.
std::string gguf_arch_for(const nn::ModelConfig& config);

struct GgufExport {
  std::string arch;
  uint64_t file_bytes = 0;
  int64_t tensors = 0;
};

// Writes out_file (which must not exist) from `checkpoint`; weights: "float32", "bf16" or
// "int8" (Q8_0 for 2-D weights whose rows are a multiple of 32 long). A fine-tune checkpoint
// exports as its merged model. Everything is checked before the file is written; the file
// appears complete or not at all.
GgufExport export_gguf(const std::string& checkpoint, const std::string& out_file,
                       const std::string& weights, const std::string& moved_base = "");

namespace gguf {
class Writer;
// Adds the tokenizer.* keys for `tokenizer` over a model of vocab_size ids (ids past the
// tokenizer's are unused padding tokens). An Error for a tokenizer llama.cpp's GPT-2
// pre-tokenizer would split differently.
void add_tokenizer(Writer& w, const data::Tokenizer& tokenizer, int64_t vocab_size);
// Adds the model's tensors, renamed and laid out for `arch`, in the weight type.
void add_tensors(Writer& w, const nn::ModelConfig& config, const std::string& arch,
                 const std::string& weights, std::map<std::string, Tensor>& state);
}  // namespace gguf

}  // namespace ember::apps
