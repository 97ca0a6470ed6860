// The `ember reward` program (docs/cli.md#reward-models): LoRA, QLoRA and --full runs train a
// few steps and log loss, accuracy and margin per step and on the held-out pairs; the
// checkpoint's config has "reward" with --center-rewards resolved and the checkpoint holds
// score.weight (a LoRA one beside the adapters), loadable as a model with its score head;
// --resume continues bit for bit (4 steps = 2 + resume 2); each bad input is one "ember:
// error:" line, exit 1 and nothing written in --out, and a reward model is refused as a base.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_run.h"
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

// Base and pairs in dir; the options of a small run into dir/out.
std::string pair_args(const TempDir& dir, const std::string& out,
                      const std::string& pairs = "pairs.jsonl", const std::string& base = "base.h5") {
  if (!fs::exists(dir / "base.h5")) ember::testing::write_chat_base(dir / "base.h5");
  if (!fs::exists(dir / "pairs.jsonl")) ember::testing::write_pair_data(dir / "pairs.jsonl", 12);
  return "--base " + (dir / base) + " --data " + (dir / pairs) + " --out " + (dir / out) +
         " --batch-size 2 --seq-len 32 --lr 1e-2 --warmup 1 --schedule constant";
}

std::vector<json> metrics(const std::string& path) {
  std::vector<json> lines;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) lines.push_back(json::parse(line));
  return lines;
}

const std::vector<std::string> kKeys = {"loss", "accuracy", "margin"};

}  // namespace

TEST_CASE("ember reward trains a score head with LoRA, QLoRA or --full and logs its metrics",
          "[cli][reward]") {
  for (const std::string mode : {"lora", "qlora", "full"}) {
    SECTION(mode) {
      TempDir dir("cli_reward_" + mode);
      const std::string extra = mode == "full"    ? " --full"
                                : mode == "qlora" ? " --quantize nf4 --lora-targets q,v,down"
                                                  : "";
      const CliRun r = run_ember("reward " + pair_args(dir, "run") +
                                 " --steps 3 --eval-every 3 --val-fraction 0.25 --grad-accum 2 "
                                 "--center-rewards 0.1" + extra);
      INFO(r.out << r.err);
      REQUIRE(r.code == 0);
      CHECK(r.out.find("ember reward: ") != std::string::npos);
      CHECK(r.out.find("data: 12 pairs, 3 held out for validation\n") != std::string::npos);
      CHECK(r.out.find("step 0: val loss ") != std::string::npos);
      CHECK(r.out.find("(reward accuracy ") != std::string::npos);
      const std::vector<json> m = metrics(dir / "run/metrics.jsonl");
      REQUIRE(m.size() == 4);  // step 0 (held-out, before), steps 1..3
      for (size_t i = 1; i < m.size(); ++i) {
        CHECK_FALSE(m[i].contains("z"));
        CHECK_FALSE(m[i].contains("aux"));
        CHECK_FALSE(m[i].contains("rewards/accuracy"));
        for (const std::string& k : kKeys) {
          REQUIRE(m[i].contains(k));
          CHECK(std::isfinite(m[i].at(k).get<double>()));
        }
        const double accuracy = m[i].at("accuracy").get<double>();  // a share of 4 pairs
        CHECK(accuracy * 4 == Approx(std::round(accuracy * 4)));
      }
      for (const json& rec : {m[0], m[3]}) {
        for (const std::string& k : kKeys) {
          REQUIRE(rec.contains("val_" + k));
          CHECK(std::isfinite(rec.at("val_" + k).get<double>()));
        }
      }
      const std::string ckpt = dir / "run/step_00000003.h5";
      const ember::nn::Checkpoint c = ember::nn::read_checkpoint(ckpt, false);
      CHECK(json::parse(c.config.reward) == json{{"center_rewards", 0.1}});
      REQUIRE(c.model.count("score.weight") == 1);
      CHECK(c.model.at("score.weight").shape() == ember::Shape({1, 16}));
      CHECK(c.model.count("model.layers.0.self_attn.q_proj.lora_A.weight") == (mode != "full"));
      CHECK(c.model.count("model.norm.weight") == (mode == "full"));
      const auto model = ember::nn::model_from_checkpoint(c, ckpt);
      CHECK(model->has_score_head());
      CHECK(fs::exists(dir / "run/loss.svg"));
    }
  }
}

TEST_CASE("ember reward --resume continues bit for bit", "[cli][reward]") {
  TempDir dir("cli_reward_resume");
  const std::string common =
      " --val-fraction 0.25 --eval-every 1 --lora-dropout 0.1 --grad-accum 2 --center-rewards 0.05";
  CliRun r = run_ember("reward " + pair_args(dir, "full") + " --steps 4" + common);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  r = run_ember("reward " + pair_args(dir, "split") + " --steps 2" + common);
  REQUIRE(r.code == 0);
  r = run_ember("align --resume " + (dir / "split") + " --steps 4");
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("is an ember reward run's checkpoint, not an ember align run's "
                                    "(continue it with ember reward --resume)"));
  r = run_ember("reward --resume " + (dir / "split") + " --steps 4");
  CHECK(r.err == "");
  REQUIRE(r.code == 0);
  const auto a = ember::nn::read_checkpoint(dir / "full/step_00000004.h5", false);
  const auto b = ember::nn::read_checkpoint(dir / "split/step_00000004.h5", false);
  REQUIRE(a.model.size() == b.model.size());
  REQUIRE(a.model.count("score.weight") == 1);
  for (const auto& [name, t] : a.model) {
    INFO(name);
    const ember::Tensor& u = b.model.at(name);
    REQUIRE(u.numel() == t.numel());
    CHECK(std::memcmp(t.data<float>(), u.data<float>(), sizeof(float) * t.numel()) == 0);
  }
  const std::vector<json> ma = metrics(dir / "full/metrics.jsonl"), mb = metrics(dir / "split/metrics.jsonl");
  REQUIRE(ma.size() == 5);
  REQUIRE(mb.size() == 5);
  for (size_t i = 0; i < ma.size(); ++i) {
    for (const std::string& k : kKeys) {
      if (i > 0) CHECK(ma[i].at(k) == mb[i].at(k));
      CHECK(ma[i].at("val_" + k) == mb[i].at("val_" + k));
    }
  }
}

TEST_CASE("ember reward: each bad input is one line, exit 1, nothing written in --out",
          "[cli][reward]") {
  TempDir dir("cli_reward_bad");
  // A reward model (a --full run's checkpoint: a plain checkpoint whose config has "reward").
  CliRun made = run_ember("reward " + pair_args(dir, "rm") + " --steps 1 --full --val-fraction 0");
  INFO(made.out << made.err);
  REQUIRE(made.code == 0);
  const std::string rm = "rm/step_00000001.h5";
  const auto data = [&](const std::string& name, const std::string& line) {
    std::ofstream(dir / name) << line << "\n";
    return name;
  };
  const std::string user = R"([{"role": "user", "content": "hi"}])";
  const std::string a0 = R"([{"role": "assistant", "content": ""}])";
  const std::string a2 = R"([{"role": "assistant", "content": "no"}])";
  struct Case {
    std::string command, pairs, expected;  // pairs: the data file, then options
    std::string base = "base.h5";
  };
  const std::vector<Case> cases = {
      {"reward", data("not_json.jsonl", "{not json"), "not_json.jsonl line 1"},
      {"reward", data("missing.jsonl", R"({"prompt": "a", "chosen": "b"})"),
       "missing.jsonl line 1: \"rejected\""},
      {"reward", data("empty.jsonl", R"({"prompt": )" + user + R"(, "chosen": )" + a0 +
                                         R"(, "rejected": )" + a2 + "}"),
       "empty.jsonl line 1: \"chosen\""},
      {"reward",
       data("dropped.jsonl", R"({"prompt": ")" + std::string(80, 'p') + R"(", "chosen": "a", "rejected": "b"})"),
       "dropped.jsonl: no pair left"},
      {"reward", "pairs.jsonl --center-rewards=-1", "--center-rewards must be >= 0"},
      {"reward", "pairs.jsonl", "is a reward model (its config has \"reward\")", rm},
      {"align", "pairs.jsonl", "is a reward model (its config has \"reward\")", rm},
  };
  for (const Case& c : cases) {
    const size_t space = c.pairs.find(' ');
    const std::string file = c.pairs.substr(0, space);
    const std::string extra = space == std::string::npos ? "" : c.pairs.substr(space);
    INFO(c.command << " " << c.pairs);
    const CliRun r =
        run_ember(c.command + " " + pair_args(dir, "run", file, c.base) + " --steps 1" + extra);
    INFO(r.out << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.rfind("ember: error: ", 0) == 0);
    CHECK(r.err.find(c.expected) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir / "run"));
  }
}
