// The prompts of `ember rl` (docs/formats.md#rl-prompts-jsonl): JSONL, one {"prompt": ...,
// "answer": "..."} per line, the prompt chat messages ending with a user message or a string,
// "answer" optional (`--reward match` needs it). Rendered for generation: chat messages as
// ChatML with the assistant's header after them (data::chat_generation_prompt), a string as
// tokenizer.encode.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat.h"
#include "data/tokenizer/tokenizer.h"

namespace ember::data {

struct RlPrompt {
  std::vector<ChatMessage> messages;  // chat form
  std::string text;                   // text form (is_text)
  bool is_text = false;
  std::optional<std::string> answer;  // "answer", when the line has one
  int64_t line = 0;                   // 1-based line in its file
};

// One JSONL line; `where` ("prompts.jsonl line 3") opens every error, then the field at fault.
// Keys other than "prompt" and "answer" are ignored.
RlPrompt parse_rl_prompt(std::string_view line, std::string_view where);
// Every line of the file, blank lines skipped (but counted). Errors name the file and line; a
// file without a prompt, or one that mixes the chat and the text form, is an error.
std::vector<RlPrompt> read_rl_prompt_file(const std::string& path);

// The ids the policy continues: chat form chat_generation_prompt(messages) (an Error naming what
// is missing when the tokenizer lacks the ChatML tokens), text form tokenizer.encode(text).
std::vector<int64_t> render_rl_prompt(const Tokenizer& tokenizer, const RlPrompt& prompt);

}  // namespace ember::data
