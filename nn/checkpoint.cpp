// Checkpoint read/write over core::H5File, with atomic replacement, and the
// model a checkpoint holds (its tensors checked against its config).
#include "nn/checkpoint.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/io/hdf5_file.h"
#include "core/io/atomic_file.h"

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
    for (const auto& [name, t] : ckpt.model) f.write_tensor("/model/" + name, t.to(DType::Float32));
    if (ckpt.optim_step) {
      for (const auto& [name, t] : ckpt.optim) f.write_tensor("/optim/" + name, t.to(DType::Float32));
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

Checkpoint read_checkpoint(const std::string& path, bool with_optim) {
  H5File f(path, H5File::Mode::Read);
  check_header(f);
  Checkpoint c;
  c.config = nn::ModelConfig::from_json(f.read_attr_string("/", "config"), path + ": config");
  EMBER_CHECK(f.exists("/model"), path, ": checkpoint has no /model group");
  for (const std::string& name : f.list("/model")) c.model[name] = f.read_tensor("/model/" + name);
  if (with_optim && f.exists("/optim") && f.has_attr("/optim", "step")) {
    c.optim_step = f.read_attr_int("/optim", "step");
    for (const auto& [name, t] : c.model) {
      for (const char* m : {"exp_avg", "exp_avg_sq"}) {
        const std::string key = name + "/" + m;
        EMBER_CHECK(f.exists("/optim/" + key), path, ": optimizer state has no ", key);
        c.optim[key] = f.read_tensor("/optim/" + key);
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

namespace {

// c.model against the parameters of `model`, a model of c.config.
void check_tensors_against(const Checkpoint& c, const std::string& path, const Module& model) {
  std::map<std::string, Shape> expected;
  for (const auto& [name, v] : model.named_parameters()) expected.emplace(name, v.shape());
  for (const auto& [name, t] : c.model) {
    if (!expected.count(name)) {
      const bool tied_head = name == "lm_head.weight" && c.config.tie_embeddings;
      throw Error(path + ": unexpected tensor /model/" + name + " of shape " + shape_str(t.shape()) +
                  (tied_head ? " (the config ties the output layer to the embedding: tie_embeddings is true)"
                             : " (not a parameter of the model its config describes)"));
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

}  // namespace

void check_finite(const Tensor& t, const std::string& what) {
  const Tensor f = t.to(DType::Float32).contiguous();
  const float* p = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i) {
    EMBER_CHECK(std::isfinite(p[i]), what, " holds a non-finite value (", p[i], " at flat index ", i, ")");
  }
}

void check_model_tensors(const Checkpoint& c, const std::string& path) {
  check_tensors_against(c, path, Transformer(c.config, 0));
}

std::unique_ptr<Transformer> model_from_checkpoint(const Checkpoint& c, const std::string& path) {
  auto model = std::make_unique<Transformer>(c.config, 0);
  check_tensors_against(c, path, *model);
  model->load_state_dict(c.model);
  model->eval();
  return model;
}

}  // namespace ember::nn
