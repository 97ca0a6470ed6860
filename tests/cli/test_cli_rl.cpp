// The `ember rl` program (docs/cli.md#rl-from-a-reward) on a tiny random base: GRPO and PPO (LoRA,
// --full) train a few steps and log their metrics per step, the held-out greedy completions'
// reward at step 0 and the end, and --rollouts-out's lines; a step whose rewards are all equal
// (and no k3 term) has a gradient of exactly 0; ppo checkpoints hold value.weight, started as the
// reward model's score.weight; --resume continues bit for bit (tensors, metrics, rollouts); each
// bad input is one "ember: error:" line, exit 1 and nothing written in --out.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.h"
#include "core/io/hdf5_file.h"
#include "finetune_testing.h"
#include "nn/checkpoint_file.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using ember::testing::CliRun;
using ember::testing::read_text;
using ember::testing::run_ember;
using ember::testing::TempDir;
using nlohmann::json;

namespace {

CliRun rl(const std::string& args) {
  return run_ember("rl " + args);
}

// Base and prompts in dir; a small run into dir/out (B 2 x G 4, 12 new tokens at most).
std::string rl_args(const TempDir& dir, const std::string& out,
                    const std::string& prompts = "prompts.jsonl") {
  if (!fs::exists(dir / "base.h5")) ember::testing::write_chat_base(dir / "base.h5");
  if (!fs::exists(dir / "prompts.jsonl"))
    ember::testing::write_rl_prompts(dir / "prompts.jsonl", 16);
  return "--base " + (dir / "base.h5") + " --prompts " + (dir / prompts) + " --out " + (dir / out) +
         " --batch-size 2 --group-size 4 --max-tokens 12 --lr 1e-2 --warmup 1 --schedule constant";
}

// A reward model of the base trained 2 steps on pairs: dir/rm/step_00000002.h5.
std::string reward_model(const TempDir& dir) {
  const std::string rm = dir / "rm/step_00000002.h5";
  if (fs::exists(rm)) return rm;
  if (!fs::exists(dir / "base.h5")) ember::testing::write_chat_base(dir / "base.h5");
  ember::testing::write_pair_data(dir / "pairs.jsonl", 8);
  const CliRun r = run_ember("reward --base " + (dir / "base.h5") + " --data " +
                             (dir / "pairs.jsonl") + " --out " + (dir / "rm") +
                             " --steps 2 --batch-size 2 --seq-len 32 --val-fraction 0");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  return rm;
}

std::vector<json> lines_of(const std::string& path) {
  std::vector<json> lines;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) lines.push_back(json::parse(line));
  return lines;
}

std::map<std::string, ember::Tensor> tensors_of(const std::string& checkpoint) {
  return ember::nn::read_checkpoint(checkpoint, false).model;
}

void require_same_tensors(const std::string& a, const std::string& b) {
  const auto ta = tensors_of(a), tb = tensors_of(b);
  REQUIRE(ta.size() == tb.size());
  for (const auto& [name, t] : ta) {
    INFO(name);
    const ember::Tensor& u = tb.at(name);
    REQUIRE(u.numel() == t.numel());
    CHECK(std::memcmp(t.data<float>(), u.data<float>(), sizeof(float) * t.numel()) == 0);
  }
}

const std::vector<std::string> kStepKeys = {
    "loss",       "kl",       "clip_fraction", "reward",    "reward_std", "completion_length",
    "rollout_ms", "score_ms", "update_ms",     "grad_norm", "lr"};

}  // namespace

TEST_CASE("ember rl grpo and ppo train, log their metrics and write the rollouts", "[cli][rl]") {
  TempDir dir("cli_rl_runs");
  const std::string rm = reward_model(dir);
  struct Mode {
    std::string name, args;
  };
  const std::vector<Mode> modes = {
      {"grpo_lora", "--reward match --iterations 2"},
      {"grpo_full", "--reward match --full --lr 1e-3"},
      {"ppo_lora", "--algo ppo --reward-model " + rm},
      {"ppo_full", "--algo ppo --reward match --full --lr 1e-3"},
  };
  for (const Mode& mode : modes) {
    SECTION(mode.name) {
      const std::string out = dir / mode.name;
      const CliRun r =
          rl(rl_args(dir, mode.name) + " --steps 3 --val-fraction 0.25 --rollouts-out " + out +
             ".jsonl " + mode.args);
      INFO(r.out << r.err);
      REQUIRE(r.code == 0);
      CHECK(r.out.find("ember rl: ") != std::string::npos);
      CHECK(r.out.find("data: 16 prompts, 4 held out for validation (greedy completions)\n") !=
            std::string::npos);
      CHECK(r.out.find("step 0: held-out reward ") != std::string::npos);
      const std::vector<json> m = lines_of(out + "/metrics.jsonl");
      REQUIRE(m.size() == 4);  // step 0 (held-out, before), steps 1..3
      CHECK(m[0].contains("val_reward"));
      CHECK(m[3].contains("val_reward"));
      const bool ppo = mode.name.rfind("ppo", 0) == 0;
      for (size_t i = 1; i < m.size(); ++i) {
        CHECK(m[i].at("step") == static_cast<int>(i));
        for (const std::string& k : kStepKeys) {
          INFO(k);
          REQUIRE(m[i].contains(k));
          CHECK(std::isfinite(m[i].at(k).get<double>()));
        }
        CHECK(m[i].contains("value_loss") == ppo);
        CHECK_FALSE(m[i].contains("mfu"));
        CHECK(m[i].at("completion_length").get<double>() >= 1);
        CHECK(m[i].at("completion_length").get<double>() <= 12);
        CHECK(m[i].at("clip_fraction").get<double>() >= 0);
      }
      // --rollouts-out: B G lines per step, each with the keys of docs/formats.md#rl-prompts-jsonl.
      const std::vector<json> rows = lines_of(out + ".jsonl");
      REQUIRE(rows.size() == 3 * 2 * 4);
      for (const json& row : rows) {
        const size_t n = row.at("completion_ids").size();
        CHECK(n >= 1);
        CHECK(row.at("logp_old").size() == n);
        CHECK(row.at("advantage").is_array() == ppo);
        if (ppo) CHECK(row.at("advantage").size() == n);
        for (const double lp : row.at("logp_old")) CHECK(lp <= 0);
      }
      CHECK(rows.front().at("step") == 1);
      CHECK(rows.back().at("step") == 3);
      // The checkpoint: the config's "rl", ppo's value head; loss.svg has the reward row.
      const ember::nn::ModelConfig cfg =
          ember::nn::read_checkpoint_config(out + "/step_00000003.h5");
      CHECK(json::parse(cfg.rl).at("algo") == (ppo ? "ppo" : "grpo"));
      CHECK(tensors_of(out + "/step_00000003.h5").count("value.weight") == (ppo ? 1u : 0u));
      CHECK(read_text(out + "/loss.svg").find("Mean reward against steps") != std::string::npos);
      // An RL checkpoint generates like any language model.
      const CliRun g = run_ember("generate --checkpoint " + out +
                                 "/step_00000003.h5 --prompt q1 --max-tokens 4");
      INFO(g.err);
      CHECK(g.code == 0);
    }
  }
}

TEST_CASE("ember rl: ppo's value head starts as the reward model's score head", "[cli][rl]") {
  TempDir dir("cli_rl_value_head");
  const std::string rm = reward_model(dir);
  const CliRun r = rl(rl_args(dir, "run") + " --algo ppo --reward-model " + rm +
                      " --steps 1 --lr 1e-12 --min-lr 0 --val-fraction 0");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("ppo: its value head value.weight always trains") != std::string::npos);
  const ember::H5File f(rm, ember::H5File::Mode::Read);
  const ember::Tensor score = f.read_tensor("/model/score.weight");
  const ember::Tensor value = tensors_of(dir / "run/step_00000001.h5").at("value.weight");
  REQUIRE(value.numel() == score.numel());
  for (int64_t i = 0; i < value.numel(); ++i)  // one AdamW step of lr 1e-12 moves it < 1e-11
    CHECK(std::abs(value.data<float>()[i] - score.data<float>()[i]) < 1e-9);
}

TEST_CASE("ember rl grpo: equal rewards in every group and no k3 term give a gradient of 0",
          "[cli][rl]") {
  TempDir dir("cli_rl_equal");
  std::ofstream(dir / "never.jsonl") << R"({"prompt": "q1", "answer": "this is never sampled"})"
                                     << "\n"
                                     << R"({"prompt": "q2", "answer": "nor is this"})"
                                     << "\n";
  const CliRun r =
      rl(rl_args(dir, "run", "never.jsonl") + " --reward match --kl 0 --steps 3 --val-fraction 0");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const std::vector<json> m = lines_of(dir / "run/metrics.jsonl");
  REQUIRE(m.size() == 3);
  for (const json& step : m) {
    CHECK(step.at("reward") == 0.0);
    CHECK(step.at("grad_norm") == 0.0);
    CHECK(step.at("loss") == 0.0);
  }
}

TEST_CASE("ember rl --resume continues bit for bit: tensors, metrics and rollouts", "[cli][rl]") {
  TempDir dir("cli_rl_resume");
  const std::string rm = reward_model(dir);
  for (const std::string algo : {"grpo", "ppo"}) {
    SECTION(algo) {
      const std::string common =
          " --algo " + algo + " --reward-model " + rm +
          " --val-fraction 0.25 --eval-every 2 --iterations 2 --lora-dropout 0.1";
      CliRun r = rl(rl_args(dir, algo + "_full") + " --steps 4 --rollouts-out " + (dir / algo) +
                    "_full.jsonl" + common);
      INFO(r.out << r.err);
      REQUIRE(r.code == 0);
      r = rl(rl_args(dir, algo + "_split") + " --steps 2 --rollouts-out " + (dir / algo) +
             "_split.jsonl" + common);
      REQUIRE(r.code == 0);
      // A stale line of a later step (a run killed after writing it) is dropped on --resume.
      std::ofstream(dir / (algo + "_split.jsonl"), std::ios::app) << R"({"step": 3, "prompt": 0})"
                                                                  << "\n";
      r = rl("--resume " + (dir / (algo + "_split")) + " --steps 4 --rollouts-out " + (dir / algo) +
             "_split.jsonl");
      CHECK(r.err == "");
      REQUIRE(r.code == 0);
      require_same_tensors(dir / (algo + "_full/step_00000004.h5"),
                           dir / (algo + "_split/step_00000004.h5"));
      CHECK(read_text(dir / (algo + "_full.jsonl")) == read_text(dir / (algo + "_split.jsonl")));
      const std::vector<json> a = lines_of(dir / (algo + "_full/metrics.jsonl"));
      const std::vector<json> b = lines_of(dir / (algo + "_split/metrics.jsonl"));
      REQUIRE(a.size() == b.size());
      for (size_t i = 1; i < a.size(); ++i) {
        for (const char* k : {"loss", "kl", "reward", "grad_norm", "clip_fraction"})
          CHECK(a[i].at(k) == b[i].at(k));
      }
    }
  }
}

TEST_CASE("ember rl: each bad input is one line, exit 1, nothing written in --out", "[cli][rl]") {
  TempDir dir("cli_rl_bad");
  const std::string rm = reward_model(dir);
  const auto data = [&](const std::string& name, const std::string& line) {
    std::ofstream(dir / name) << line << "\n";
    return name;
  };
  struct Case {
    std::string prompts, expected;  // the prompt file, then extra options
  };
  const std::vector<Case> cases = {
      {data("not_json.jsonl", "{not json"), "not_json.jsonl line 1"},
      {data("no_prompt.jsonl", R"({"answer": "a"})"),
       "no_prompt.jsonl line 1: \"prompt\": missing"},
      {data("no_answer.jsonl", R"({"prompt": "q"})"),
       "no_answer.jsonl line 1: \"answer\": missing"},
      {data("answer.jsonl", R"({"prompt": "q", "answer": 3})"),
       "answer.jsonl line 1: \"answer\": expected a string"},
      {data("assistant.jsonl",
            R"({"prompt": [{"role": "assistant", "content": "x"}], "answer": "a"})"),
       "assistant.jsonl line 1: \"prompt\": its last message is the assistant's"},
      {data("long.jsonl", R"({"prompt": ")" + std::string(60, 'p') + R"(", "answer": "a"})"),
       "long.jsonl line 1: the prompt's 60 tokens and --max-tokens 12 exceed the model's context "
       "of 64"},
      {"prompts.jsonl --reward exact", "--reward must be match"},
      {"prompts.jsonl --reward match --reward-model " + rm,
       "--reward match and --reward-model exclude each other"},
      {"prompts.jsonl --reward-model " + (dir / "base.h5"), "not a reward model"},
      {"prompts.jsonl --reward match --group-size 1", "--group-size must be >= 2; got 1"},
      {"prompts.jsonl --reward match --temperature 0", "--temperature must be > 0"},
      {"prompts.jsonl --reward match --clip-ratio 1", "--clip-ratio must be in (0, 1)"},
      {"prompts.jsonl --reward match --kl=-1", "--kl must be >= 0"},
      {"prompts.jsonl --reward match --algo dpo", "--algo must be one of grpo, ppo"},
      {"prompts.jsonl --reward match --zero 3", "--zero 3 shards the parameters"},
      {"prompts.jsonl", "a reward is required: --reward match or --reward-model RM"},
  };
  for (const Case& c : cases) {
    const size_t space = c.prompts.find(' ');
    const std::string file = c.prompts.substr(0, space);
    const std::string extra = space == std::string::npos
                                  ? (file == "prompts.jsonl" ? "" : " --reward match")
                                  : c.prompts.substr(space);
    INFO(c.prompts);
    const CliRun r = rl(rl_args(dir, "run", file) + " --steps 1" + extra);
    INFO(r.out << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.rfind("ember: error: ", 0) == 0);
    CHECK(r.err.find(c.expected) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir / "run"));
  }
}
