// Checkpoints in the layout of docs/formats.md#checkpoints (HDF5):
//   /            attrs format = "ember-checkpoint", version = 1, config = JSON
//   /model/<name>                      float32 parameters
//   /optim/<name>/exp_avg, exp_avg_sq  AdamW moments;  /optim attr step
//   /optim/<name>                      attr step: the updates that parameter took
//   /train       attrs: step, and state = JSON of everything exact resume needs
//   /tokenizer/json                    the tokenizer (Hugging Face tokenizer.json text)
// A fine-tune checkpoint (docs/formats.md#fine-tune-checkpoints; "lora") holds only the trainable
// tensors in /model (nn/adapters/adapters.h) and root attrs base (the base checkpoint's absolute path)
// and base_sha256 (sha256 of the base file, lowercase hex).
// Writes are atomic: a temporary file in the same folder, fsync, rename.
// A whole-file CRC-32C in the HDF5 user block is verified before each read
// (core/io/file_digest.h).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "nn/config.h"
#include "nn/transformer.h"

namespace ember {
class H5File;  // core/io/hdf5_file.h
}  // namespace ember

namespace ember::nn {

// Tensors produced one at a time for a writer: calls put(name, tensor) for each, so the
// writer stores each before the next exists (a ZeRO run's moments, gathered rank by rank).
using TensorPut = std::function<void(const std::string& name, const Tensor& value)>;
using TensorStream = std::function<void(const TensorPut& put)>;

struct Checkpoint {
  nn::ModelConfig config;
  std::map<std::string, Tensor> model;   // name -> tensor
  TensorStream model_stream;            // write_checkpoint only: more of model, produced as written
  std::map<std::string, Tensor> optim;   // "<name>/exp_avg", "<name>/exp_avg_sq"
  TensorStream optim_stream;            // write_checkpoint only: more of optim, produced as written
  std::optional<int64_t> optim_step;    // present when /optim is
  // "<name>" -> updates that parameter took (optim::Optimizer::param_steps);
  // empty for checkpoints written before per-parameter counts.
  std::map<std::string, int64_t> optim_param_steps;
  std::optional<std::string> train_state;  // JSON (apps/train/save.cpp owns its keys)
  int64_t train_step = 0;
  std::string tokenizer_json;           // empty: none stored
  std::string base, base_sha256;        // a fine-tune's base checkpoint; empty for plain ones
};

// Writes atomically to `path`; never leaves a partial file under that name.
void write_checkpoint(const std::string& path, const Checkpoint& ckpt);
// Reads everything present; `with_optim` false skips the moments (eval, generate).
// optim_tensors false reads /optim's step counts and checks that every moment is there, but
// leaves the tensors in the file (read them one at a time with CheckpointOptimReader).
Checkpoint read_checkpoint(const std::string& path, bool with_optim = true, bool optim_tensors = true);
// The moments of a checkpoint one at a time: reader("<name>/exp_avg") is /optim/<name>/exp_avg
// (an undefined Tensor when absent), so a resume never holds the whole state twice
// (optim::Optimizer::load_state). Copies share the open file.
class CheckpointOptimReader {
 public:
  explicit CheckpointOptimReader(const std::string& path);
  Tensor operator()(const std::string& key) const;

 private:
  std::shared_ptr<H5File> file_;
};
// Only the root attrs: validates format/version and parses the config.
nn::ModelConfig read_checkpoint_config(const std::string& path);

// The tensors of c.model against the model c.config describes: exactly its
// parameter names, each of its shape, float and finite. An Error names the file
// (path), the tensor, and the expected and found shape. For a fine-tune checkpoint
// (c.config.lora set): exactly the trainable tensors (adapters, added rows) of the base
// model with adapters; the base file is not read.
void check_model_tensors(const Checkpoint& c, const std::string& path);
// Every value of t (as float32) finite, else an Error "<what> holds a
// non-finite value (v at flat index i)"; what names the tensor and its file.
void check_finite(const Tensor& t, const std::string& what);
// The model of a checkpoint (after check_model_tensors), float32, eval mode. A fine-tune
// checkpoint: its base (c.base, whose sha256 must be c.base_sha256; an Error "<path>: its base
// <base> is missing; if it moved, give its new path with --base ..." / "... has changed
// (sha256 X, expected Y)" / "<path>: records no sha256 of its base ...") is loaded, grown by the
// added rows (add_vocab_rows), given adapters (add_adapters, seed 0) and c.model's tensors
// loaded. moved_base (a command's --base), when given, is read in place of c.base: the base
// moved, and the file must have sha256 c.base_sha256 (an Error naming both hashes). A plain
// checkpoint ignores it.
// Under tensor parallelism (tp) the base is read as load_model_weights reads it and each rank
// keeps the shards of the trained tensors; with a pipeline stage (a fine-tune checkpoint only)
// the stage's part of the model, its trained tensors read from c.
std::unique_ptr<Transformer> model_from_checkpoint(const Checkpoint& c, const std::string& path,
                                                   const std::string& moved_base = "",
                                                   TensorParallel tp = {}, PipelineStage stage = {});
// The model of cfg (built from seed) with the plain checkpoint `path`'s /model tensors as its
// parameters, read one at a time into weights left uninitialized (SkipInitGuard): exactly its
// parameter names, each of its shape, finite. With quantize "nf4"/"nf4-dq" each block's
// projections go to NF4 (quantize_block) as soon as that block's tensors are read and their
// float32 storage is returned to the system, so the float32 blocks are never all resident.
// Under tensor parallelism (tp) the model holds its rank's shards: each tensor is read whole and
// cut; a quantized block's projections are kept whole until the block is read, quantized whole as
// one rank quantizes them and cut (quantize_block), so one block's float32 weights are resident.
// With a pipeline stage (nn/pipeline_stage.h): the stage's part of the model (the file holds
// every tensor).
std::unique_ptr<Transformer> load_model_weights(const ModelConfig& cfg, uint64_t seed,
                                                const std::string& path,
                                                const std::string& quantize = "none",
                                                TensorParallel tp = {}, PipelineStage stage = {});
// The base model of a fine-tune config before its vocabulary growth: the config with lora,
// quantize, align, reward and vocab_size (base_vocab_size) of the base.
ModelConfig finetune_base_config(const ModelConfig& finetune_config, int64_t base_vocab_size);

}  // namespace ember::nn
