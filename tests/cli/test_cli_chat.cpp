// `ember chat` (docs/cli.md#chat-generation): one reply per line of stdin keeping the
// conversation, /reset and /exit, the oldest turns dropped when the context is full, a trained
// checkpoint's tokenizer reserving the chat tokens, and a tokenizer without them refused.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "cli_run.h"
#include "cli_testing.h"
#include "data/tokenizer/tokenizer.h"
#include "nn/checkpoint_file.h"

namespace {

using Run = ember::testing::CliRun;
using ember::testing::chat_checkpoint;
using ember::testing::check_plain_message;
using ember::testing::latest_name;
using ember::testing::read_text;
using ember::testing::run_ember;
using ember::testing::TempDir;
using ember::testing::tiny_train;

// Runs `ember ARGS` with `input` as its stdin.
Run run_with_input(const TempDir& dir, const std::string& args, const std::string& input) {
  dir.write("stdin.txt", input);
  const std::string cmd = std::string(EMBER_BINARY) + " " + args + " > " + dir / "out" + " 2> " + dir / "err" +
                          " < " + dir / "stdin.txt";
  const int status = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(dir.path / "out");
  r.err = read_text(dir.path / "err");
  return r;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

// The hand-made checkpoint (byte tokenizer, specials 256-258, context 64) always
// draws 'x'. Rendered lengths: a user message "hi" is 10 tokens (<|im_start|>
// "user\nhi" <|im_end|> "\n"), a reply "xxx" 16, "--system s" 11, the
// generation header <|im_start|> "assistant\n" 11.
TEST_CASE("ember chat answers each line, keeping the conversation", "[cli][chat]") {
  TempDir dir("cli_chat");
  ember::nn::write_checkpoint(dir / "x.h5", chat_checkpoint('x', true));
  const std::string chat = "chat --checkpoint " + dir / "x.h5" + " --temperature 0 --max-tokens 3";
  Run r = run_with_input(dir, chat + " --system s", "hi\nhi\n");
  CHECK(r.code == 0);
  CHECK(r.out == "xxx\nxxx\n");
  CHECK(count(r.err, "maximum number of new tokens") == 2);
  CHECK(count(r.err, "prompt 32 tokens") == 1);  // 11 + 10 + 11
  CHECK(count(r.err, "prompt 58 tokens") == 1);  // 11 + 10 + 16 + 10 + 11: the first turn is kept
  // /exit ends the conversation; /reset starts a new one.
  r = run_with_input(dir, chat, "hi\n/reset\nhi\n/exit\nhi\n");
  CHECK(r.code == 0);
  CHECK(r.out == "xxx\nxxx\n");
  CHECK(count(r.err, "prompt 21 tokens") == 2);
  CHECK(count(r.err, "[conversation cleared]") == 1);
  // An empty reply: the first token drawn is <|im_end|>.
  ember::nn::write_checkpoint(dir / "end.h5", chat_checkpoint(258, true));
  r = run_with_input(dir, "chat --checkpoint " + dir / "end.h5" + " --temperature 0", "hi\n");
  CHECK(r.code == 0);
  CHECK(r.out == "\n");
  CHECK(r.err.find("reached the <|im_end|> token") != std::string::npos);
}

TEST_CASE("ember chat drops the oldest turns when the context is full, saying so once", "[cli][chat]") {
  TempDir dir("cli_chat_full");
  ember::nn::write_checkpoint(dir / "x.h5", chat_checkpoint('x', true));
  // Turn 3 would need 10 + 16 + 10 + 16 + 21 + 3 (reply room) > 64: turn 1 goes, the prompt is 47 tokens.
  const Run r = run_with_input(dir, "chat --checkpoint " + dir / "x.h5" + " --temperature 0 --max-tokens 3",
                               "hi\nhi\nhi\nhi\n");
  CHECK(r.code == 0);
  CHECK(r.out == "xxx\nxxx\nxxx\nxxx\n");
  CHECK(count(r.err, "prompt 21 tokens") == 1);
  CHECK(count(r.err, "prompt 47 tokens") == 3);
  CHECK(count(r.err, "dropping the oldest turns") == 1);
  // A message too long even alone (1 + 65 + 1 + 1 + 11 tokens) is not sent; the conversation stays.
  const Run big = run_with_input(dir, "chat --checkpoint " + dir / "x.h5" + " --temperature 0 --max-tokens 3",
                                 "hi\n" + std::string(60, 'a') + "\nhi\n");
  CHECK(big.code == 0);
  CHECK(big.out == "xxx\nxxx\n");
  CHECK(count(big.err, "needs 79 tokens; the model's context holds 64: not sent") == 1);  // no --system: not named
  CHECK(count(big.err, "prompt 47 tokens") == 1);
}

TEST_CASE("ember chat on a trained checkpoint: its tokenizer reserves the chat tokens", "[cli][chat]") {
  TempDir dir("cli_chat_trained");
  REQUIRE(run_ember(tiny_train(dir) + " --steps 2 --vocab-size 300").code == 0);
  const std::string ckpt = dir / ("run/" + latest_name(dir / "run"));
  const ember::data::Tokenizer tok =
      ember::data::Tokenizer::from_json(ember::nn::read_checkpoint(ckpt, false).tokenizer_json);
  CHECK(tok.vocab_size() == 300);
  CHECK(tok.missing_chat_tokens() == 0);
  const std::string sampling = " --temperature 0 --max-tokens 4";
  const Run r = run_with_input(dir, "chat --checkpoint " + ckpt + sampling, "the fox\nand the dog?\n");
  CHECK(r.code == 0);
  CHECK(count(r.err, "decode") == 2);  // one line per reply
  // The first reply is what `generate --chat` answers to the same message.
  const Run one = run_ember("generate --chat --checkpoint " + ckpt + sampling + " --prompt 'the fox'");
  REQUIRE(one.code == 0);
  CHECK(r.out.starts_with(one.out));
  CHECK(r.out.size() > one.out.size());
}

TEST_CASE("ember chat refuses a tokenizer without the chat tokens in one line naming --add-chat-tokens",
          "[cli][chat]") {
  TempDir dir("cli_chat_plain");
  ember::nn::write_checkpoint(dir / "plain.h5", chat_checkpoint('x', false));
  for (const std::string& cmd : {"chat --checkpoint " + dir / "plain.h5",
                                 "generate --chat --prompt hi --checkpoint " + dir / "plain.h5"}) {
    const Run r = run_with_input(dir, cmd, "hi\n");
    CHECK(r.code == 1);
    check_plain_message(r.err);
    CHECK(r.err.find("plain.h5: its tokenizer has no <|im_start|> or <|im_end|> special token") != std::string::npos);
    CHECK(r.err.find("--add-chat-tokens") != std::string::npos);
    CHECK(r.out.empty());
  }
}
