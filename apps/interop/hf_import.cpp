// import_hf: a Hugging Face model folder (config.json, model.safetensors or its
// shards, tokenizer.json) as an ember checkpoint holding the root attrs, /model
// and /tokenizer (valid for train --init-from). The config, memory, tokenizer and
// every weight are checked before the checkpoint is written.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "nn/checkpoint_file.h"
#include "apps/interop/hf_files.h"
#include "apps/interop/new_output.h"
#include "core/io/read_file.h"
#include "core/io/safetensors.h"
#include "core/io/json_message.h"
#include "data/tokenizer/tokenizer.h"
#include "nn/sizing/model_stats.h"
#include "nn/transformer.h"

namespace ember::apps {
namespace {
namespace fs = std::filesystem;

// Every tensor of DIR/model.safetensors, or of the shards DIR/model.safetensors.index.json
// maps them to, as float32.
std::map<std::string, Tensor> read_hf_weights(const fs::path& dir) {
  std::map<std::string, Tensor> out;
  const fs::path single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
  if (fs::exists(single)) {
    const SafetensorsFile f(single.string());
    for (const auto& [name, e] : f.entries()) out[name] = f.read(name);
    return out;
  }
  EMBER_CHECK(fs::exists(index), dir.string(),
              ": no model.safetensors or model.safetensors.index.json");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(index.string(), "safetensors index file", kMaxConfigFileBytes));
  } catch (const nlohmann::json::exception& e) {
    throw Error(index.string() + ": invalid JSON: " + json_message(e.what()));
  }
  EMBER_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(),
              index.string(), ": needs a \"weight_map\" object");
  std::map<std::string, std::vector<std::string>> by_shard;
  for (const auto& [name, shard] : j["weight_map"].items()) {
    EMBER_CHECK(shard.is_string(), index.string(), ": weight_map entry of \"", name,
                "\" is not a file name");
    const std::string file = shard.get<std::string>();
    EMBER_CHECK(fs::path(file).filename().string() == file, index.string(), ": shard \"", file,
                "\" must be a file name inside the folder");
    by_shard[file].push_back(name);
  }
  for (const auto& [file, names] : by_shard) {
    const SafetensorsFile f((dir / file).string());
    for (const std::string& name : names)
      out[name] = f.read(name);  // an Error when the shard lacks it
  }
  return out;
}

// The tokenizer to store, as JSON ("" when opt.no_tokenizer): opt.tokenizer or DIR/tokenizer.json,
// which must fit the model's vocab_size.
std::string hf_tokenizer_json(const fs::path& dir, const HfImportOptions& opt, int64_t vocab_size) {
  if (opt.no_tokenizer) return "";
  const fs::path tok = opt.tokenizer.empty() ? dir / "tokenizer.json" : fs::path(opt.tokenizer);
  EMBER_CHECK(fs::exists(tok), tok.string(),
              ": missing (give --tokenizer FILE, or --no-tokenizer to store none)");
  const data::Tokenizer t = data::Tokenizer::load(tok.string());
  EMBER_CHECK(static_cast<int64_t>(t.vocab_size()) <= vocab_size, tok.string(), ": ",
              t.vocab_size(), " tokens do not fit the model's vocab_size ", vocab_size);
  return t.to_json();
}

// Names and shapes against the model the config describes, then every value finite (every
// reader of the checkpoint would refuse a non-finite weight).
void check_hf_model(const HfModelConfig& hf, const std::map<std::string, Tensor>& model,
                    const std::string& dir_name) {
  try {
    nn::Transformer(hf.config, 0).load_state_dict(model, /*strict=*/true);
  } catch (const Error& e) {
    throw Error(dir_name + " (" + hf_arch_name(hf.arch) + "): " + e.what());
  }
  for (const auto& [name, t] : model) nn::check_finite(t, dir_name + ": tensor " + name);
}

}  // namespace

void import_hf(const std::string& dir_name, const std::string& out_checkpoint,
               const HfImportOptions& opt) {
  require_new_output("import", "--out", out_checkpoint, OutputKind::File);
  std::error_code ec;
  const fs::path dir(dir_name);
  EMBER_CHECK(fs::is_directory(dir, ec), "--from ", dir_name, ": no such folder");
  const fs::path config_path = dir / "config.json";
  EMBER_CHECK(fs::exists(config_path), config_path.string(),
              ": missing (a Hugging Face model folder needs one)");
  const HfModelConfig hf = hf_config_from_json(read_file(config_path.string(), "Hugging Face config file", kMaxConfigFileBytes), config_path.string());
  nn::require_fits_in_memory(nn::inference_memory(hf.config), config_path.string());  // before any weight is read

  nn::Checkpoint c;
  c.config = hf.config;
  c.tokenizer_json = hf_tokenizer_json(dir, opt, hf.config.vocab_size);
  c.model = ember_tensors_from_hf(hf.config, hf.arch, read_hf_weights(dir), dir_name);
  check_hf_model(hf, c.model, dir_name);
  nn::write_checkpoint(out_checkpoint, c);
}

}  // namespace ember::apps
