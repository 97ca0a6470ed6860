// Preference data lines: JSONL parsed with nlohmann::json into PreferenceLine,
// the form decided by "prompt" (a string or a list of messages); each bad line
// an Error naming the file, the line and the field at fault.
#include "data/preference.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/json_line.h"
#include "data/prompt_form_file.h"
#include "data/prompt_json.h"

namespace ember::data {
namespace {

using nlohmann::json;

constexpr std::string_view kOneAssistant = "expected a list of messages with one assistant message";

std::string kind(const json& j) {
  if (j.is_string()) return "a string";
  if (j.is_array()) return "a list";
  if (j.is_object()) return "an object";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number()) return "a number";
  return "null";
}

const json& field(const json& j, std::string_view key, std::string_view where) {
  const auto it = j.find(key);
  EMBER_CHECK(it != j.end(), where, ": \"", key,
              "\": missing (a pair line has \"prompt\", \"chosen\" and \"rejected\")");
  return *it;
}

// messages[index] of `key`: {"role": system|user|assistant, "content": "..."}.
ChatMessage parse_message(const json& m, std::string_view key, size_t index,
                          std::string_view where) {
  EMBER_CHECK(m.is_object(), where, ": \"", key, "\"[", index,
              "]: expected a message {\"role\": ..., \"content\": \"...\"} (got ", kind(m), ")");
  const auto role = m.find("role");
  EMBER_CHECK(role != m.end() && role->is_string(), where, ": \"", key, "\"[", index,
              "]: no string \"role\"");
  const std::string r = role->get<std::string>();
  EMBER_CHECK(r == "system" || r == "user" || r == "assistant", where, ": \"", key, "\"[", index,
              "]: unknown role \"", r, "\" (expected system, user or assistant)");
  const auto content = m.find("content");
  EMBER_CHECK(content != m.end() && content->is_string(), where, ": \"", key, "\"[", index,
              "]: no string \"content\"");
  return ChatMessage{r, content->get<std::string>()};
}

std::vector<ChatMessage> parse_prompt(const json& p, std::string_view where) {
  return parse_prompt_messages(p, where);
}

// The content of chosen / rejected in the chat form: one non-empty assistant message.
std::string parse_answer(const json& j, std::string_view key, std::string_view where) {
  EMBER_CHECK(j.is_array(), where, ": \"", key, "\": ", kOneAssistant, " (got ", kind(j),
              "; \"prompt\" is a list of messages)");
  EMBER_CHECK(j.size() == 1, where, ": \"", key, "\": ", kOneAssistant, " (got ", j.size(),
              " messages)");
  const ChatMessage m = parse_message(j[0], key, 0, where);
  EMBER_CHECK(m.role == "assistant", where, ": \"", key, "\": ", kOneAssistant, " (got a ", m.role,
              " message)");
  EMBER_CHECK(!m.content.empty(), where, ": \"", key,
              "\"[0]: empty \"content\" (a side needs a non-empty completion)");
  return m.content;
}

// chosen / rejected in the text form: a non-empty string.
std::string parse_completion(const json& j, std::string_view key, std::string_view where) {
  EMBER_CHECK(j.is_string(), where, ": \"", key, "\": expected a string (got ", kind(j),
              "; \"prompt\" is a string)");
  std::string s = j.get<std::string>();
  EMBER_CHECK(!s.empty(), where, ": \"", key,
              "\": an empty string (a side needs a non-empty completion)");
  return s;
}

// A pair line's object (prompt, chosen, rejected, margin).
PreferenceLine parse_pair(const json& j, std::string_view where) {
  const json& prompt = field(j, "prompt", where);
  EMBER_CHECK(prompt.is_string() || prompt.is_array(), where,
              ": \"prompt\": expected a string or a list of messages (got ", kind(prompt), ")");
  PreferenceLine out;
  out.is_text = prompt.is_string();
  const json &chosen = field(j, "chosen", where), &rejected = field(j, "rejected", where);
  if (out.is_text) {
    out.prompt_text = prompt.get<std::string>();
    out.chosen = parse_completion(chosen, "chosen", where);
    out.rejected = parse_completion(rejected, "rejected", where);
  } else {
    out.prompt = parse_prompt(prompt, where);
    out.chosen = parse_answer(chosen, "chosen", where);
    out.rejected = parse_answer(rejected, "rejected", where);
  }
  if (const auto margin = j.find("margin"); margin != j.end()) {
    EMBER_CHECK(margin->is_number(), where, ": \"margin\": expected a finite number (got ",
                kind(*margin), ")");
    out.margin = margin->get<double>();  // finite: nlohmann refuses what overflows a double
  }
  return out;
}

// A completion line's object: the prompt as a pair's, "completion" in the form of its "chosen".
ScoredLine parse_completion_line(const json& j, std::string_view where) {
  const auto prompt = j.find("prompt");
  EMBER_CHECK(prompt != j.end(), where,
              ": \"prompt\": missing (a completion line has \"prompt\" and \"completion\")");
  EMBER_CHECK(prompt->is_string() || prompt->is_array(), where,
              ": \"prompt\": expected a string or a list of messages (got ", kind(*prompt), ")");
  EMBER_CHECK(!j.contains("chosen") && !j.contains("rejected"), where,
              ": \"completion\" beside \"chosen\" / \"rejected\" (a line to score is a pair or a "
              "prompt with one completion)");
  ScoredLine out;
  out.completion = true;
  PreferenceLine& p = out.pair;
  p.is_text = prompt->is_string();
  const json& completion = j.at("completion");
  if (p.is_text) {
    p.prompt_text = prompt->get<std::string>();
    p.chosen = parse_completion(completion, "completion", where);
  } else {
    p.prompt = parse_prompt(*prompt, where);
    p.chosen = parse_answer(completion, "completion", where);
  }
  return out;
}

}  // namespace

std::string json_kind(const json& j) { return kind(j); }

std::vector<ChatMessage> parse_prompt_messages(const json& p, std::string_view where) {
  EMBER_CHECK(p.is_array(), where, ": \"prompt\": expected a string or a list of messages (got ",
              kind(p), ")");
  EMBER_CHECK(!p.empty(), where,
              ": \"prompt\": an empty list (expected messages ending with a user message)");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < p.size(); ++i) out.push_back(parse_message(p[i], "prompt", i, where));
  EMBER_CHECK(out.back().role == "user", where, ": \"prompt\": its last message is the ",
              out.back().role, "'s (expected messages ending with a user message)");
  return out;
}

PreferenceLine parse_preference_line(std::string_view line, std::string_view where) {
  const json j = parse_json_line(line, where, "\"margin\" must be a finite number");
  EMBER_CHECK(
      j.is_object(), where,
      ": not a JSON object (expected {\"prompt\": ..., \"chosen\": ..., \"rejected\": ...})");
  return parse_pair(j, where);
}

ScoredLine parse_scored_line(std::string_view line, std::string_view where) {
  const json j = parse_json_line(line, where, "\"margin\" must be a finite number");
  EMBER_CHECK(j.is_object(), where,
              ": not a JSON object (expected {\"prompt\": ..., \"completion\": ...} or {\"prompt\": "
              "..., \"chosen\": ..., \"rejected\": ...})");
  if (j.contains("completion")) return parse_completion_line(j, where);
  EMBER_CHECK(j.contains("chosen") || j.contains("rejected"), where,
              ": no \"completion\" and no \"chosen\" / \"rejected\" (a line to score is {\"prompt\", "
              "\"completion\"} or a pair {\"prompt\", \"chosen\", \"rejected\"})");
  return ScoredLine{parse_pair(j, where), false};
}

std::vector<PreferenceLine> read_preference_file(const std::string& path) {
  return read_prompt_form_file<PreferenceLine>(path, "preference file", "pair",
                                               parse_preference_line);
}

}  // namespace ember::data
