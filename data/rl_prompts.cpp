// RL prompt lines: JSONL parsed with nlohmann::json into RlPrompt (the prompt's messages as a
// preference pair's, data/prompt_json.h), each bad line an Error naming the file, the line and
// the field at fault; and their rendering for generation.
#include "data/rl_prompts.h"

#include "core/error.h"
#include "data/json_line.h"
#include "data/prompt_form_file.h"
#include "data/prompt_json.h"

namespace ember::data {

RlPrompt parse_rl_prompt(std::string_view line, std::string_view where) {
  const nlohmann::json j = parse_json_line(line, where);
  EMBER_CHECK(j.is_object(), where,
              ": not a JSON object (expected {\"prompt\": ..., \"answer\": \"...\"})");
  const auto prompt = j.find("prompt");
  EMBER_CHECK(prompt != j.end(), where,
              ": \"prompt\": missing (a prompt line has \"prompt\" and, for --reward match, "
              "\"answer\")");
  RlPrompt out;
  out.is_text = prompt->is_string();
  if (out.is_text) {
    out.text = prompt->get<std::string>();
    EMBER_CHECK(!out.text.empty(), where, ": \"prompt\": an empty string");
  } else {
    out.messages = parse_prompt_messages(*prompt, where);
  }
  if (const auto answer = j.find("answer"); answer != j.end()) {
    EMBER_CHECK(answer->is_string(), where, ": \"answer\": expected a string (got ",
                json_kind(*answer), ")");
    out.answer = answer->get<std::string>();
    EMBER_CHECK(!out.answer->empty(), where,
                ": \"answer\": an empty string (every completion would contain it)");
  }
  return out;
}

std::vector<RlPrompt> read_rl_prompt_file(const std::string& path) {
  return read_prompt_form_file<RlPrompt>(path, "prompt file", "prompt", parse_rl_prompt);
}

std::vector<int64_t> render_rl_prompt(const Tokenizer& tokenizer, const RlPrompt& prompt) {
  std::vector<uint32_t> ids = prompt.is_text ? tokenizer.encode(prompt.text)
                                             : chat_generation_prompt(tokenizer, prompt.messages);
  return std::vector<int64_t>(ids.begin(), ids.end());
}

}  // namespace ember::data
