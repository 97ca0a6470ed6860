// `ember train --dtype bf16` end to end on a tiny model: the run trains with
// bfloat16 matmuls (weights differ from the float32 run's, slightly), keeps
// float32 weights and AdamW state, saves the dtype with its options so a
// resume continues in bf16 bit for bit, leaves autocast off afterwards, and
// rejects an unknown --dtype with a clear error.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "nn/checkpoint_file.h"
#include "apps/train/run_files.h"
#include "apps/train/trainer.h"
#include "autograd/autocast.h"
#include "data/token_shard.h"
#include "temp_dir.h"

using namespace ember;
using namespace ember::apps;
namespace fs = std::filesystem;

namespace {

using testing::TempDir;
using testing::read_text;

TrainOptions tiny_options(const TempDir& dir, const std::string& out, const std::string& dtype) {
  TrainOptions o;
  o.config = dir / "tiny.json";
  if (!fs::exists(o.config)) {
    std::ofstream(o.config) << R"({"vocab_size": 64, "d_model": 32, "n_layers": 2, "n_heads": 2,
      "ffn_hidden": 64, "max_seq_len": 32, "dropout": 0.1})";
    std::vector<uint32_t> tokens(4000);
    const Tensor r = Tensor::rand({4000}, 1, 0, DType::Float64, 0, 64);
    for (int64_t i = 0; i < 4000; ++i) tokens[i] = static_cast<uint32_t>(r.at({i}));
    data::write_shard(dir / "train.bin", tokens, 64);
  }
  o.data = dir / "train.bin";
  o.val_fraction = 0;
  o.out = dir / out;
  o.batch_size = 2;
  o.seq_len = 16;
  o.steps = 8;
  o.warmup = 2;
  o.lr = 1e-2;
  o.log_every = 100;
  o.save_every = 4;
  o.dtype = dtype;
  return o;
}

nn::Checkpoint final_checkpoint(const TempDir& dir, const std::string& out) {
  return nn::read_checkpoint((fs::path(dir / out) / checkpoint_name(8)).string(), /*with_optim=*/true);
}

}  // namespace

TEST_CASE("train --dtype bf16: float32 state, close to float32, resumes in bf16 bit for bit", "[bf16][train]") {
  TempDir dir("bf16_train");
  REQUIRE(run_train(tiny_options(dir, "f32", "float32")) == 0);
  REQUIRE(run_train(tiny_options(dir, "bf16", "bf16")) == 0);
  CHECK(autocast_dtype() == DType::Float32);  // the run's guard ended with its steps
  const nn::Checkpoint f32 = final_checkpoint(dir, "f32"), bf16 = final_checkpoint(dir, "bf16");
  double diff2 = 0, norm2 = 0;
  for (const auto& [name, t] : bf16.model) {
    INFO(name);
    CHECK(t.dtype() == DType::Float32);
    const auto a = t.to_vector<double>(), b = f32.model.at(name).to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) diff2 += (a[i] - b[i]) * (a[i] - b[i]), norm2 += b[i] * b[i];
  }
  for (const auto& [name, t] : bf16.optim) CHECK(t.dtype() == DType::Float32);
  const double rel = std::sqrt(diff2 / norm2);
  CAPTURE(rel);
  CHECK(rel > 0);     // bfloat16 matmuls changed the trajectory
  CHECK(rel < 5e-2);  // but stayed close (8 AdamW steps at lr 1e-2 amplify the rounding: ~1e-2)
  CHECK(bf16.train_state->find("\"dtype\":\"bf16\"") != std::string::npos);

  // Resume the bf16 run from its step-4 checkpoint without --dtype: the saved
  // option applies and the result is the uninterrupted run's.
  fs::create_directories(dir / "resumed");
  fs::copy_file(dir / "bf16/step_00000004.h5", dir / "resumed/step_00000004.h5");
  TrainOptions resume;
  resume.resume = dir / "resumed";
  resume.log_every = 100;
  REQUIRE(run_train(resume) == 0);
  const nn::Checkpoint resumed = final_checkpoint(dir, "resumed");
  for (const auto& [name, t] : bf16.model) {
    INFO(name);
    CHECK(t.to_vector<float>() == resumed.model.at(name).to_vector<float>());
  }
}

TEST_CASE("train --dtype rejects an unknown precision by name", "[bf16][train]") {
  TempDir dir("bf16_train");
  TrainOptions o = tiny_options(dir, "bad", "fp16");
  CHECK_THROWS_WITH(run_train(o), Catch::Contains("--dtype must be one of float32, bf16; got 'fp16'"));
}
