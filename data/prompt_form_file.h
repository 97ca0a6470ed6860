// The JSONL files whose lines hold a "prompt" in one of two forms (preference pairs, RL prompts):
// every non-blank line parsed in order (its 1-based number kept, blank lines counted), all in the
// form of the first line. Internal to data/.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace ember::data {

// parse(text, where) -> Line (where: "PATH line N"); Line has `bool is_text` and `int64_t line`.
// Errors: "cannot open <what> PATH"; a line in the other form than the first line's (naming both
// lines); "PATH: empty <what> (no <unit> line)".
template <class Line, class Parse>
std::vector<Line> read_prompt_form_file(const std::string& path, std::string_view what,
                                        std::string_view unit, Parse&& parse) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), "cannot open ", what, " ", path);
  std::vector<Line> lines;
  std::string text;
  for (int64_t number = 1; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    const std::string where = detail::concat(path, " line ", number);
    Line line = parse(text, where);
    line.line = number;
    if (!lines.empty() && line.is_text != lines.front().is_text) {
      const auto form = [](bool text_form) {
        return text_form ? "a string (the text form)" : "a list of messages (the chat form)";
      };
      throw Error(detail::concat(where, ": \"prompt\": ", form(line.is_text), ", but line ",
                                 lines.front().line, "'s is ", form(!line.is_text),
                                 " (one form per file)"));
    }
    lines.push_back(std::move(line));
  }
  EMBER_CHECK(!lines.empty(), path, ": empty ", what, " (no ", unit, " line)");
  return lines;
}

}  // namespace ember::data
