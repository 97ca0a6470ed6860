// A multiple-choice task file (docs/cli.md#evaluating): one JSON object per line,
// {"context": "...", "choices": ["...", ...], "gold": i} (other keys, e.g. an id, are
// ignored). Blank lines are skipped; a bad line is an Error naming FILE:LINE and what
// is wrong with it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ember::apps {

struct ChoiceItem {
  std::string context;
  std::vector<std::string> choices;  // at least 2, none empty
  int64_t gold = 0;                  // index into choices
  int64_t line = 0;                  // 1-based line in the file (for messages)
};

// The items of a task file's text; `name` (the path) is used in error messages.
std::vector<ChoiceItem> parse_tasks(const std::string& text, const std::string& name);
// The items of the file at `path` (read with core/io/read_file.h).
std::vector<ChoiceItem> read_tasks(const std::string& path);

}  // namespace ember::apps
