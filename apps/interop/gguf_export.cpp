// export_gguf: reads a checkpoint (merging a fine-tune's adapters), picks the llama.cpp
// architecture, writes the general.*, <arch>.* and tokenizer.* keys and the tensors into one
// GGUF v3 file (gguf_writer.h), checked whole before the file is written.
#include <filesystem>
#include <optional>

#include "apps/interop/gguf_export.h"
#include "apps/interop/gguf_writer.h"
#include "apps/interop/new_output.h"
#include "core/error.h"
#include "data/tokenizer/stored_tokenizer.h"
#include "nn/adapters/adapters.h"
#include "nn/checkpoint_file.h"

namespace ember::apps {
namespace {

// llama.cpp's general.file_type (llama_ftype) of each --weights.
uint32_t file_type(const std::string& weights) {
  if (weights == "bf16") return 32;  // LLAMA_FTYPE_MOSTLY_BF16
  if (weights == "int8") return 7;   // LLAMA_FTYPE_MOSTLY_Q8_0
  return 0;                          // LLAMA_FTYPE_ALL_F32
}

void add_general(gguf::Writer& w, const std::string& arch, const std::string& name, const std::string& weights) {
  w.add_string("general.architecture", arch);
  w.add_string("general.name", name);
  w.add_u32("general.alignment", static_cast<uint32_t>(gguf::kAlignment));
  w.add_u32("general.file_type", file_type(weights));
}

// The <arch>.* hyperparameters llama.cpp reads for `arch`.
void add_hparams(gguf::Writer& w, const std::string& a, const nn::ModelConfig& c) {
  const auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  w.add_u32(a + ".context_length", u32(c.max_seq_len));
  w.add_u32(a + ".embedding_length", u32(c.d_model));
  w.add_u32(a + ".block_count", u32(c.n_layers));
  w.add_u32(a + ".feed_forward_length", u32(c.moe ? c.moe->expert_hidden : c.ffn_hidden));
  w.add_u32(a + ".attention.head_count", u32(c.n_heads));
  w.add_u32(a + ".attention.head_count_kv", u32(c.n_kv_heads));
  w.add_u32(a + ".attention.key_length", u32(c.head_dim));
  w.add_u32(a + ".attention.value_length", u32(c.head_dim));
  w.add_u32(a + ".vocab_size", u32(c.vocab_size));
  if (a == "gpt2") {
    w.add_f32(a + ".attention.layer_norm_epsilon", static_cast<float>(c.norm_eps));
    return;
  }
  w.add_f32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.norm_eps));
  w.add_f32(a + ".rope.freq_base", static_cast<float>(c.rope_theta));
  w.add_u32(a + ".rope.dimension_count", u32(c.head_dim));
  if (c.moe) {
    w.add_u32(a + ".expert_count", u32(c.moe->n_experts));
    w.add_u32(a + ".expert_used_count", u32(c.moe->top_k));
    w.add_u32(a + ".expert_feed_forward_length", u32(c.moe->expert_hidden));
  }
}

std::string model_name(const std::string& checkpoint) {
  const std::filesystem::path p(checkpoint);
  const std::string run = p.parent_path().filename().string();
  return run.empty() ? p.stem().string() : run + "/" + p.stem().string();
}

}  // namespace

GgufExport export_gguf(const std::string& checkpoint, const std::string& out_file,
                       const std::string& weights, const std::string& moved_base) {
  EMBER_CHECK(weights == "float32" || weights == "bf16" || weights == "int8", "--weights ", weights,
              ": expected float32, bf16 or int8");
  require_new_output("export", "--out", out_file, OutputKind::File);
  nn::Checkpoint c = nn::read_checkpoint(checkpoint, /*with_optim=*/false);
  const bool finetuned = c.config.lora.has_value();
  const nn::ModelConfig config = finetuned ? nn::merged_config(c.config) : c.config;
  GgufExport done;
  done.arch = gguf_arch_for(config);  // fails before any work
  const std::optional<data::Tokenizer> tokenizer =
      data::stored_tokenizer(c.tokenizer_json, config.vocab_size, checkpoint);
  EMBER_CHECK(tokenizer, checkpoint, ": the checkpoint stores no tokenizer, and a GGUF file needs one "
              "(llama.cpp tokenizes the text itself)");
  EMBER_CHECK(static_cast<int64_t>(tokenizer->vocab_size()) <= config.vocab_size, checkpoint,
              ": the tokenizer has more tokens than the model's vocab_size");
  // A plain checkpoint's tensors are checked (names, shapes, finite) and used as read: no model
  // is built (its random initialisation took most of the time). A fine-tune's merged weights
  // come from its model (base + adapters).
  std::map<std::string, Tensor> state;
  if (finetuned) {
    state = nn::merged_state_dict(*nn::model_from_checkpoint(c, checkpoint, moved_base));
    c.model.clear();
  } else {
    nn::check_model_tensors(c, checkpoint);
    state = std::move(c.model);
  }
  gguf::Writer w;
  add_general(w, done.arch, model_name(checkpoint), weights);
  add_hparams(w, done.arch, config);
  gguf::add_tokenizer(w, *tokenizer, config.vocab_size);
  gguf::add_tensors(w, config, done.arch, weights, state);
  w.write_new_file(out_file);
  done.file_bytes = w.header().size() + w.data_bytes();
  done.tensors = w.tensor_count();
  return done;
}

}  // namespace ember::apps
