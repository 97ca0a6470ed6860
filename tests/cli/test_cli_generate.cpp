// `ember generate` (docs/cli.md#chat-generation): --chat prints only the reply and stops at
// <|im_end|>; a prompt longer than the context, a sampling option out of range, an endless
// --prompt-file and a tokenizer larger than the model are refused before anything is printed;
// a model's rows beyond its tokenizer are never drawn. The hand-made model (cli_testing.h's
// chat_checkpoint) draws one chosen token at every step.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <utility>

#include "cli_run.h"
#include "cli_testing.h"
#include "data/tokenizer/tokenizer.h"
#include "nn/checkpoint_file.h"
#include "scoped_env.h"

namespace {

using Run = ember::testing::CliRun;
using ember::testing::chat_checkpoint;
using ember::testing::check_plain_message;
using ember::testing::run_ember;
using ember::testing::TempDir;
using ember::testing::tiny_config;
using ember::testing::zero_checkpoint;

}  // namespace

TEST_CASE("generate --tokenizer with more tokens than the model names the option", "[cli][hostile]") {
  TempDir dir("cli_hostile_gen_tok");
  ember::nn::write_checkpoint(dir / "zero.h5", zero_checkpoint(tiny_config(257)));
  dir.write("tok.json", ember::data::Tokenizer::bytes({"<|endoftext|>", "<|pad|>", "<|x|>"}).to_json());
  const Run r = run_ember("generate --checkpoint " + dir / "zero.h5" + " --tokenizer " + dir / "tok.json" +
                          " --max-tokens 2");
  CHECK(r.code == 1);
  check_plain_message(r.err);
  CHECK(r.err.find("--tokenizer " + dir / "tok.json" + ": 259 tokens") != std::string::npos);
}

TEST_CASE("a bad EMBER_MAX_ISA is one error line before any work, whatever the weights", "[cli][hostile]") {
  TempDir dir("cli_hostile_isa");
  ember::nn::write_checkpoint(dir / "zero.h5", zero_checkpoint(tiny_config(257)));
  const ember::testing::ScopedEnv cap("EMBER_MAX_ISA", "amx");
  for (const char* weights : {"float32", "int8"}) {  // int8's kernels read it inside OpenMP regions
    INFO(weights);
    const Run r = run_ember("generate --checkpoint " + dir / "zero.h5" + " --prompt hi --max-tokens 2 --weights " +
                            weights);
    CHECK(r.code == 1);
    check_plain_message(r.err);
    CHECK(r.err.find("EMBER_MAX_ISA: expected generic, avx2 or avx512 (or unset), got \"amx\"") != std::string::npos);
    CHECK(r.out.empty());
  }
}

TEST_CASE("generate --chat prints only the reply and stops at <|im_end|>", "[cli][generate]") {
  TempDir dir("cli_generate_chat");
  ember::nn::write_checkpoint(dir / "x.h5", chat_checkpoint('x', true));
  ember::nn::write_checkpoint(dir / "end.h5", chat_checkpoint(258, true));
  const std::string opts = " --temperature 0 --max-tokens 5 --prompt hi";
  Run r = run_ember("generate --chat --checkpoint " + dir / "x.h5" + opts + " --system 'be brief'");
  CHECK(r.code == 0);
  CHECK(r.out == "xxxxx\n");  // no rendered prompt, no <|im_start|>
  CHECK(r.err.find("maximum number of new tokens") != std::string::npos);
  r = run_ember("generate --chat --checkpoint " + dir / "end.h5" + opts);
  CHECK(r.code == 0);
  CHECK(r.out == "\n");  // the first token is <|im_end|>: an empty reply
  CHECK(r.err.find("reached the <|im_end|> token") != std::string::npos);
  r = run_ember("generate --checkpoint " + dir / "x.h5" + opts);  // without --chat: the prompt, then the text
  CHECK(r.code == 0);
  CHECK(r.out == "hixxxxx\n");
  r = run_ember("generate --checkpoint " + dir / "x.h5" + opts + " --kv-cache-dtype bfloat16");
  CHECK(r.code == 0);
  CHECK(r.out == "hixxxxx\n");
  r = run_ember("generate --checkpoint " + dir / "x.h5" + opts + " --kv-cache-dtype float16");
  CHECK(r.code != 0);
  CHECK(r.out.empty());
  CHECK(r.err.find("--kv-cache-dtype: float16 not in {float32,bfloat16}") != std::string::npos);
  for (const char* weights : {"bf16", "int8"}) {  // the same greedy text from converted weights
    r = run_ember("generate --checkpoint " + dir / "x.h5" + opts + " --weights " + weights);
    CHECK(r.code == 0);
    CHECK(r.out == "hixxxxx\n");
  }
  r = run_ember("generate --checkpoint " + dir / "x.h5" + opts + " --weights int4");
  CHECK(r.code != 0);
  CHECK(r.out.empty());
  CHECK(r.err.find("--weights: int4 not in {float32,bf16,int8}") != std::string::npos);
}

TEST_CASE("generate refuses a prompt longer than max_seq_len before printing any of it", "[cli][generate]") {
  TempDir dir("cli_generate_long_prompt");
  ember::nn::write_checkpoint(dir / "x.h5", chat_checkpoint('x', true));  // max_seq_len 64
  const Run r = run_ember("generate --checkpoint " + dir / "x.h5" + " --max-tokens 2 --prompt " +
                          std::string(100, 'a'));  // 100 byte tokens
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "ember: error: generate: the prompt has 100 tokens, more than the model's max_seq_len of 64; "
                 "shorten it\n");
}

TEST_CASE("generate refuses a sampling option out of range before printing the prompt", "[cli][generate]") {
  TempDir dir("cli_generate_bad_sampling");
  ember::nn::write_checkpoint(dir / "x.h5", chat_checkpoint('x', true));
  const std::string base = "generate --checkpoint " + dir / "x.h5" + " --max-tokens 2 --prompt hi ";
  const std::pair<const char*, const char*> cases[] = {
      {"--temperature -1", "temperature must be >= 0"},
      {"--temperature nan", "temperature must be >= 0"},
      {"--top-p 2", "top_p must be in (0, 1]"},
      {"--top-k -3", "top_k must be >= 0"},
      {"--repetition-penalty 0", "repetition_penalty must be > 0"},
      {"--num-samples 0", "--num-samples must be positive, got 0"}};
  for (const auto& [option, message] : cases) {
    const Run r = run_ember(base + option);
    INFO(option << ": " << r.err);
    CHECK(r.code == 1);
    CHECK(r.out.empty());  // "hi" was echoed before the check
    check_plain_message(r.err);
    CHECK(r.err.find(message) != std::string::npos);
  }
}

TEST_CASE("generate --prompt-file refuses an endless stream instead of reading it forever", "[cli][generate]") {
  TempDir dir("cli_generate_endless_prompt");
  ember::nn::write_checkpoint(dir / "x.h5", chat_checkpoint('x', true));
  const Run r = run_ember("generate --checkpoint " + dir / "x.h5" + " --max-tokens 2 --prompt-file /dev/zero");
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "ember: error: /dev/zero: the prompt file is larger than 64 MiB, more than such a file holds "
                 "(an endless stream or device?)\n");
}

TEST_CASE("generate draws only ids its tokenizer decodes when the model's vocabulary is larger",
          "[cli][generate]") {
  // 300 rows over the 259-token tokenizer (as a preset's 50257 over a byte tokenizer): row 290, the
  // argmax, has no text; 'y' (logit 16 x 0.5 = 8) is the best id the tokenizer has.
  TempDir dir("cli_generate_padded_vocab");
  ember::nn::Checkpoint c = chat_checkpoint(290, true, 300);
  float* head = c.model.at("lm_head.weight").data<float>();
  for (int64_t j = 0; j < 16; ++j) head['y' * 16 + j] = 0.5f;
  ember::nn::write_checkpoint(dir / "padded.h5", c);
  Run r = run_ember("generate --checkpoint " + dir / "padded.h5" + " --temperature 0 --max-tokens 4 --prompt hi");
  CHECK(r.code == 0);
  CHECK(r.out == "hiyyyy\n");
  r = run_ember("generate --checkpoint " + dir / "padded.h5" + " --temperature 1 --top-k 0 --max-tokens 30 --prompt hi");
  CHECK(r.code == 0);  // sampled over the 259 decodable ids only
}

TEST_CASE("generate --chat refuses a tokenizer without the chat tokens", "[cli][generate]") {
  TempDir dir("cli_generate_chat_plain");
  ember::nn::write_checkpoint(dir / "plain.h5", chat_checkpoint('x', false));
  const Run r = run_ember("generate --chat --checkpoint " + dir / "plain.h5" + " --prompt hi --max-tokens 2");
  CHECK(r.code == 1);
  check_plain_message(r.err);
  CHECK(r.err.find("<|im_start|>") != std::string::npos);
  CHECK(r.out.empty());
  CHECK(run_ember("generate --system hi --checkpoint " + dir / "plain.h5").code == 2);  // --system needs --chat
}
