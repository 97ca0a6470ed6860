// Preference pairs: each side is the prompt's ids (unscored) followed by the
// completion's ids with their completion flags, cut to T+1 ids, the flag of
// id 0 cleared (no position before it); a file's pairs rendered in parallel,
// then those with a side without a scored token dropped.
#include "data/preference_pairs.h"

#include <algorithm>

#include "core/error.h"

namespace ember::data {
namespace {

// prompt, then completion (ids and completion flags), cut to seq_len + 1 ids;
// `cut` is set when ids were dropped.
PreferenceSide join(const std::vector<uint32_t>& prompt, const ChatTokens& completion,
                    int64_t seq_len, bool& cut) {
  PreferenceSide s;
  s.ids = prompt;
  s.scored.assign(prompt.size(), 0);
  s.ids.insert(s.ids.end(), completion.ids.begin(), completion.ids.end());
  s.scored.insert(s.scored.end(), completion.trained.begin(), completion.trained.end());
  const size_t keep = static_cast<size_t>(seq_len + 1);
  if (s.ids.size() > keep) {
    s.ids.resize(keep);
    s.scored.resize(keep);
    cut = true;
  }
  if (!s.scored.empty()) s.scored[0] = 0;
  return s;
}

uint32_t end_of_text(const Tokenizer& tokenizer) {
  const auto id = tokenizer.find_special(kEndOfText);
  EMBER_CHECK(id, "the tokenizer has no ", kEndOfText,
              " special token, which ends each side of text-form preference data: append it "
              "with --add-chat-tokens (a new embedding row)");
  return *id;
}

// Text form: encode(completion), then <|endoftext|>, every id a completion token.
ChatTokens text_completion(const Tokenizer& tokenizer, std::string_view text, uint32_t eot) {
  ChatTokens out;
  out.ids = tokenizer.encode(text);
  out.ids.push_back(eot);
  out.trained.assign(out.ids.size(), 1);
  return out;
}

// Chat form: the one assistant message rendered by render_chat (content and <|im_end|> trained).
ChatTokens chat_completion(const Tokenizer& tokenizer, const std::string& content) {
  return render_chat(tokenizer, ChatLine{{ChatMessage{"assistant", content}}, "", false});
}

// The sides of line's prompt followed by each of `completions` (its form's strings).
std::vector<PreferenceSide> render_sides(const Tokenizer& tokenizer, const PreferenceLine& line,
                                         const std::vector<const std::string*>& completions,
                                         int64_t seq_len, bool& cut) {
  EMBER_CHECK(seq_len >= 1, "preference data: seq_len must be at least 1, got ", seq_len);
  std::vector<PreferenceSide> out;
  if (line.is_text) {
    const uint32_t eot = end_of_text(tokenizer);
    const std::vector<uint32_t> prompt = tokenizer.encode(line.prompt_text);
    for (const std::string* c : completions)
      out.push_back(join(prompt, text_completion(tokenizer, *c, eot), seq_len, cut));
  } else {
    const std::vector<uint32_t> prompt =
        render_chat(tokenizer, ChatLine{line.prompt, "", false}).ids;
    for (const std::string* c : completions)
      out.push_back(join(prompt, chat_completion(tokenizer, *c), seq_len, cut));
  }
  return out;
}

PreferencePair render_pair(const Tokenizer& tokenizer, const PreferenceLine& line, int64_t seq_len,
                           bool& cut) {
  std::vector<PreferenceSide> sides =
      render_sides(tokenizer, line, {&line.chosen, &line.rejected}, seq_len, cut);
  PreferencePair out;
  out.margin = line.margin;
  out.line = line.line;
  out.chosen = std::move(sides[0]);
  out.rejected = std::move(sides[1]);
  return out;
}

}  // namespace

PreferencePair render_preference_pair(const Tokenizer& tokenizer, const PreferenceLine& line,
                                      int64_t seq_len) {
  bool cut = false;
  return render_pair(tokenizer, line, seq_len, cut);
}

PreferenceSide render_preference_side(const Tokenizer& tokenizer, const PreferenceLine& line,
                                      const std::string& completion, int64_t seq_len) {
  bool cut = false;
  return std::move(render_sides(tokenizer, line, {&completion}, seq_len, cut)[0]);
}

bool has_scored_tokens(const PreferencePair& pair) {
  const auto any = [](const PreferenceSide& s) {
    return std::any_of(s.scored.begin(), s.scored.end(), [](uint8_t f) { return f != 0; });
  };
  return any(pair.chosen) && any(pair.rejected);
}

PreferencePairs make_preference_pairs(const Tokenizer& tokenizer,
                                      const std::vector<PreferenceLine>& lines, int64_t seq_len,
                                      std::string_view file) {
  EMBER_CHECK(!lines.empty(), file, ": no preference pair");
  EMBER_CHECK(seq_len >= 1, "preference data: seq_len must be at least 1, got ", seq_len);
  // The errors a render could raise, outside the parallel loop.
  const auto is_text = [](const PreferenceLine& l) { return l.is_text; };
  if (std::any_of(lines.begin(), lines.end(), is_text)) end_of_text(tokenizer);
  if (!std::all_of(lines.begin(), lines.end(), is_text)) chat_specials(tokenizer);
  const int64_t n = static_cast<int64_t>(lines.size());
  std::vector<PreferencePair> all(lines.size());
  std::vector<uint8_t> cut(lines.size(), 0);
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t i = 0; i < n; ++i) {
    bool c = false;
    all[static_cast<size_t>(i)] = render_pair(tokenizer, lines[static_cast<size_t>(i)], seq_len, c);
    cut[static_cast<size_t>(i)] = c;
  }
  PreferencePairs out;
  out.seq_len = seq_len;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!has_scored_tokens(all[i])) {
      out.dropped_lines.push_back(all[i].line);
      continue;
    }
    out.truncated += cut[i];
    out.pairs.push_back(std::move(all[i]));
  }
  EMBER_CHECK(
      !out.pairs.empty(), file, ": no pair left: ",
      n == 1 ? std::string("the only pair has") : detail::concat("each of the ", n, " pairs has"),
      " a side whose completion starts after the first T+1 = ", seq_len + 1,
      " tokens (a larger --seq-len, or shorter prompts)");
  return out;
}

}  // namespace ember::data
