// What `ember` writes where it could lose data or garble a terminal (docs/cli.md):
// generate and chat on a terminal (a pseudo-terminal here) replace invalid UTF-8,
// escape control characters and print no special token's name, and keep the bytes
// elsewhere; chat's reply ends at <|im_start|> and a --system message with no room
// left is refused at start; export never writes into a folder that holds files;
// bench-serve names the line of a prompt file that is not UTF-8.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "apps/cli/terminal_text.h"
#include "cli_run.h"
#include "data/tokenizer/tokenizer.h"
#include "nn/checkpoint_file.h"
#include "nn/transformer.h"

namespace fs = std::filesystem;
using ember::testing::CliRun;
using ember::testing::read_text;
using ember::testing::run_cli;
using ember::testing::run_cli_on_terminal;
using ember::testing::TempDir;

namespace {

constexpr int64_t kImStart = 257;  // in the byte tokenizer with <|endoftext|>, <|im_start|>, <|im_end|>

// A model whose greedy next token depends only on the last one (attention and FFN weights
// zero: the hidden state is the last token's embedding). Each (from, to) gives `from` an
// embedding axis of its own and `to` the logit 16 on it. Context 64, the ChatML tokenizer.
ember::nn::Checkpoint chain_checkpoint(const std::vector<std::pair<int64_t, int64_t>>& next) {
  ember::nn::Checkpoint c;
  c.config = ember::nn::ModelConfig::from_json(R"({"vocab_size": 259, "d_model": 16, "n_layers": 1, "n_heads": 2,
      "ffn_hidden": 32, "max_seq_len": 64, "tie_embeddings": false})", "test config");
  for (const auto& [name, t] : ember::nn::Transformer(c.config, 0).state_dict())
    c.model[name] = ember::Tensor::zeros(t.shape());
  c.model["model.norm.weight"] = ember::Tensor::ones({16});
  float* embed = c.model.at("model.embed_tokens.weight").data<float>();
  float* head = c.model.at("lm_head.weight").data<float>();
  std::map<int64_t, int64_t> axis;
  for (const auto& [from, to] : next) {
    const int64_t a = axis.emplace(from, static_cast<int64_t>(axis.size())).first->second;
    REQUIRE(a < 16);
    embed[from * 16 + a] = 1.0f;  // RMS-normed: 4 on axis a
    head[to * 16 + a] = 4.0f;
  }
  c.tokenizer_json = ember::data::Tokenizer::bytes({"<|endoftext|>", "<|im_start|>", "<|im_end|>"}).to_json();
  return c;
}

// After "a" or a chat prompt (which ends in "\n"): 0xFF (never valid), b, ESC, c, 0xC3 (a lead
// byte the next token does not continue), d, <|im_start|>, e, the two bytes of U+009B (a C1
// control: CSI), f, f, ...
std::string write_garbling_model(const TempDir& dir) {
  ember::nn::write_checkpoint(dir / "garble.h5",
                              chain_checkpoint({{'a', 0xFF}, {'\n', 0xFF}, {0xFF, 'b'}, {'b', 0x1B}, {0x1B, 'c'},
                                                {'c', 0xC3}, {0xC3, 'd'}, {'d', kImStart}, {kImStart, 'e'},
                                                {'e', 0xC2}, {0xC2, 0x9B}, {0x9B, 'f'}, {'f', 'f'}}));
  return dir / "garble.h5";
}

const std::string kFffd = "\xEF\xBF\xBD";

bool one_error_line(const CliRun& r) {
  return r.code == 1 && r.err.starts_with("ember: error: ") &&
         std::count(r.err.begin(), r.err.end(), '\n') == 1;
}

}  // namespace

TEST_CASE("terminal_text: U+FFFD for invalid UTF-8 and escapes for controls other than newline and tab",
          "[cli][generate]") {
  using ember::apps::terminal_text;
  CHECK(terminal_text("plain \xC3\xA9t\xC3\xA9\n\tok") == "plain \xC3\xA9t\xC3\xA9\n\tok");
  CHECK(terminal_text("\x1B[2J\r\a\x7F") == "\\x1b[2J\\x0d\\x07\\x7f");
  CHECK(terminal_text(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(terminal_text("\xC2\x9B" "31m \xC2\xA0") == "\\u009b31m \xC2\xA0");  // C1 CSI escaped, U+00A0 kept
  CHECK(terminal_text("\xFF\xC3" "x") == kFffd + kFffd + "x");
}

TEST_CASE("generate on a terminal: U+FFFD, escaped controls, no special token's name, and the bytes elsewhere",
          "[cli][generate]") {
  TempDir dir("cli_generate_terminal");
  const std::string args = "generate --checkpoint " + write_garbling_model(dir) +
                           " --temperature 0 --max-tokens 11 --prompt a";
  const CliRun file = run_cli(dir, args);
  CHECK(file.code == 0);
  CHECK(file.out == "a\xFF" "b\x1B" "c\xC3" "d<|im_start|>e\xC2\x9B" "f\n");  // exactly the bytes decoded
  const CliRun terminal = run_cli_on_terminal(dir, args);
  CHECK(terminal.code == 0);
  CHECK(terminal.out == "a" + kFffd + "b\\x1bc" + kFffd + "de\\u009bf\n");
  CHECK(terminal.err.find("maximum number of new tokens") != std::string::npos);
}

TEST_CASE("chat: a sampled <|im_start|> ends the reply, on a terminal and off it", "[cli][chat]") {
  TempDir dir("cli_chat_terminal");
  const std::string args = "chat --checkpoint " + write_garbling_model(dir) + " --temperature 0 --max-tokens 20";
  const CliRun terminal = run_cli_on_terminal(dir, args, "hi\nhi\n");
  CHECK(terminal.code == 0);
  const std::string reply = kFffd + "b\\x1bc" + kFffd + "d\n";
  CHECK(terminal.out == reply + reply);
  CHECK(terminal.err.find("reached the <|im_start|> token") != std::string::npos);
  // Off a terminal the reply's bytes are as decoded; it still ends at <|im_start|>.
  dir.write("lines", "hi\nhi\n");
  const CliRun file = run_cli(dir, args, "exec < " + dir / "lines" + ";");
  CHECK(file.code == 0);
  CHECK(file.out == "\xFF" "b\x1B" "c\xC3" "d\n" "\xFF" "b\x1B" "c\xC3" "d\n");
  const CliRun once = run_cli(dir, "generate --chat --prompt hi --checkpoint " + dir / "garble.h5" +
                                       " --temperature 0 --max-tokens 20");
  CHECK(once.code == 0);
  CHECK(once.out == "\xFF" "b\x1B" "c\xC3" "d\n");
  CHECK(once.err.find("reached the <|im_start|> token") != std::string::npos);
}

TEST_CASE("chat refuses at start a --system message that leaves no room for a message", "[cli][chat]") {
  TempDir dir("cli_chat_system");
  const std::string ckpt = write_garbling_model(dir);
  // A system message of N bytes renders to N + 10 tokens; a one-token user message adds 9 and the
  // reply's header 11: 34 bytes leave no room in the context of 64, 33 leave room for "h".
  CliRun r = run_cli_on_terminal(dir, "chat --checkpoint " + ckpt + " --system " + std::string(34, 's'), "hi\n");
  CHECK(one_error_line(r));
  CHECK(r.err == "ember: error: --system: the system message is 44 tokens and the model's context holds 64, "
                 "which leaves no room for a message and its reply; give a shorter one\n");
  CHECK(r.out.empty());
  r = run_cli_on_terminal(dir, "chat --checkpoint " + ckpt + " --temperature 0 --system " + std::string(33, 's'),
                          "h\nhi\n");
  CHECK(r.code == 0);
  CHECK(r.out == kFffd + "b\n");  // the prompt is 63 tokens: one more is stored, and the last drawn never is
  CHECK(r.err.find("[this message needs 64 tokens with the system message; the model's context holds 64: "
                   "not sent]") != std::string::npos);
}

TEST_CASE("export --format hf refuses an --out folder that holds files and changes nothing in it", "[cli][export]") {
  TempDir dir("cli_export_existing");
  const std::string ckpt = write_garbling_model(dir);
  fs::create_directories(dir.path / "data");
  dir.write("data/tokenizer.json", "the run's tokenizer");
  CliRun r = run_cli(dir, "export --checkpoint " + ckpt + " --format hf --out " + dir / "data");
  CHECK(one_error_line(r));
  CHECK(r.err == "ember: error: --out " + dir / "data" + ": the folder exists and is not empty; give a new or "
                 "empty folder (export never replaces files in one)\n");
  CHECK(read_text(dir / "data/tokenizer.json") == "the run's tokenizer");
  CHECK(!fs::exists(dir.path / "data/model.safetensors"));
  // A file is not a folder; an empty folder is written into, and then holds files.
  r = run_cli(dir, "export --checkpoint " + ckpt + " --out " + dir / "data/tokenizer.json");
  CHECK(one_error_line(r));
  CHECK(r.err.find("--out " + dir / "data/tokenizer.json" + ": is a file") != std::string::npos);
  // A folder under a file cannot be made: the line says why.
  r = run_cli(dir, "export --checkpoint " + ckpt + " --out " + dir / "data/tokenizer.json/hf");
  CHECK(one_error_line(r));
  CHECK(r.err == "ember: error: --out " + dir / "data/tokenizer.json/hf" +
                     ": cannot create the folder (Not a directory)\n");
  fs::create_directories(dir.path / "hf");
  REQUIRE(run_cli(dir, "export --checkpoint " + ckpt + " --out " + dir / "hf").code == 0);
  CHECK(fs::exists(dir.path / "hf/model.safetensors"));
  CHECK(one_error_line(run_cli(dir, "export --checkpoint " + ckpt + " --out " + dir / "hf")));
}

TEST_CASE("bench-serve names the line and byte offset of a prompt file that is not UTF-8", "[cli][bench-serve]") {
  TempDir dir("cli_bench_serve_binary");
  dir.write("prompts.bin", "one two\nthree \xFF\xFE four\n");
  const CliRun r = run_cli(dir, "bench-serve --url http://127.0.0.1:9 --model m --requests 1 --concurrency 1 "
                                "--prompt-file " + dir / "prompts.bin");
  CHECK(one_error_line(r));
  CHECK(r.err == "ember: error: --prompt-file '" + dir / "prompts.bin" +
                     "': line 2 (byte offset 14) is not valid UTF-8; give a UTF-8 text file\n");
  CHECK(r.out.empty());
}
