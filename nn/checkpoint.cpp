// Checkpoint read/write over core::H5File, with atomic replacement.
#include "nn/checkpoint.h"

#include <cstdio>
#include <filesystem>

#include "core/io/hdf5_file.h"
#include "core/io/atomic_file.h"

namespace ember::apps {
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

}  // namespace ember::apps
