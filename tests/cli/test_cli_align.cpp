// The `ember align` program (docs/cli.md#alignment): each loss trains a few steps and logs its
// metrics (loss, rewards/chosen, rewards/rejected, rewards/margins, rewards/accuracy, finite) per
// step and on the held-out pairs; dpo's first step is log 2 with rewards 0 when the policy is
// the reference (LoRA's B = 0 at init, and --full); the reference log-probabilities are kept
// in OUT/ref_logps.json and --resume reads them (a run of 4 steps = 2 + resume 2, bit for bit);
// each bad input is one "ember: error:" line, exit 1 and nothing written in --out.
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

// `ember align ARGS`.
CliRun align(const std::string& args) { return run_ember("align " + args); }

// Base and pairs in dir; a small LoRA run into dir/out.
std::string pair_args(const TempDir& dir, const std::string& out,
                      const std::string& pairs = "pairs.jsonl") {
  if (!fs::exists(dir / "base.h5")) ember::testing::write_chat_base(dir / "base.h5");
  if (!fs::exists(dir / "pairs.jsonl")) ember::testing::write_pair_data(dir / "pairs.jsonl", 12);
  return "--base " + (dir / "base.h5") + " --data " + (dir / pairs) + " --out " +
         (dir / out) + " --batch-size 2 --seq-len 32 --lr 1e-2 --warmup 1 --schedule constant";
}

std::vector<json> metrics(const std::string& path) {
  std::vector<json> lines;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) lines.push_back(json::parse(line));
  return lines;
}

const std::vector<std::string> kKeys = {"loss", "rewards/chosen", "rewards/rejected",
                                        "rewards/margins", "rewards/accuracy"};

json align_config_of(const std::string& checkpoint) {
  return json::parse(ember::nn::read_checkpoint_config(checkpoint).to_json()).at("align");
}

}  // namespace

TEST_CASE("ember align trains every loss and logs its metrics, on the steps and held-out pairs",
          "[cli][align]") {
  for (const std::string loss : {"dpo", "ipo", "simpo", "orpo"}) {
    SECTION(loss) {
      TempDir dir("cli_align_" + loss);
      // Each loss's own option, and the SFT term on two of them.
      const std::string extra = loss == "dpo"     ? " --label-smoothing 0.1"
                                : loss == "simpo" ? " --simpo-gamma 0.3 --sft-weight 0.5"
                                : loss == "orpo"  ? " --sft-weight 0.5"
                                                  : "";
      const CliRun r = align(pair_args(dir, "run") + " --steps 3 --eval-every 3 --val-fraction 0.25 --loss " +
                                   loss + extra);
      INFO(r.out << r.err);
      REQUIRE(r.code == 0);
      CHECK(r.out.find("ember align: ") != std::string::npos);
      CHECK(r.out.find("data: 12 pairs, 3 held out for validation\n") != std::string::npos);
      const std::vector<json> m = metrics(dir / "run/metrics.jsonl");
      REQUIRE(m.size() == 4);  // step 0 (held-out, before), steps 1..3
      CHECK(m[0].at("step") == 0);
      for (size_t i = 1; i < m.size(); ++i) {
        CHECK(m[i].at("step") == static_cast<int>(i));
        CHECK_FALSE(m[i].contains("z"));
        for (const std::string& k : kKeys) {
          REQUIRE(m[i].contains(k));
          CHECK(std::isfinite(m[i].at(k).get<double>()));
        }
        CHECK(m[i].at("rewards/margins").get<double>() ==
              Approx(m[i].at("rewards/chosen").get<double>() -
                     m[i].at("rewards/rejected").get<double>()).margin(1e-9));
      }
      for (const json& rec : {m[0], m[3]}) {
        for (const std::string& k : kKeys) {
          REQUIRE(rec.contains("val_" + k));
          CHECK(std::isfinite(rec.at("val_" + k).get<double>()));
        }
      }
      const double accuracy = m[3].at("val_rewards/accuracy").get<double>();
      CHECK(accuracy * 3 == Approx(std::round(accuracy * 3)));  // a share of 3 pairs
      const json a = align_config_of(dir / "run/step_00000003.h5");
      CHECK(a.at("loss") == loss);
      CHECK(a.at("beta").get<double>() == (loss == "simpo" ? 2.0 : 0.1));
      CHECK(a.at("sft_weight").get<double>() == (loss == "simpo" || loss == "orpo" ? 0.5 : 0.0));
      if (loss == "dpo") CHECK(a.at("label_smoothing").get<double>() == 0.1);
      if (loss == "simpo") CHECK(a.at("simpo_gamma").get<double>() == 0.3);
      CHECK(fs::exists(dir / "run/ref_logps.json") == (loss == "dpo" || loss == "ipo"));
      CHECK(fs::exists(dir / "run/loss.svg"));
    }
  }
}

TEST_CASE("ember align --loss dpo: the first step is log 2 with rewards 0 when the policy is the reference",
          "[cli][align]") {
  // The reference: the base under the adapters (LoRA, QLoRA; with the rows --add-chat-tokens
  // added), the model before its first step (--full), or --ref naming the base.
  for (const std::string mode : {"lora", "qlora", "full", "ref", "chat-tokens"}) {
    SECTION(mode) {
      TempDir dir("cli_align_log2_" + mode);
      if (mode == "chat-tokens") ember::testing::write_base_without_chat_tokens(dir / "base.h5");
      const std::string extra = mode == "full"          ? " --full"
                                : mode == "qlora"       ? " --quantize nf4 --lora-targets q,v,down"
                                : mode == "ref"         ? " --ref " + (dir / "base.h5")
                                : mode == "chat-tokens" ? " --add-chat-tokens"
                                                        : "";
      const CliRun r = align(pair_args(dir, "run") + " --steps 1 --grad-accum 2 --val-fraction 0.25" + extra);
      INFO(r.out << r.err);
      REQUIRE(r.code == 0);
      if (mode == "chat-tokens") CHECK(r.out.find(" new vocabulary rows") != std::string::npos);
      const std::vector<json> m = metrics(dir / "run/metrics.jsonl");
      REQUIRE(m.size() == 2);
      CHECK(std::abs(m[1].at("loss").get<double>() - std::log(2.0)) < 1e-6);
      CHECK(std::abs(m[0].at("val_loss").get<double>() - std::log(2.0)) < 1e-6);
      for (const char* k : {"rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracy"})
        CHECK(std::abs(m[1].at(k).get<double>()) < 1e-6);
      CHECK(m[1].at("grad_norm").get<double>() > 0);
    }
  }
}

TEST_CASE("ember align --resume continues bit for bit and reads the reference log-probabilities back",
          "[cli][align]") {
  TempDir dir("cli_align_resume");
  const std::string common = " --val-fraction 0.25 --eval-every 1 --lora-dropout 0.1 --grad-accum 2";
  CliRun r = align(pair_args(dir, "full") + " --steps 4" + common);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  r = align(pair_args(dir, "split") + " --steps 2" + common);
  REQUIRE(r.code == 0);
  const std::string ref = read_text(dir / "split/ref_logps.json");
  fs::rename(dir / "split/ref_logps.json", dir / "ref_logps.json");
  r = align("--resume " + (dir / "split") + " --steps 4");
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("ref_logps.json: missing"));
  fs::rename(dir / "ref_logps.json", dir / "split/ref_logps.json");
  r = align("--resume " + (dir / "split") + " --steps 4");
  CHECK(r.err == "");
  REQUIRE(r.code == 0);
  CHECK(read_text(dir / "split/ref_logps.json") == ref);
  const auto a = ember::nn::read_checkpoint(dir / "full/step_00000004.h5", false);
  const auto b = ember::nn::read_checkpoint(dir / "split/step_00000004.h5", false);
  REQUIRE(a.model.size() == b.model.size());
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

TEST_CASE("ember align reports dropped pairs and pairs cut to T+1", "[cli][align]") {
  TempDir dir("cli_align_dropped");
  ember::testing::write_pair_data(dir / "pairs.jsonl", 12, 5);
  const CliRun r = align(pair_args(dir, "run") + " --steps 1 --val-fraction 0 --seq-len 24");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("data: 11 pairs, no validation; 1 dropped (a side without a completion token in its first 25); ") !=
        std::string::npos);
  CHECK(r.out.find(" cut to --seq-len + 1 = 25 tokens") != std::string::npos);
  CHECK_FALSE(json::parse(read_text(dir / "run/ref_logps.json")).at("train").empty());
}

TEST_CASE("ember align: each bad input is one line, exit 1, nothing written in --out", "[cli][align]") {
  TempDir dir("cli_align_bad");
  ember::testing::write_base_without_chat_tokens(dir / "other_vocab.h5");
  const auto data = [&](const std::string& name, const std::string& line) {
    std::ofstream(dir / name) << line << "\n";
    return name;
  };
  const std::string user = R"([{"role": "user", "content": "hi"}])";
  const std::string a1 = R"([{"role": "assistant", "content": "yes"}])";
  const std::string a2 = R"([{"role": "assistant", "content": "no"}])";
  const std::string a0 = R"([{"role": "assistant", "content": ""}])";
  struct Case {
    std::string pairs, expected;  // the data file (for the options: pairs.jsonl and its option)
  };
  const std::vector<Case> cases = {
      {data("not_json.jsonl", "{not json"), "not_json.jsonl line 1"},
      {data("missing.jsonl", R"({"prompt": "a", "chosen": "b"})"), "missing.jsonl line 1: \"rejected\""},
      {data("mistyped.jsonl", R"({"prompt": "a", "chosen": 3, "rejected": "c"})"),
       "mistyped.jsonl line 1: \"chosen\""},
      {data("empty.jsonl", R"({"prompt": )" + user + R"(, "chosen": )" + a0 + R"(, "rejected": )" + a2 + "}"),
       "empty.jsonl line 1: \"chosen\""},
      {data("prompt.jsonl", R"({"prompt": )" + a1 + R"(, "chosen": )" + a1 + R"(, "rejected": )" + a2 + "}"),
       "prompt.jsonl line 1: \"prompt\""},
      {data("dropped.jsonl", R"({"prompt": ")" + std::string(80, 'p') + R"(", "chosen": "a", "rejected": "b"})"),
       "dropped.jsonl: no pair left"},
      {"pairs.jsonl" + std::string(" --ref " + (dir / "other_vocab.h5")), "--ref " + (dir / "other_vocab.h5") + ": its vocabulary of 257"},
      {"pairs.jsonl" + std::string(" --beta 0"), "--beta must be > 0"},
      {"pairs.jsonl" + std::string(" --beta=-1"), "--beta must be > 0"},
      {"pairs.jsonl" + std::string(" --label-smoothing 0.5"), "--label-smoothing must be in [0, 0.5)"},
      {"pairs.jsonl" + std::string(" --label-smoothing=-0.1"), "--label-smoothing must be in [0, 0.5)"},
      {"pairs.jsonl" + std::string(" --loss kto"), "--loss must be one of dpo, ipo, simpo, orpo"},
  };
  for (const Case& c : cases) {
    const size_t space = c.pairs.find(' ');
    const std::string file = c.pairs.substr(0, space);
    const std::string extra = space == std::string::npos ? "" : c.pairs.substr(space);
    INFO(c.pairs);
    const CliRun r = align(pair_args(dir, "run", file) + " --steps 1" + extra);
    INFO(r.out << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.rfind("ember: error: ", 0) == 0);
    CHECK(r.err.find(c.expected) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir / "run"));
  }
}
