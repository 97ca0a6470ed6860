// `ember train` end to end on a tiny model: loader order, checkpoint layout
// and round trip, bit-exact resume, skipping a truncated checkpoint, and
// every bad input failing with one clear error line; the
// option table behind the flags.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <csignal>
#include <thread>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "nn/checkpoint_file.h"
#include "apps/train/run_files.h"
#include "apps/train/trainer.h"
#include "core/io/hdf5_file.h"
#include "data/batch_loader.h"
#include "data/token_shard.h"
#include "temp_dir.h"

using namespace ember;
using namespace ember::apps;
namespace fs = std::filesystem;

namespace {

using testing::TempDir;
using testing::read_text;

const char* kTinyConfig = R"({"vocab_size": 64, "d_model": 16, "n_layers": 2, "n_heads": 2,
  "ffn_hidden": 32, "max_seq_len": 32, "qk_norm": true, "z_loss_coef": 1e-4, "dropout": 0.1})";

std::string write_file(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string p = dir / name;
  std::ofstream(p) << text;
  return p;
}

std::string write_tokens(const TempDir& dir, const std::string& name, int64_t n, uint32_t vocab, uint64_t seed) {
  std::vector<uint32_t> tokens(static_cast<size_t>(n));
  const Tensor r = Tensor::rand({n}, seed, 0, DType::Float64, 0, vocab);
  for (int64_t i = 0; i < n; ++i) tokens[i] = static_cast<uint32_t>(r.at({i}));
  data::write_shard(dir / name, tokens, vocab);
  return dir / name;
}

TrainOptions tiny_options(const TempDir& dir, const std::string& out) {
  TrainOptions o;
  o.config = write_file(dir, "tiny.json", kTinyConfig);
  o.data = write_tokens(dir, "train.bin", 4000, 64, 1);
  o.val_data = write_tokens(dir, "val.bin", 500, 64, 2);
  o.out = dir / out;
  o.batch_size = 2;
  o.seq_len = 16;
  o.steps = 8;
  o.warmup = 2;
  o.lr = 1e-2;
  o.log_every = 100;
  o.eval_batches = 2;
  return o;
}

std::map<std::string, Tensor> final_model(const std::string& out) {
  return nn::read_checkpoint((fs::path(out) / checkpoint_name(8)).string(), false).model;
}

}  // namespace

TEST_CASE("the loader reads the sequential order and a shuffle shared by every world size", "[train][data]") {
  TempDir dir("train");
  auto data = std::make_shared<data::TokenDataset>(write_tokens(dir, "d.bin", 1000, 50, 3));
  // 1000 tokens, T = 10: windows w*10 .. w*10+10, (1000 - 1) / 10 = 99 of them.
  data::BatchLoader one(data, {4, 10, 1, 1, 0, true, 0});
  CHECK(one.num_windows() == 99);
  CHECK(one.window(0, 0, 3) == 3);
  CHECK(one.window(2, 0, 1) == 9);
  CHECK(one.window(25, 0, 0) == 100 % 99);
  const Tensor b = one.batch(1, 0);
  CHECK(b.shape() == Shape{4, 11});
  std::vector<int64_t> want(11);
  data->read(50, 11, want.data());  // row 1 of step 1: window 5
  CHECK(b.select(0, 1).to_vector<int64_t>() == want);
  // Step s, micro u, rank r of W with B rows: slot ((s*A + u)*W + r)*B + b.
  for (bool sequential : {true, false}) {
    data::BatchLoader w1(data, {4, 10, 1, 1, 0, sequential, 7});
    data::BatchLoader a2(data, {2, 10, 2, 1, 0, sequential, 7});
    data::BatchLoader r0(data, {2, 10, 1, 2, 0, sequential, 7}), r1(data, {2, 10, 1, 2, 1, sequential, 7});
    for (int64_t s = 0; s < 60; ++s) {
      for (int64_t b = 0; b < 4; ++b) {
        const int64_t want_w = w1.window(s, 0, b);
        CHECK(a2.window(s, b / 2, b % 2) == want_w);
        CHECK((b < 2 ? r0.window(s, 0, b) : r1.window(s, 0, b - 2)) == want_w);
      }
    }
  }
  // The shuffle is a permutation of the windows in each epoch and depends on the seed.
  data::BatchLoader s7(data, {1, 10, 1, 1, 0, false, 7}), s8(data, {1, 10, 1, 1, 0, false, 8});
  std::vector<int64_t> seen, other;
  for (int64_t s = 0; s < 99; ++s) seen.push_back(s7.window(s, 0, 0)), other.push_back(s8.window(s, 0, 0));
  CHECK(seen != other);
  std::sort(seen.begin(), seen.end());
  for (int64_t i = 0; i < 99; ++i) CHECK(seen[i] == i);
}

TEST_CASE("a run writes the documented checkpoint layout and resumes bit for bit", "[train]") {
  TempDir dir("train");
  TrainOptions full = tiny_options(dir, "full");
  full.save_every = 4;
  REQUIRE(run_train(full) == 0);
  const std::string ckpt = dir / "full/step_00000008.h5";
  {
    H5File f(ckpt, H5File::Mode::Read);
    CHECK(f.read_attr_string("/", "format") == "ember-checkpoint");
    CHECK(f.read_attr_int("/", "version") == 1);
    CHECK(f.read_attr_int("/optim", "step") == 8);
    CHECK(f.read_tensor("/model/model.embed_tokens.weight").shape() == Shape{64, 16});
    CHECK(f.read_tensor("/optim/model.norm.weight/exp_avg_sq").shape() == Shape{16});
    CHECK_FALSE(f.exists("/tokenizer/json"));  // vocab 64 over shards: no tokenizer to store
  }
  std::ifstream latest(dir / "full/latest");
  std::string name;
  latest >> name;
  CHECK(name == "step_00000008.h5");

  // Run 4 steps, then resume to 8: every parameter equal bit for bit.
  TrainOptions half = tiny_options(dir, "half");
  half.steps = 8;
  half.save_every = 4;
  {
    TrainOptions first = half;
    first.steps = 8;
    // Stop after step 4 by training a run whose schedule length is 8 but which is cut:
    // resume from a copy of the full run's step-4 checkpoint.
  }
  fs::create_directories(dir / "half");
  fs::copy_file(dir / "full/step_00000004.h5", dir / "half/step_00000004.h5");
  TrainOptions resume;
  resume.resume = dir / "half";
  resume.log_every = 100;
  REQUIRE(run_train(resume) == 0);
  const auto a = final_model(dir / "full"), b = final_model(dir / "half");
  REQUIRE(a.size() == b.size());
  for (const auto& [n, t] : a) {
    INFO(n);
    CHECK(t.to_vector<float>() == b.at(n).to_vector<float>());
  }
}

TEST_CASE("resume skips a truncated newest checkpoint with a warning", "[train]") {
  TempDir dir("train");
  TrainOptions o = tiny_options(dir, "run");
  o.save_every = 4;
  o.steps = 8;
  REQUIRE(run_train(o) == 0);
  const std::string newest = dir / "run/step_00000008.h5";
  fs::resize_file(newest, fs::file_size(newest) / 3);
  CHECK(find_resume_point(dir / "run").path == dir / "run/step_00000004.h5");
}

TEST_CASE("SIGTERM writes a checkpoint and ends the run cleanly with 128 + SIGTERM", "[train]") {
  TempDir dir("train");
  TrainOptions o = tiny_options(dir, "run");
  o.steps = 100000;
  // The signal comes once the loop runs (metrics.jsonl is opened after the
  // handlers are installed): earlier, on a loaded machine, it would end the test.
  const fs::path metrics = fs::path(dir / "run") / "metrics.jsonl";
  std::thread killer([metrics] {
    for (int i = 0; i < 6000 && !fs::exists(metrics); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::raise(SIGTERM);
  });
  const int rc = run_train(o);
  killer.join();
  CHECK(rc == 128 + SIGTERM);  // the shell's code for a run ended by SIGTERM
  const auto names = list_checkpoints(dir / "run");
  REQUIRE(names.size() == 1);
  CHECK(names[0] != checkpoint_name(100000));
  std::ifstream latest(dir / "run/latest");
  std::string name;
  latest >> name;
  CHECK(name == names[0]);
}

TEST_CASE("keep prunes old checkpoints, keep-every spares some", "[train]") {
  TempDir dir("train");
  TrainOptions o = tiny_options(dir, "run");
  o.save_every = 2;
  o.keep = 2;
  o.keep_every = 4;
  REQUIRE(run_train(o) == 0);
  CHECK(list_checkpoints(dir / "run") ==
        std::vector<std::string>{"step_00000008.h5", "step_00000006.h5", "step_00000004.h5"});
}

TEST_CASE("bad inputs fail with one clear error and leave checkpoints intact", "[train]") {
  TempDir dir("train");
  TrainOptions good = tiny_options(dir, "run");
  REQUIRE(run_train(good) == 0);
  const auto before = fs::file_size(dir / "run/step_00000008.h5");
  auto fails_with = [&](TrainOptions o, const std::string& what) {
    o.log_every = 100;
    INFO(what);
    CHECK_THROWS_WITH(run_train(o), Catch::Contains(what));
  };
  // A new run may not write into the good run's folder at all; the bad inputs
  // below go to a folder of their own, and the good run's files stay as they were.
  TrainOptions o = tiny_options(dir, "run");
  o.seed = 9;
  fails_with(o, "already holds another run's checkpoints");
  o = tiny_options(dir, "bad");
  o.data = dir / "missing.txt";
  fails_with(o, "missing.txt");
  o = tiny_options(dir, "bad");
  o.config = write_file(dir, "bytes.json", R"({"d_model": 16, "n_layers": 1, "n_heads": 2, "max_seq_len": 32})");
  o.data = write_file(dir, "empty.txt", "");
  fails_with(o, "empty");
  o = tiny_options(dir, "bad");
  {
    std::ofstream bad(dir / "bad.bin", std::ios::binary);
    std::vector<int32_t> header(256, 0);
    header[0] = 20240521;
    bad.write(reinterpret_cast<const char*>(header.data()), 1024);
  }
  o.data = dir / "bad.bin";
  fails_with(o, "bad.bin");
  o = tiny_options(dir, "bad");
  const std::string cut = write_tokens(dir, "cut.bin", 1000, 64, 5);
  fs::resize_file(cut, fs::file_size(cut) - 100);
  o.data = cut;
  fails_with(o, "cut.bin");
  o = tiny_options(dir, "bad");
  o.data = write_tokens(dir, "big_ids.bin", 1000, 100, 4);  // ids up to 99 >= vocab 64
  fails_with(o, "vocab");
  o = tiny_options(dir, "bad");
  o.seq_len = 64;
  fails_with(o, "max_seq_len");
  o = tiny_options(dir, "bad");
  o.config = write_file(dir, "unknown.json", R"({"d_model": 16, "n_heads": 2, "colour": 3})");
  fails_with(o, "colour");
  o = tiny_options(dir, "bad");
  o.out = write_file(dir, "a_file", "x") + "/sub";
  fails_with(o, "--out");
  TrainOptions r;
  r.resume = dir / "run";
  r.config = write_file(dir, "other.json", R"({"vocab_size": 64, "d_model": 32, "n_layers": 1, "n_heads": 2, "max_seq_len": 32})");
  fails_with(r, "does not match");
  CHECK(fs::file_size(dir / "run/step_00000008.h5") == before);
  CHECK(find_resume_point(dir / "run").path == dir / "run/step_00000008.h5");
}

TEST_CASE("a non-finite loss stops before the update and writes no checkpoint", "[train]") {
  TempDir dir("train");
  TrainOptions o = tiny_options(dir, "run");
  o.steps = 1;
  REQUIRE(run_train(o) == 0);
  nn::Checkpoint c = nn::read_checkpoint(dir / "run/step_00000001.h5", false);
  c.train_state.reset();
  c.optim_step.reset();
  Tensor w = c.model.at("model.norm.weight");
  w.set({3}, std::nan(""));
  nn::write_checkpoint(dir / "nan.h5", c);
  TrainOptions n = tiny_options(dir, "nan_run");
  n.config.clear();
  n.init_from = dir / "nan.h5";
  CHECK_THROWS_WITH(run_train(n), Catch::Contains("step 0") && Catch::Contains("non-finite"));
  CHECK(list_checkpoints(dir / "nan_run").empty());
}

TEST_CASE("the command line's flags are the option table's fields, bound to TrainOptions' members", "[train][options]") {
  TrainOptions o;
  const std::vector<OptionFlag> flags = option_flags(o);
  std::set<std::string> keys;
  for (const OptionFlag& f : flags) {
    INFO(f.flag);
    // "--batch-size" -> "batch_size", by hand.
    std::string key = std::string(f.flag).substr(2);
    std::replace(key.begin(), key.end(), '-', '_');
    CHECK(f.key == key);
    CHECK(keys.insert(f.key).second);
  }
  // Every saved option has a flag; the flags saved nowhere are this invocation's own.
  std::set<std::string> not_saved = keys;
  const nlohmann::json saved = options_to_json(o);
  for (const auto& [key, value] : saved.items()) {
    INFO(key);
    CHECK(not_saved.erase(key) == 1);
  }
  CHECK(not_saved == std::set<std::string>{"config", "preset", "init_from", "resume", "out", "profile",
                                           "allow_data_change", "checkpoint_activations",
                                           "checkpoint_every", "tp", "pp", "micro_batches", "pp_layers",
                                           "pp_schedule"});  // the layout is the command line's
  // The rank-agreement list walks the same table, in the same order.
  const auto values = option_values(o);
  REQUIRE(values.size() == flags.size());
  for (size_t i = 0; i < flags.size(); ++i) CHECK(values[i].first == flags[i].flag);
  // A flag's target is o's member.
  for (const OptionFlag& f : flags) {
    if (f.key == "batch_size") *std::get<int64_t*>(f.target) = 3;
    if (f.key == "lr") *std::get<double*>(f.target) = 0.5;
    if (f.key == "seed") *std::get<uint64_t*>(f.target) = 9;
    if (f.key == "schedule") *std::get<std::string*>(f.target) = "wsd";
    if (f.key == "sequential") *std::get<bool*>(f.target) = true;
  }
  CHECK(o.batch_size == 3);
  CHECK(o.lr == 0.5);
  CHECK(o.seed == 9);
  CHECK(o.schedule == "wsd");
  CHECK(o.sequential);
}
