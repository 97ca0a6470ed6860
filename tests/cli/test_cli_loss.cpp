// `ember loss` (and `ember eval`, its old spelling, docs/cli.md): the same loss and bits per
// byte as `ember train`'s validation, bits per byte worked by hand on a zero model, --grads-out
// never overwriting a file, and both spellings printing the same.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.h"
#include "cli_testing.h"
#include "data/token_shard.h"
#include "nn/checkpoint_file.h"
#include "nn/transformer.h"

namespace fs = std::filesystem;

namespace {

using Run = ember::testing::CliRun;
using ember::testing::check_plain_message;
using ember::testing::read_text;
using ember::testing::run_ember;
using ember::testing::TempDir;
using ember::testing::tiny_config;
using ember::testing::write_corpus;
using ember::testing::zero_checkpoint;

// The number after `key` in a line of text ("val_loss":5.56 or "loss 5.56").
double number_after(const std::string& text, const std::string& key) {
  const size_t at = text.rfind(key);
  REQUIRE(at != std::string::npos);
  return std::stod(text.substr(at + key.size()));
}

}  // namespace

TEST_CASE("ember eval and ember train's validation give the same loss and bits per byte", "[cli][eval]") {
  TempDir dir("cli_eval_same");
  write_corpus(dir, "corpus.txt");
  dir.write("tiny.json", tiny_config(256));
  const Run t = run_ember("train --config " + dir / "tiny.json" + " --data " + dir / "corpus.txt" + " --out " +
                      dir / "run" + " --vocab-size 300 --steps 3 --batch-size 2 --seq-len 16 --eval-batches 2 "
                      "--val-fraction 0.3 --log-every 100");
  REQUIRE(t.code == 0);
  // The last metrics line holds the end-of-run validation: 2 batches of 2 x 16 of OUT/data/val.
  const std::string metrics = read_text(dir.path / "run" / "metrics.jsonl");
  const double val_loss = number_after(metrics, "\"val_loss\":"), val_bpb = number_after(metrics, "\"val_bpb\":");
  const Run e = run_ember("eval --checkpoint " + dir / "run/step_00000003.h5" + " --data " + dir / "run/data/val" +
                      " --batch-size 2 --seq-len 16 --batches 2");
  REQUIRE(e.code == 0);
  INFO(e.out);
  CHECK(std::abs(number_after(e.out, "loss ") - val_loss) < 1e-6);
  REQUIRE(e.out.find(" bits per byte") != std::string::npos);  // the checkpoint stores the BPE tokenizer
  CHECK(std::abs(number_after(e.out, "tokens; ") - val_bpb) < 1e-6);
  CHECK(t.out.find("bits/byte") != std::string::npos);
}

TEST_CASE("bits per byte: CE in nats over the targets / (ln 2 x their text's bytes), <|endoftext|> has none",
          "[cli][eval]") {
  TempDir dir("cli_eval_bpb");
  ember::nn::write_checkpoint(dir / "zero.h5", zero_checkpoint(tiny_config(257)));
  // T = 4, B = 1, 2 batches: targets 'b' EOT 'c' 0xC3 | 0xA9 EOT 'd' 'e' = 8 tokens, 6 bytes of text.
  const std::vector<uint32_t> tokens = {'a', 'b', 256, 'c', 0xC3, 0xA9, 256, 'd', 'e'};
  ember::data::write_shard(dir / "tokens.bin", tokens, 257);
  const Run r = run_ember("eval --checkpoint " + dir / "zero.h5" + " --data " + dir / "tokens.bin" +
                      " --batch-size 1 --seq-len 4 --batches 2");
  REQUIRE(r.code == 0);
  INFO(r.out);
  const double ce = std::log(257.0);  // uniform logits
  CHECK(std::abs(number_after(r.out, "loss ") - ce) < 1e-5);
  CHECK(r.out.find("(8 tokens, 6 bytes)") != std::string::npos);
  CHECK(std::abs(number_after(r.out, "tokens; ") - 8 * ce / (std::log(2.0) * 6)) < 1e-5);
  // Without a tokenizer (vocab 300, none stored) the figure is bits per token.
  ember::nn::write_checkpoint(dir / "zero300.h5", zero_checkpoint(tiny_config(300)));
  const Run p = run_ember("eval --checkpoint " + dir / "zero300.h5" + " --data " + dir / "tokens.bin" +
                      " --batch-size 1 --seq-len 4 --batches 2");
  REQUIRE(p.code == 0);
  CHECK(p.out.find("bits per token") != std::string::npos);
  CHECK(std::abs(number_after(p.out, "tokens; ") - std::log2(300.0)) < 1e-5);
}

TEST_CASE("eval --grads-out never overwrites a file and leaves no temporary", "[cli][eval]") {
  TempDir dir("cli_grads_out");
  ember::nn::write_checkpoint(dir / "zero.h5", zero_checkpoint(tiny_config(257)));
  const std::vector<uint32_t> tokens = {'a', 'b', 256, 'c', 0xC3, 0xA9, 256, 'd', 'e'};
  ember::data::write_shard(dir / "tokens.bin", tokens, 257);
  const std::string args = "eval --checkpoint " + dir / "zero.h5" + " --data " + dir / "tokens.bin" +
                           " --batch-size 1 --seq-len 4 --grads-out ";
  const std::string before = read_text(dir.path / "zero.h5");
  const Run r = run_ember(args + dir / "zero.h5");  // the checkpoint itself
  CHECK(r.code == 1);
  check_plain_message(r.err);
  CHECK(r.err.find("--grads-out") != std::string::npos);
  CHECK(read_text(dir.path / "zero.h5") == before);
  const Run ok = run_ember(args + dir / "grads.h5");
  CHECK(ok.code == 0);
  CHECK(fs::exists(dir.path / "grads.h5"));
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++files;
  CHECK(files == 3);  // zero.h5, tokens.bin, grads.h5: no temporary left
  CHECK(run_ember(args + dir / "grads.h5").code == 1);
}

TEST_CASE("ember loss and ember eval print the same, and --help lists eval as the old spelling of loss",
          "[cli][loss]") {
  TempDir dir("cli_loss_eval");
  ember::nn::Checkpoint c = zero_checkpoint(tiny_config(257));
  c.model = ember::nn::Transformer(c.config, 5).state_dict();  // random weights: a loss of their own
  ember::nn::write_checkpoint(dir / "model.h5", c);
  const std::vector<uint32_t> tokens = {'a', 'b', 256, 'c', 0xC3, 0xA9, 256, 'd', 'e'};
  ember::data::write_shard(dir / "tokens.bin", tokens, 257);
  const std::string args = " --checkpoint " + dir / "model.h5" + " --data " + dir / "tokens.bin" +
                           " --batch-size 1 --seq-len 4 --batches 2";
  const Run loss = run_ember("loss" + args);
  const Run eval = run_ember("eval" + args);
  INFO("loss: " << loss.out << loss.err << "eval: " << eval.out << eval.err);
  REQUIRE(loss.code == 0);
  CHECK(loss.out.starts_with("loss "));
  CHECK(loss.out.find(" bits per byte (8 tokens, 6 bytes)") != std::string::npos);
  CHECK(eval.code == 0);
  CHECK(eval.out == loss.out);
  CHECK(eval.err == loss.err);
  // Both listed under "Subcommands:", eval as the old spelling of loss.
  const std::string help = run_ember("--help").out;
  const size_t subcommands = help.find("Subcommands:");
  REQUIRE(subcommands != std::string::npos);
  const std::string listed = help.substr(subcommands);
  CHECK(std::regex_search(listed, std::regex(R"(\n  loss +Mean loss and bits per byte of a checkpoint)")));
  CHECK(std::regex_search(listed, std::regex(R"(\n  eval +The old spelling of `ember loss` \(same options and output\)\n)")));
}
