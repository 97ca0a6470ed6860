// Checkpoint read/write over core::H5File, with atomic replacement, and the
// model a checkpoint holds (its tensors checked against its config).
#include "nn/checkpoint_file.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/allocator.h"
#include "core/io/atomic_file.h"
#include "core/io/hdf5_file.h"
#include "core/io/sha256.h"
#include "autograd/grad_mode.h"
#include "nn/adapters/adapters.h"
#include "nn/sizing/parameter_layout.h"
#include "nn/parallel_plan.h"
#include "nn/skip_init.h"

namespace ember::nn {
namespace fs = std::filesystem;

namespace {

void check_header(const H5File& f) {
  EMBER_CHECK(f.has_attr("/", "format") && f.read_attr_string("/", "format") == "ember-checkpoint",
              f.path(), ": not an ember checkpoint (root attribute format != \"ember-checkpoint\")");
  EMBER_CHECK(f.has_attr("/", "version") && f.read_attr_int("/", "version") == 1, f.path(),
              ": unsupported checkpoint version (expected 1)");
  EMBER_CHECK(f.has_attr("/", "config"), f.path(), ": checkpoint has no config attribute");
}

}  // namespace

void write_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp_name = target.filename().string();
  tmp_name.insert(tmp_name.begin(), '.');
  tmp_name.append(".tmp");
  const std::string tmp = (dir / tmp_name).string();
  try {
    H5File f(tmp, H5File::Mode::Create);
    f.write_attr("/", "format", std::string("ember-checkpoint"));
    f.write_attr("/", "version", int64_t{1});
    f.write_attr("/", "config", ckpt.config.to_json());
    if (!ckpt.base.empty()) {
      f.write_attr("/", "base", ckpt.base);
      f.write_attr("/", "base_sha256", ckpt.base_sha256);
    }
    for (const auto& [name, t] : ckpt.model) f.write_tensor("/model/" + name, t.to(DType::Float32));
    if (ckpt.model_stream) {
      ckpt.model_stream([&f](const std::string& name, const Tensor& t) {
        f.write_tensor("/model/" + name, t.to(DType::Float32));
      });
    }
    if (ckpt.optim_step) {
      for (const auto& [name, t] : ckpt.optim) f.write_tensor("/optim/" + name, t.to(DType::Float32));
      if (ckpt.optim_stream) {
        ckpt.optim_stream([&f](const std::string& name, const Tensor& t) {
          f.write_tensor("/optim/" + name, t.to(DType::Float32));
        });
      }
      f.write_attr("/optim", "step", *ckpt.optim_step);
      for (const auto& [name, n] : ckpt.optim_param_steps) {
        f.write_attr("/optim/" + name, "step", n);
      }
    }
    if (ckpt.train_state) {
      f.write_attr("/train", "step", ckpt.train_step);
      f.write_attr("/train", "state", *ckpt.train_state);
    }
    if (!ckpt.tokenizer_json.empty()) f.write_string("/tokenizer/json", ckpt.tokenizer_json);
    f.close();  // seals the checksum
    commit_temporary_file(tmp, path);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

nn::ModelConfig read_checkpoint_config(const std::string& path) {
  H5File f(path, H5File::Mode::Read);
  check_header(f);
  return nn::ModelConfig::from_json(f.read_attr_string("/", "config"), path + ": config");
}

Checkpoint read_checkpoint(const std::string& path, bool with_optim, bool optim_tensors) {
  H5File f(path, H5File::Mode::Read);
  check_header(f);
  Checkpoint c;
  c.config = nn::ModelConfig::from_json(f.read_attr_string("/", "config"), path + ": config");
  if (f.has_attr("/", "base")) c.base = f.read_attr_string("/", "base");
  if (f.has_attr("/", "base_sha256")) c.base_sha256 = f.read_attr_string("/", "base_sha256");
  EMBER_CHECK(f.exists("/model"), path, ": checkpoint has no /model group");
  for (const std::string& name : f.list("/model")) c.model[name] = f.read_tensor("/model/" + name);
  if (with_optim && f.exists("/optim") && f.has_attr("/optim", "step")) {
    c.optim_step = f.read_attr_int("/optim", "step");
    for (const auto& [name, t] : c.model) {
      for (const char* m : {"exp_avg", "exp_avg_sq"}) {
        const std::string key = name + "/" + m;
        EMBER_CHECK(f.exists("/optim/" + key), path, ": optimizer state has no ", key);
        if (optim_tensors) c.optim[key] = f.read_tensor("/optim/" + key);
      }
      if (f.has_attr("/optim/" + name, "step")) {
        c.optim_param_steps[name] = f.read_attr_int("/optim/" + name, "step");
      }
    }
  }
  if (f.exists("/train") && f.has_attr("/train", "state")) {
    c.train_state = f.read_attr_string("/train", "state");
    c.train_step = f.read_attr_int("/train", "step");
  }
  if (f.exists("/tokenizer/json")) c.tokenizer_json = f.read_string("/tokenizer/json");
  return c;
}

CheckpointOptimReader::CheckpointOptimReader(const std::string& path)
    : file_(std::make_shared<H5File>(path, H5File::Mode::Read)) {
  check_header(*file_);
}

Tensor CheckpointOptimReader::operator()(const std::string& key) const {
  const std::string at = "/optim/" + key;
  return file_->exists(at) ? file_->read_tensor(at) : Tensor();
}

namespace {

// c.model against `expected` (name -> parameter): exactly those names, shapes, float, finite.
void check_tensors_against(const Checkpoint& c, const std::string& path,
                           const std::vector<std::pair<std::string, Variable>>& params) {
  std::map<std::string, Shape> expected;
  for (const auto& [name, v] : params) expected.emplace(name, v.shape());
  const char* what = c.config.lora ? " (not a trainable tensor of the fine-tune its config describes)"
                                   : " (not a parameter of the model its config describes)";
  for (const auto& [name, t] : c.model) {
    if (!expected.count(name)) {
      const bool tied_head = name == "lm_head.weight" && c.config.tie_embeddings;
      throw Error(path + ": unexpected tensor /model/" + name + " of shape " + shape_str(t.shape()) +
                  (tied_head ? " (the config ties the output layer to the embedding: tie_embeddings is true)"
                             : what));
    }
  }
  for (const auto& [name, shape] : expected) {
    const auto it = c.model.find(name);
    EMBER_CHECK(it != c.model.end(), path, ": missing tensor /model/", name, " (expected shape ",
                shape_str(shape), " from the checkpoint's config)");
    const Tensor& t = it->second;
    EMBER_CHECK(t.shape() == shape, path, ": tensor /model/", name, " has shape ", shape_str(t.shape()),
                ", expected ", shape_str(shape), " from the checkpoint's config");
    EMBER_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64, path, ": tensor /model/", name,
                " is ", dtype_name(t.dtype()), ", expected float32");
    check_finite(t, path + ": tensor /model/" + name);
  }
}

// The rows --add-chat-tokens added, read from the checkpoint's tensors (0 when none).
int64_t added_rows_of(const Checkpoint& c) {
  const auto it = c.model.find("model.embed_tokens.added_rows");
  return it == c.model.end() || it->second.dim() != 2 ? 0 : it->second.size(0);
}

// base (a plain model of the fine-tune's base config) grown and given adapters as the fine-tune
// was, and a reward fine-tune's score head (trained, so added after the adapters froze the rest).
void make_finetune(Transformer& model, const ModelConfig& ft, int64_t added_rows) {
  if (added_rows > 0) add_vocab_rows(model, added_rows, 0);
  add_adapters(model, *ft.lora, ft.quantize, 0);
  if (!ft.reward.empty()) {
    Generator unused(0);  // the stored head replaces its draw
    model.add_score_head(unused, ft.reward);
  }
  if (!ft.rl.empty()) {  // a PPO policy's value head: its stored tensor replaces the draw
    Generator unused(0);
    model.set_rl(ft.rl, ft.has_value_head() ? std::make_shared<ValueHead>(ft.d_model, unused) : nullptr);
  }
}

// "model.layers.<i>.<rest>" -> i; -1 for a tensor outside the blocks.
int64_t layer_of(const std::string& name) {
  const std::string prefix = "model.layers.";
  return name.rfind(prefix, 0) == 0 ? std::stoll(name.substr(prefix.size())) : -1;
}

// The tensors of c.model that pipeline stage `stage` answers for: its blocks', and, on the last
// stage, every other one. Each tensor of the file is checked by exactly one stage.
Checkpoint stage_tensors(const Checkpoint& c, const PipelineStage& stage) {
  Checkpoint out;
  out.config = c.config;
  for (const auto& [name, t] : c.model) {
    const int64_t layer = layer_of(name);
    const bool block = layer >= 0 && layer < c.config.n_layers;
    if (block ? layer >= stage.first_layer && layer < stage.first_layer + stage.n_layers : stage.last())
      out.model.emplace(name, t);
  }
  return out;
}

// f's /model/<name>: present, of shape `shape`, finite.
Tensor read_weight(const H5File& f, const std::string& name, const Shape& shape) {
  const std::string where = f.path() + ": tensor /model/" + name;
  EMBER_CHECK(f.exists("/model/" + name), f.path(), ": missing tensor /model/", name);
  const Tensor t = f.read_tensor("/model/" + name);
  EMBER_CHECK(t.shape() == shape, where, " has shape ", shape_str(t.shape()), ", expected ",
              shape_str(shape), " from the checkpoint's config");
  check_finite(t, where);
  return t;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::unique_ptr<Transformer> load_model_weights(const ModelConfig& cfg, uint64_t seed,
                                                const std::string& path,
                                                const std::string& quantize, TensorParallel tp,
                                                PipelineStage stage) {
  std::unique_ptr<Transformer> model;
  {
    SkipInitGuard skip;
    model = std::make_unique<Transformer>(cfg, seed, DType::Float32, tp, stage);
  }
  const H5File f(path, H5File::Mode::Read);
  auto params = model->named_parameters();
  const size_t stored = f.list("/model").size();
  // A pipeline stage holds part of the model: the file holds all of it.
  const size_t whole = model->stage().active() ? place_parameters(cfg, make_parallel_layout(cfg, 1, 1)).size()
                                               : params.size();
  EMBER_CHECK(stored == whole, path, ": /model holds ", stored,
              " tensors, but the model its config describes has ", whole, " parameters");
  std::map<std::string, Shape> whole_shape;  // under tensor parallelism: the whole tensors' shapes
  if (tp.active()) {
    for (const ParameterEntry& e : parameter_layout(cfg)) whole_shape.emplace(e.name, e.shape);
  }
  const bool quantized = quantize == "nf4" || quantize == "nf4-dq";
  std::map<std::string, Tensor> block_whole;  // tensor parallel, quantized: the block's projections
  NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& name = params[i].first;
    const Tensor t = read_weight(f, name, tp.active() ? whole_shape.at(name) : params[i].second.shape());
    const int64_t layer = layer_of(name);
    if (quantized && tp.active() && layer >= 0 && ends_with(name, "_proj.weight")) {
      block_whole.emplace(name, t);  // quantized whole, then cut (quantize_block)
    } else {
      const Tensor mine = tp.active() ? tensor_shard(t, tensor_split(name), tp.rank(), tp.size()) : t;
      params[i].second.data().copy_(mine);
    }
    params[i].second = Variable();  // the model holds the only reference: quantizing frees it
    const bool block_read =
        layer >= 0 && (i + 1 == params.size() || layer_of(params[i + 1].first) != layer);
    if (quantized && block_read) {
      quantize_block(*model, layer, quantize == "nf4-dq",
                     [&](const std::string& weight) { return block_whole.at(weight); });
      block_whole.clear();
      allocator_empty_cache();
    }
  }
  allocator_empty_cache();  // the read buffers
  return model;
}

namespace {

// The base checkpoint of fine-tune c, checked (present, the file it was fine-tuned on by its
// sha256, a plain checkpoint whose config is the fine-tune's without lora), as a model. A given
// moved_base is read in place of c.base (the base moved since).
std::unique_ptr<Transformer> load_base(const Checkpoint& c, const std::string& path,
                                       const std::string& moved_base, TensorParallel tp,
                                       PipelineStage stage) {
  EMBER_CHECK(!c.base.empty(), path, ": a fine-tune checkpoint (its config has \"lora\") must name its base "
              "(root attribute base)");
  EMBER_CHECK(!c.base_sha256.empty(), path, ": records no sha256 of its base ", c.base,
              " (root attribute base_sha256 missing or empty), so no file can be checked to be the base "
              "it was fine-tuned on");
  const std::string& base = moved_base.empty() ? c.base : moved_base;
  std::error_code ec;
  EMBER_CHECK(moved_base.empty() || fs::is_regular_file(moved_base, ec), "--base ", moved_base,
              ": no such file");
  EMBER_CHECK(fs::is_regular_file(c.base, ec) || !moved_base.empty(), path, ": its base ", c.base,
              " is missing; if it moved, give its new path with --base (checked against the sha256 the "
              "checkpoint records, ", c.base_sha256, ")");
  const std::string sha = sha256_file(base);
  EMBER_CHECK(sha == c.base_sha256 || !moved_base.empty(), path, ": its base ", c.base,
              " has changed (sha256 ", sha, ", expected ", c.base_sha256, ")");
  EMBER_CHECK(sha == c.base_sha256, "--base ", moved_base, ": sha256 ", sha, ", but ", path,
              " was fine-tuned on a base with sha256 ", c.base_sha256, " (", c.base, ")");
  ModelConfig base_config = read_checkpoint_config(base);
  base_config.align.clear();  // how the base itself was aligned, if it was
  base_config.rl.clear();
  EMBER_CHECK(!base_config.lora, path, ": its base ", base, " is itself a fine-tune checkpoint");
  EMBER_CHECK(c.config.vocab_size >= base_config.vocab_size, path, ": vocab_size ", c.config.vocab_size,
              " is smaller than its base's (", base_config.vocab_size, ")");
  const ModelConfig expect = finetune_base_config(c.config, base_config.vocab_size);
  EMBER_CHECK(base_config.to_json() == expect.to_json(), path, ": its base ", base,
              " has a different model config than the fine-tune was made from");
  return load_model_weights(base_config, 0, base, c.config.quantize, tp, stage);
}

}  // namespace

ModelConfig finetune_base_config(const ModelConfig& finetune_config, int64_t base_vocab_size) {
  ModelConfig c = finetune_config;
  c.lora.reset();
  c.quantize = "none";
  c.align.clear();
  c.reward.clear();  // the base has no score head: the fine-tune adds it
  c.rl.clear();      // nor a value head
  c.vocab_size = base_vocab_size;
  return c;
}

void check_finite(const Tensor& t, const std::string& what) {
  const Tensor f = t.to(DType::Float32).contiguous();
  const float* p = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i) {
    EMBER_CHECK(std::isfinite(p[i]), what, " holds a non-finite value (", p[i], " at flat index ", i, ")");
  }
}

void check_model_tensors(const Checkpoint& c, const std::string& path) {
  SkipInitGuard skip;  // only names and shapes are compared
  if (!c.config.lora) {
    check_tensors_against(c, path, Transformer(c.config, 0).named_parameters());
    return;
  }
  const int64_t added = added_rows_of(c);
  EMBER_CHECK(added < c.config.vocab_size, path, ": /model/model.embed_tokens.added_rows has ", added,
              " rows, not fewer than vocab_size ", c.config.vocab_size);
  Transformer model(finetune_base_config(c.config, c.config.vocab_size - added), 0);
  ModelConfig ft = c.config;
  ft.quantize = "none";  // the same trainable tensors, without quantizing
  make_finetune(model, ft, added);
  check_tensors_against(c, path, trainable_parameters(model));
}

std::unique_ptr<Transformer> model_from_checkpoint(const Checkpoint& c, const std::string& path,
                                                   const std::string& moved_base, TensorParallel tp,
                                                   PipelineStage stage) {
  if (c.config.lora) {
    std::unique_ptr<Transformer> model = load_base(c, path, moved_base, tp, stage);
    make_finetune(*model, c.config, c.config.vocab_size - model->config().vocab_size);
    const auto trainable = trainable_parameters(*model);
    if (tp.active()) {
      check_model_tensors(c, path);  // the whole tensors (each rank keeps its stage's shards)
    } else {
      check_tensors_against(model->stage().active() ? stage_tensors(c, model->stage()) : c, path, trainable);
    }
    NoGradGuard no_grad;
    for (const auto& [name, v] : trainable) {
      const Tensor& whole = c.model.at(name);
      v.data().copy_(tp.active() ? tensor_shard(whole, tensor_split(name), tp.rank(), tp.size()) : whole);
    }
    model->eval();
    return model;
  }
  auto model = std::make_unique<Transformer>(c.config, 0);
  check_tensors_against(c, path, model->named_parameters());
  model->load_state_dict(c.model);
  model->eval();
  return model;
}

}  // namespace ember::nn
