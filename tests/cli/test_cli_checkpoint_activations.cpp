// `ember train` and `ember finetune` with --checkpoint-activations / --checkpoint-every K
// (docs/cli.md#activation-checkpointing): the same losses, gradient norms, validation, final
// weights, AdamW moments and dropout offset as without, to the last bit (dense with dropout,
// MoE with both auxiliary losses, tied and untied heads, gradient accumulation, --dtype bf16,
// LoRA over an MoE base with padded chat rows); and the option's bounds.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "finetune_testing.h"
#include "nn/checkpoint_file.h"
#include "cli_run.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using ember::testing::read_text;
using ember::testing::TempDir;
using Run = ember::testing::CliRun;
using ember::testing::run_cli;

namespace {

// The numbers of every metrics.jsonl line that do not measure time.
std::vector<nlohmann::json> metric_values(const std::string& run) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(read_text(run + "/metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    for (const char* timing : {"tokens_per_s", "ms_per_step", "mfu", "eta_s", "elapsed_s"}) j.erase(timing);
    lines.push_back(j);
  }
  return lines;
}

bool same_bits(const ember::Tensor& a, const ember::Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const ember::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(),
                     static_cast<size_t>(ca.numel()) * ember::dtype_size(ca.dtype())) == 0;
}

void check_same_tensors(const std::map<std::string, ember::Tensor>& a,
                        const std::map<std::string, ember::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) {
    INFO(name);
    REQUIRE(b.count(name));
    CHECK(same_bits(t, b.at(name)));
  }
}

// Runs `ember COMMAND ARGS` plainly, with --checkpoint-activations and with --checkpoint-every 2,
// each into its own folder, and checks the three runs agree bit for bit.
void check_runs_agree(const TempDir& dir, const std::string& command, const std::string& args,
                      const std::string& final_checkpoint) {
  const std::vector<std::string> variants = {"", " --checkpoint-activations", " --checkpoint-every 2"};
  static int calls = 0;  // each call's runs get fresh folders
  ++calls;
  std::vector<std::string> outs;
  for (size_t i = 0; i < variants.size(); ++i) {
    outs.push_back(dir / ("run" + std::to_string(calls) + "_" + std::to_string(i)));
    const Run r = run_cli(dir, command + " " + args + " --out " + outs.back() + variants[i]);
    INFO(command << args << variants[i] << "\n" << r.err);
    REQUIRE(r.code == 0);
    CHECK((r.out.find(" blocks keep only their input and are recomputed in backward") !=
           std::string::npos) == (i > 0));
  }
  const std::vector<nlohmann::json> plain_metrics = metric_values(outs[0]);
  const ember::nn::Checkpoint plain = ember::nn::read_checkpoint(outs[0] + "/" + final_checkpoint);
  REQUIRE(plain.train_state);
  for (size_t i = 1; i < outs.size(); ++i) {
    INFO(command << " " << args << variants[i]);
    const std::vector<nlohmann::json> metrics = metric_values(outs[i]);
    REQUIRE(metrics.size() == plain_metrics.size());
    for (size_t k = 0; k < metrics.size(); ++k) CHECK(metrics[k].dump() == plain_metrics[k].dump());
    const ember::nn::Checkpoint c = ember::nn::read_checkpoint(outs[i] + "/" + final_checkpoint);
    check_same_tensors(plain.model, c.model);
    check_same_tensors(plain.optim, c.optim);
    REQUIRE(c.train_state);
    CHECK(nlohmann::json::parse(*c.train_state).at("dropout_offset") ==
          nlohmann::json::parse(*plain.train_state).at("dropout_offset"));
  }
}

void write_corpus(const TempDir& dir) {
  std::ofstream corpus(dir / "corpus.txt");
  for (int i = 0; i < 200; ++i) corpus << "line " << i << ": the quick brown fox jumps over the lazy dog.\n";
}

const char* kTrain =
    " --batch-size 2 --seq-len 16 --steps 4 --warmup 1 --lr 0.01 --log-every 1000 --eval-batches 1 --eval-every 2";

}  // namespace

TEST_CASE("train with activation checkpointing: the same run to the last bit", "[cli][train][checkpoint]") {
  TempDir dir("cli_actckpt");
  write_corpus(dir);
  const std::string data = " --data " + (dir / "corpus.txt");
  SECTION("dense, dropout, tied head, gradient accumulation 2, float32 and bf16") {
    dir.write("dense.json", R"({"vocab_size": 256, "d_model": 16, "n_layers": 3, "n_heads": 2,
      "ffn_hidden": 32, "max_seq_len": 32, "dropout": 0.1, "z_loss_coef": 1e-3})");
    for (const char* dtype : {"float32", "bf16"}) {
      check_runs_agree(dir, "train", "--config " + (dir / "dense.json") + data + kTrain +
                                         " --grad-accum 2 --dtype " + dtype, "step_00000004.h5");
    }
  }
  SECTION("MoE with aux and router z losses, dropout, untied head, float32 and bf16") {
    dir.write("moe.json", R"({"vocab_size": 256, "d_model": 16, "n_layers": 3, "n_heads": 2,
      "ffn_hidden": 32, "max_seq_len": 32, "dropout": 0.1, "tie_embeddings": false,
      "moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 16, "n_shared": 1,
              "aux_loss_coef": 0.01, "router_z_loss_coef": 0.001}})");
    check_runs_agree(dir, "train", "--config " + (dir / "moe.json") + data + kTrain + " --grad-accum 2",
                     "step_00000004.h5");
    check_runs_agree(dir, "train", "--config " + (dir / "moe.json") + data + kTrain + " --dtype bf16",
                     "step_00000004.h5");
  }
}

TEST_CASE("finetune with activation checkpointing: the same run to the last bit", "[cli][finetune][checkpoint]") {
  TempDir dir("cli_actckpt_ft");
  ember::testing::write_chat_base(dir / "moe_base.h5", true);
  ember::testing::write_chat_data(dir / "chat.jsonl");
  const std::string args = "--base " + (dir / "moe_base.h5") + " --data " + (dir / "chat.jsonl") +
                           " --batch-size 2 --seq-len 32 --steps 3 --warmup 1 --lr 1e-2";
  check_runs_agree(dir, "finetune", args + " --lora-dropout 0.1 --lora-targets q,v,up,down",
                   "step_00000003.h5");
  check_runs_agree(dir, "finetune", args + " --full --grad-accum 2", "step_00000003.h5");
}

TEST_CASE("train and finetune refuse --checkpoint-every 0", "[cli][train][checkpoint]") {
  TempDir dir("cli_actckpt_bounds");
  write_corpus(dir);
  const Run r = run_cli(dir, "train --data " + (dir / "corpus.txt") + " --out " + (dir / "run") +
                               " --steps 1 --checkpoint-every 0");
  CHECK(r.code == 1);
  CHECK(r.err == "ember: error: --checkpoint-every must be >= 1 (1: every block); got 0\n");
  CHECK_FALSE(fs::exists(dir.path / "run" / "metrics.jsonl"));
  dir.write("four.json", R"({"vocab_size": 256, "d_model": 16, "n_layers": 4, "n_heads": 2,
    "ffn_hidden": 32, "max_seq_len": 32})");
  const std::string one_step = "train --config " + (dir / "four.json") + " --data " + (dir / "corpus.txt") +
                               " --steps 1 --batch-size 1 --seq-len 8 --eval-batches 0 --out ";
  CHECK(run_cli(dir, one_step + (dir / "every3") + " --checkpoint-every 3").out.find(
            "\nactivation checkpointing: 2 of 4 blocks keep only their input") != std::string::npos);
  CHECK(run_cli(dir, one_step + (dir / "all") + " --checkpoint-activations").out.find(
            "\nactivation checkpointing: 4 of 4 blocks") != std::string::npos);
  const Run help = run_cli(dir, "train --help");
  CHECK(help.out.find("--checkpoint-activations") != std::string::npos);
  CHECK(help.out.find("--checkpoint-every") != std::string::npos);
  CHECK(run_cli(dir, "finetune --help").out.find("--checkpoint-every") != std::string::npos);
}
