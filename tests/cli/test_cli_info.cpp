// `ember info` and huge or malformed model configs (docs/model.md#checks): sizes beyond a
// key's bound and configs that are not JSON or have a wrong type are one line naming file and
// key (info and train); a model larger than this machine gets exact numbers from info and is
// refused by train; the shipped presets' figures of the README.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "cli_run.h"

namespace fs = std::filesystem;

namespace {

using Run = ember::testing::CliRun;
using ember::testing::run_ember;

// A config file in a fresh temporary folder, removed with it.
struct ConfigFile {
  fs::path dir = fs::temp_directory_path() / ("ember_cli_cfg_" + std::to_string(getpid()));
  fs::path path = dir / "model.json";
  explicit ConfigFile(const std::string& text) {
    fs::create_directories(dir);
    std::ofstream(path) << text;
  }
  ~ConfigFile() { fs::remove_all(dir); }
};

bool one_error_line(const Run& r) {
  return r.code == 1 && r.err.starts_with("ember: error: ") &&
         std::count(r.err.begin(), r.err.end(), '\n') == 1 &&
         r.err.find("json.exception") == std::string::npos;
}

}  // namespace

TEST_CASE("ember info and train refuse sizes beyond a key's bound in one line", "[cli]") {
  for (const auto& [text, key] : std::vector<std::pair<std::string, std::string>>{
           {R"({"d_model": 4611686018427387904})", "d_model"},  // 2^62
           {R"({"n_layers": 1000000000})", "n_layers"},
           {R"({"vocab_size": 1099511627776})", "vocab_size"}}) {
    const ConfigFile cfg(text);
    for (const std::string& cmd : {"info --config " + cfg.path.string(),
                                   "train --steps 1 --out " + (cfg.dir / "run").string() +
                                       " --config " + cfg.path.string()}) {
      INFO(cmd << ": " << text);
      const Run r = run_ember(cmd);
      CHECK(one_error_line(r));
      CHECK(r.err.find(cfg.path.string() + ": key \"" + key + "\" must be between 1 and") !=
            std::string::npos);
      CHECK(r.out.empty());
    }
    CHECK_FALSE(fs::exists(cfg.dir / "run"));
  }
}

TEST_CASE("a model larger than this machine: exact numbers in info, refused by train", "[cli]") {
  // d_model 8192 x 200 layers: 161,905,516,544 parameters, 603 GiB of float32 weights.
  const ConfigFile cfg(R"({"d_model": 8192, "n_layers": 200, "n_heads": 64})");
  const Run info = run_ember("info --config " + cfg.path.string());
  CHECK(info.code == 0);
  CHECK(info.out.find("parameters            161.91G (161905516544)\n") != std::string::npos);
  CHECK(info.out.find("training memory       2806.08G bytes at B = 8, T = 256") != std::string::npos);
  CHECK(info.out.find("inference memory      647.62G bytes") != std::string::npos);
  CHECK(info.out.find("too little to run this model (needs 603 GiB) or train it (needs 2.55 TiB)") !=
        std::string::npos);
  // train stops before it prepares data or allocates a layer (the --out folder is never made).
  const Run train = run_ember("train --steps 1 --out " + (cfg.dir / "run").string() + " --config " +
                          cfg.path.string());
  CHECK(one_error_line(train));
  CHECK(train.err.find("the model needs 2.55 TiB for training at B = 8, T = 256 (weights 603 GiB") !=
        std::string::npos);
  CHECK(train.err.find("but this machine has ") != std::string::npos);
  CHECK_FALSE(fs::exists(cfg.dir / "run"));
}

TEST_CASE("a config file that is not JSON or has a wrong type is one line naming file and key", "[cli]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"d_model = 256", ": invalid JSON: line 1, column 1: "},
      {R"({"d_model": "256"})", ": key \"d_model\" must be an integer, got \"256\""},
      {R"({"qk_norm": "yes"})", ": key \"qk_norm\" must be true or false, got \"yes\""},
      {R"({"moe": {"top_k": 1.5}})", ": moe: key \"top_k\" must be an integer, got 1.5"},
      {R"({"d_modle": 256})", ": unknown key \"d_modle\""},
      {R"([256])", ": a model config must be a JSON object, got array"},
  };
  for (const auto& [text, expected] : cases) {
    INFO(text);
    const ConfigFile cfg(text);
    const Run r = run_ember("info --config " + cfg.path.string());
    CHECK(one_error_line(r));
    CHECK(r.err.find(cfg.path.string() + expected) != std::string::npos);
  }
}

TEST_CASE("ember info prints the shipped presets' figures of the README", "[cli]") {
  // README.md "Presets and what they cost" (batch 8 at each preset's full context).
  const Run dense = run_ember("info --preset dense-small");
  CHECK(dense.code == 0);
  CHECK(dense.out.starts_with("parameters            3.08M ("));
  CHECK(dense.out.find("FLOPs per token       21.63M") != std::string::npos);
  CHECK(dense.out.find("KV cache per token    2048 bytes") != std::string::npos);
  CHECK(dense.out.find("training memory       183.54M bytes at B = 8, T = 256") != std::string::npos);
  CHECK(dense.out.find("enough to train and run this model") != std::string::npos);
  const Run gpt2 = run_ember("info --preset gpt2-small");
  CHECK(gpt2.out.starts_with("parameters            124.44M ("));
  CHECK(gpt2.out.find("training memory       10.12G bytes at B = 8, T = 1024") != std::string::npos);
}
