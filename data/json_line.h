// One JSONL line parsed for the data readers (chat, preference): a line that is not JSON, or
// holds a number beyond a double (1e999), is an Error opening with `where` ("file line N").
// Internal to data/: nlohmann::json is a private dependency of ember_data.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

namespace ember::data {

// `number_hint`, when given, is appended to the out-of-range message in parentheses
// (e.g. "\"margin\" must be a finite number").
nlohmann::json parse_json_line(std::string_view line, std::string_view where,
                               std::string_view number_hint = {});

}  // namespace ember::data
