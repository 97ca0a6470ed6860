// Hostile checkpoints given to eval, generate and export: tensors that do not match the
// config (missing, extra, misshapen, NaN), tensors of a wrong kind or a huge declared shape
// (written through the HDF5 C API, with a valid digest), and a stored tokenizer that does not
// parse: each is one plain line naming the checkpoint and the tensor, exit 1, nothing written.
#include <hdf5.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cli_run.h"
#include "cli_testing.h"
#include "core/io/file_digest.h"
#include "data/token_shard.h"
#include "nn/checkpoint_file.h"

namespace fs = std::filesystem;

namespace {

using Run = ember::testing::CliRun;
using ember::testing::check_plain_message;
using ember::testing::run_ember;
using ember::testing::TempDir;
using ember::testing::tiny_config;
using ember::testing::zero_checkpoint;

// Replaces the dataset `name` of a sealed ember HDF5 file by one of `type` and
// `dims` (rank -1: a 0-d scalar) holding `data` (nullptr: none written), then
// seals the file again: a valid digest over wrong content.
void replace_dataset(const std::string& file, const std::string& name, hid_t type, int rank,
                     const std::vector<hsize_t>& dims, const void* data) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(f >= 0);
  REQUIRE(H5Ldelete(f, name.c_str(), H5P_DEFAULT) >= 0);
  const hid_t space = rank < 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims.data(), nullptr);
  const hid_t ds = H5Dcreate2(f, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(ds >= 0);
  if (data) REQUIRE(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
  H5Dclose(ds);
  H5Sclose(space);
  H5Fclose(f);
  ember::seal_file_digest(file);
}

}  // namespace

TEST_CASE("export and eval refuse a checkpoint whose tensors do not match its config", "[cli][export]") {
  TempDir dir("cli_bad_tensors");
  const std::string cfg = tiny_config(257);
  std::vector<std::pair<std::string, std::function<void(ember::nn::Checkpoint&)>>> variants = {
      {"model.norm.weight", [](auto& c) { c.model.erase("model.norm.weight"); }},
      {"model.extra.weight", [](auto& c) { c.model["model.extra.weight"] = ember::Tensor::zeros({2, 2}); }},
      {"model.embed_tokens.weight", [](auto& c) { c.model["model.embed_tokens.weight"] = ember::Tensor::zeros({257, 8}); }},
      {"model.norm.weight", [](auto& c) { c.model["model.norm.weight"] = ember::Tensor::zeros({16, 1}); }},
      {"model.norm.weight", [](auto& c) { c.model["model.norm.weight"] = ember::Tensor::zeros({}); }},
      {"lm_head.weight", [](auto& c) { c.model["lm_head.weight"] = ember::Tensor::zeros({257, 16}); }},
      {"model.layers.0.mlp.up_proj.weight",
       [](auto& c) { c.model["model.layers.0.mlp.up_proj.weight"].template data<float>()[5] = NAN; }},
      {"model.layers.0.self_attn.q_proj.weight", [](auto& c) {
         c.model.erase("model.layers.0.self_attn.q_proj.weight");
         c.model["model.layers.0.self_attn.q_proj.weights"] = ember::Tensor::zeros({16, 16});
       }},
  };
  const std::vector<uint32_t> tokens = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'};
  ember::data::write_shard(dir / "tokens.bin", tokens, 257);
  int i = 0;
  for (auto& [tensor, breakit] : variants) {
    ember::nn::Checkpoint c = zero_checkpoint(cfg);
    breakit(c);
    const std::string path = dir / ("bad" + std::to_string(i++) + ".h5");
    ember::nn::write_checkpoint(path, c);
    INFO(path << " " << tensor);
    const Run r = run_ember("export --checkpoint " + path + " --out " + dir / "hf");
    CHECK(r.code == 1);
    check_plain_message(r.err);
    CHECK(r.err.find(tensor) != std::string::npos);
    CHECK(r.err.find(path) != std::string::npos);
    CHECK(!fs::exists(dir.path / "hf"));
    const Run e = run_ember("eval --checkpoint " + path + " --data " + dir / "tokens.bin" + " --batch-size 1 --seq-len 4");
    CHECK(e.code == 1);
    CHECK(e.err.find(tensor) != std::string::npos);
  }
  const Run shape = run_ember("export --checkpoint " + dir / "bad2.h5" + " --out " + dir / "hf");
  CHECK(shape.err.find("[257, 8], expected [257, 16]") != std::string::npos);
  ember::nn::write_checkpoint(dir / "good.h5", zero_checkpoint(cfg));
  CHECK(run_ember("export --checkpoint " + dir / "good.h5" + " --out " + dir / "hf").code == 0);
}

TEST_CASE("eval, generate and export refuse checkpoint tensors of a wrong kind or a huge declared shape",
          "[cli][hostile]") {
  TempDir dir("cli_hostile_tensors");
  const std::vector<uint32_t> tokens = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'};
  ember::data::write_shard(dir / "tokens.bin", tokens, 257);
  const std::string norm = "/model/model.norm.weight";
  const std::vector<int32_t> ints(16, 1);
  const std::vector<int8_t> bytes(16, 1);
  const float one = 1;
  const std::vector<std::function<void(const std::string&)>> variants = {
      [&](const std::string& f) { replace_dataset(f, norm, H5T_NATIVE_INT32, 1, {16}, ints.data()); },
      [&](const std::string& f) { replace_dataset(f, norm, H5T_NATIVE_INT8, 1, {16}, bytes.data()); },
      [&](const std::string& f) { replace_dataset(f, norm, H5T_NATIVE_FLOAT, -1, {}, &one); },
      // 4 TiB declared, nothing stored: refused before it is allocated.
      [&](const std::string& f) { replace_dataset(f, norm, H5T_NATIVE_FLOAT, 1, {hsize_t{1} << 40}, nullptr); },
      // 2^64 + 2^31 elements: the count overflows 64 bits.
      [&](const std::string& f) {
        replace_dataset(f, norm, H5T_NATIVE_FLOAT, 2, {(hsize_t{1} << 33) + 1, hsize_t{1} << 31}, nullptr);
      },
  };
  for (size_t i = 0; i < variants.size(); ++i) {
    const std::string path = dir / ("bad" + std::to_string(i) + ".h5");
    ember::nn::write_checkpoint(path, zero_checkpoint(tiny_config(257)));
    variants[i](path);
    for (const std::string& args :
         {"eval --checkpoint " + path + " --data " + dir / "tokens.bin" + " --batch-size 1 --seq-len 4",
          "generate --checkpoint " + path + " --max-tokens 2", "export --checkpoint " + path + " --out " + dir / "hf"}) {
      INFO(args);
      const Run r = run_ember(args);
      CHECK(r.code == 1);
      check_plain_message(r.err);
      CHECK(r.err.find(path) != std::string::npos);
      CHECK(r.err.find("model.norm.weight") != std::string::npos);
      CHECK(r.err.find("out of memory") == std::string::npos);
      CHECK(!fs::exists(dir.path / "hf"));
    }
  }
}

TEST_CASE("a checkpoint whose stored tokenizer does not parse is one line naming the checkpoint", "[cli][hostile]") {
  TempDir dir("cli_hostile_stored_tok");
  ember::nn::Checkpoint c = zero_checkpoint(tiny_config(257));
  c.tokenizer_json = R"({"model": 3})";
  ember::nn::write_checkpoint(dir / "c.h5", c);
  for (const std::string& args : {"generate --checkpoint " + dir / "c.h5" + " --max-tokens 2",
                                  "export --checkpoint " + dir / "c.h5" + " --out " + dir / "hf"}) {
    INFO(args);
    const Run r = run_ember(args);
    CHECK(r.code == 1);
    check_plain_message(r.err);
    CHECK(r.err.starts_with("ember: error: " + dir / "c.h5" + ": the stored tokenizer"));  // was: "tokenizer.json: ..."
  }
}
