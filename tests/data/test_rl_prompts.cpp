// RL prompts (docs/formats.md#rl-prompts-jsonl): both forms parsed (the answer optional, other
// keys ignored, blank lines counted), rendered for generation against ids written by hand (byte
// tokenizer: id = byte, specials 256-258: ChatML's messages then <|im_start|> "assistant\n"; a
// string encoded), and every bad line refused with its exact message.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "data/rl_prompts.h"
#include "temp_dir.h"

using namespace ember;
using namespace ember::data;

namespace {

constexpr int64_t kStart = 257, kEnd = 258;

std::vector<int64_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

std::vector<int64_t> cat(std::vector<std::vector<int64_t>> parts) {
  std::vector<int64_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::string error_of(const std::string& line) {
  try {
    parse_rl_prompt(line, "p.jsonl line 2");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("RL prompts: both forms, rendered for generation as ids written by hand", "[data][rl]") {
  const Tokenizer tok = Tokenizer::bytes({"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
  const RlPrompt chat = parse_rl_prompt(
      R"({"prompt": [{"role": "system", "content": "be"}, {"role": "user", "content": "hi"}], "answer": "= 7.", "kind": 3})",
      "w");
  CHECK_FALSE(chat.is_text);
  REQUIRE(chat.answer);
  CHECK(*chat.answer == "= 7.");
  CHECK(render_rl_prompt(tok, chat) ==
        cat({{kStart}, bytes_of("system\nbe"), {kEnd}, bytes_of("\n"), {kStart}, bytes_of("user\nhi"),
             {kEnd}, bytes_of("\n"), {kStart}, bytes_of("assistant\n")}));
  const RlPrompt text = parse_rl_prompt(R"({"prompt": "2+2="})", "w");
  CHECK(text.is_text);
  CHECK_FALSE(text.answer);
  CHECK(render_rl_prompt(tok, text) == bytes_of("2+2="));
}

TEST_CASE("RL prompt files: line numbers count blank lines, one form per file", "[data][rl]") {
  testing::TempDir dir("rl_prompts");
  std::ofstream(dir / "ok.jsonl") << R"({"prompt": "a", "answer": "b"})" << "\n\n"
                                  << R"({"prompt": "c"})" << "\n";
  const std::vector<RlPrompt> p = read_rl_prompt_file(dir / "ok.jsonl");
  REQUIRE(p.size() == 2);
  CHECK(p[0].line == 1);
  CHECK(p[1].line == 3);
  std::ofstream(dir / "mixed.jsonl") << R"({"prompt": "a"})" << "\n"
                                     << R"({"prompt": [{"role": "user", "content": "b"}]})" << "\n";
  CHECK_THROWS_WITH(read_rl_prompt_file(dir / "mixed.jsonl"),
                    dir / "mixed.jsonl" +
                        " line 2: \"prompt\": a list of messages (the chat form), but line 1's is "
                        "a string (the text form) (one form per file)");
  std::ofstream(dir / "empty.jsonl") << "\n";
  CHECK_THROWS_WITH(read_rl_prompt_file(dir / "empty.jsonl"),
                    dir / "empty.jsonl" + ": empty prompt file (no prompt line)");
  CHECK_THROWS_WITH(read_rl_prompt_file(dir / "missing.jsonl"),
                    "cannot open prompt file " + dir / "missing.jsonl");
}

TEST_CASE("RL prompts: every bad line is refused with its message", "[data][rl]") {
  CHECK(error_of("[1]") ==
        "p.jsonl line 2: not a JSON object (expected {\"prompt\": ..., \"answer\": \"...\"})");
  CHECK(error_of(R"({"answer": "a"})") ==
        "p.jsonl line 2: \"prompt\": missing (a prompt line has \"prompt\" and, for --reward "
        "match, \"answer\")");
  CHECK(error_of(R"({"prompt": ""})") == "p.jsonl line 2: \"prompt\": an empty string");
  CHECK(error_of(R"({"prompt": 3})") ==
        "p.jsonl line 2: \"prompt\": expected a string or a list of messages (got a number)");
  CHECK(error_of(R"({"prompt": []})") ==
        "p.jsonl line 2: \"prompt\": an empty list (expected messages ending with a user message)");
  CHECK(error_of(R"({"prompt": [{"role": "assistant", "content": "x"}]})") ==
        "p.jsonl line 2: \"prompt\": its last message is the assistant's (expected messages "
        "ending with a user message)");
  CHECK(error_of(R"({"prompt": "q", "answer": 3})") ==
        "p.jsonl line 2: \"answer\": expected a string (got a number)");
  CHECK(error_of(R"({"prompt": "q", "answer": ""})") ==
        "p.jsonl line 2: \"answer\": an empty string (every completion would contain it)");
}
