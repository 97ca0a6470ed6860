// Preference data (docs/formats.md#preference-data-jsonl): JSONL, one pair per
// line, {"prompt", "chosen", "rejected"} as chat messages (the prompt ends with
// a user message, chosen and rejected hold one assistant message each) or as
// plain strings, with an optional number "margin". Parsing only: rendering to
// token ids is data/preference_pairs.h.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat.h"

namespace ember::data {

// One pair. Chat form: prompt holds the messages (the last one the user's) and
// chosen / rejected the content of the one assistant message of each side.
// Text form (is_text): prompt_text, then the completions chosen / rejected.
// Both completions are non-empty.
struct PreferenceLine {
  std::vector<ChatMessage> prompt;
  std::string prompt_text;
  std::string chosen, rejected;
  double margin = 0.0;  // "margin", finite; 0 when absent
  bool is_text = false;
  int64_t line = 0;  // 1-based line in its file (read_preference_file); 0 when parsed alone
};

// One JSONL line; `where` (e.g. "pairs.jsonl line 3") opens every error, then
// the field at fault: `pairs.jsonl line 3: "chosen": expected a list of
// messages with one assistant message`. Keys other than the four are ignored.
PreferenceLine parse_preference_line(std::string_view line, std::string_view where);

// A line of a file to score (`ember reward --score`, docs/cli.md#scoring-with-a-reward-model): a
// pair line, or {"prompt": ..., "completion": ...} whose prompt is a pair's and whose completion
// has the form of a pair's "chosen" (one assistant message, or a string with a string prompt).
// A completion line holds its completion in pair.chosen (pair.rejected empty).
struct ScoredLine {
  PreferenceLine pair;
  bool completion = false;  // a {"prompt", "completion"} line
};
// One JSONL line, its errors as parse_preference_line's (`where`, then the field at fault).
ScoredLine parse_scored_line(std::string_view line, std::string_view where);

// Every line of a JSONL file, in order, blank lines skipped (but counted).
// Errors name the file and line; a file without a line, or one that mixes the
// chat and the text form, is an error.
std::vector<PreferenceLine> read_preference_file(const std::string& path);

}  // namespace ember::data
