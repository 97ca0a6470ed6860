// The "prompt" field of the JSONL data readers (preference pairs, RL prompts) and the kind of a
// JSON value for their messages. Internal to data/: nlohmann::json is a private dependency of
// ember_data.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat.h"

namespace ember::data {

// "a string", "a list", "an object", "a boolean", "a number" or "null".
std::string json_kind(const nlohmann::json& j);
// A "prompt" list of messages ({"role": system|user|assistant, "content": "..."}) ending with a
// user message; an Error opening with `where` names the message at fault.
std::vector<ChatMessage> parse_prompt_messages(const nlohmann::json& p, std::string_view where);

}  // namespace ember::data
