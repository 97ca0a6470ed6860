// `ember import --from DIR --out C`: a Hugging Face model folder (config.json,
// model.safetensors or its shards, tokenizer.json) as an ember checkpoint
// holding the root attrs, /model and /tokenizer (valid for train --init-from).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "nn/checkpoint.h"
#include "apps/cli/commands.h"
#include "apps/interop/hf_format.h"
#include "core/io/safetensors.h"
#include "core/io/json_message.h"
#include "data/tokenizer/tokenizer.h"
#include "nn/model_stats.h"
#include "nn/transformer.h"

namespace ember::apps {
namespace {
namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::error_code ec;
  EMBER_CHECK(!fs::is_directory(path, ec), path.string(), ": is a folder, expected a file");
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), path.string(), ": cannot open");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

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
    j = nlohmann::json::parse(read_text(index));
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

}  // namespace

void import_hf(const std::string& dir_name, const std::string& out_checkpoint,
               const HfImportOptions& opt) {
  const fs::path dir(dir_name);
  std::error_code ec;
  EMBER_CHECK(fs::is_directory(dir, ec), "--from ", dir_name, ": no such folder");
  EMBER_CHECK(!fs::is_directory(out_checkpoint, ec), "--out ", out_checkpoint,
              ": is a folder; give the checkpoint file to write (.h5)");
  const fs::path config_path = dir / "config.json";
  EMBER_CHECK(fs::exists(config_path), config_path.string(),
              ": missing (a Hugging Face model folder needs one)");
  const HfModelConfig hf = hf_config_from_json(read_text(config_path), config_path.string());
  nn::require_fits_in_memory(nn::inference_memory(hf.config), config_path.string());  // before any weight is read

  std::string tokenizer_json;
  if (!opt.no_tokenizer) {
    const fs::path tok = opt.tokenizer.empty() ? dir / "tokenizer.json" : fs::path(opt.tokenizer);
    EMBER_CHECK(fs::exists(tok), tok.string(),
                ": missing (give --tokenizer FILE, or --no-tokenizer to store none)");
    const data::Tokenizer t = data::Tokenizer::load(tok.string());
    EMBER_CHECK(static_cast<int64_t>(t.vocab_size()) <= hf.config.vocab_size, tok.string(), ": ",
                t.vocab_size(), " tokens do not fit the model's vocab_size ", hf.config.vocab_size);
    tokenizer_json = t.to_json();
  }

  nn::Checkpoint c;
  c.config = hf.config;
  c.model = ember_tensors_from_hf(hf.config, hf.arch, read_hf_weights(dir), dir_name);
  try {  // names and shapes against the model the config describes
    nn::Transformer(hf.config, 0).load_state_dict(c.model, /*strict=*/true);
  } catch (const Error& e) {
    throw Error(dir_name + " (" + hf_arch_name(hf.arch) + "): " + e.what());
  }
  for (const auto& [name, t] : c.model) {  // every reader of the checkpoint would refuse a non-finite weight
    const Tensor f = t.to(DType::Float32).contiguous();
    const float* p = f.data<float>();
    for (int64_t i = 0; i < f.numel(); ++i) {
      EMBER_CHECK(std::isfinite(p[i]), dir_name, ": tensor ", name, " holds a non-finite value (", p[i],
                  " at flat index ", i, ")");
    }
  }
  c.tokenizer_json = tokenizer_json;
  nn::write_checkpoint(out_checkpoint, c);
}

CommandRunner add_import_command(CLI::App& app) {
  struct Options {
    std::string from, out;
    HfImportOptions hf;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("import",
                                     "Make a checkpoint from a Hugging Face model folder "
                                     "(Llama, Qwen3, Qwen3-MoE, GPT-2)");
  sub->add_option("--from", o->from,
                  "folder with config.json, model.safetensors (or shards), tokenizer.json")
      ->required();
  sub->add_option("--out", o->out, "checkpoint to write (.h5)")->required();
  auto* t = sub->add_option("--tokenizer", o->hf.tokenizer,
                            "tokenizer.json to store instead of the folder's");
  sub->add_flag("--no-tokenizer", o->hf.no_tokenizer, "store no tokenizer")->excludes(t);
  return [o]() {
    std::error_code ec;
    EMBER_CHECK(fs::is_directory(o->out, ec) || !fs::exists(fs::symlink_status(o->out, ec)), "--out ", o->out,
                ": the file exists; give a path that does not (import never overwrites a file)");
    import_hf(o->from, o->out, o->hf);
    std::printf("wrote %s\n", o->out.c_str());
    return 0;
  };
}

}  // namespace ember::apps
