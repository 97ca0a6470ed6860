// Preference pairs as token ids (docs/formats.md#preference-data-jsonl): each
// side of a PreferenceLine rendered (chat form: ChatML of the prompt, then the
// assistant message; text form: encode(prompt), encode(completion),
// <|endoftext|>), cut to its first T+1 ids, with the flags of its scored
// tokens; and a whole file's pairs, those with a side without a scored token
// dropped and counted.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/preference.h"
#include "data/tokenizer/tokenizer.h"

namespace ember::data {

// At most T+1 ids. scored[i] is 1 when ids[i] is a completion token with a
// position before it (i >= 1): exactly the positions whose log-probability,
// predicted at position i-1, a side's sum holds.
struct PreferenceSide {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> scored;
};

struct PreferencePair {
  PreferenceSide chosen, rejected;
  double margin = 0.0;
  int64_t line = 0;  // the PreferenceLine's line
};

// The two sides of one line, each cut to its first seq_len + 1 ids. Chat form:
// the prompt's messages rendered by render_chat (none of them scored), then the
// assistant message rendered the same way: its content tokens and <|im_end|>
// are the completion. Text form: encode(prompt), then encode(completion), then
// <|endoftext|>; the last two parts are the completion. Errors: seq_len < 1;
// the chat form without <|im_start|> / <|im_end|> (chat_specials' error), the
// text form without <|endoftext|>.
PreferencePair render_preference_pair(const Tokenizer& tokenizer, const PreferenceLine& line,
                                      int64_t seq_len);

// One side: line's prompt then `completion` (a string of the line's form: the assistant
// message's content, or the text completion), rendered and cut as render_preference_pair's.
PreferenceSide render_preference_side(const Tokenizer& tokenizer, const PreferenceLine& line,
                                      const std::string& completion, int64_t seq_len);

// True when both sides have a scored token.
bool has_scored_tokens(const PreferencePair& pair);

struct PreferencePairs {
  std::vector<PreferencePair> pairs;   // the kept pairs, in line order
  std::vector<int64_t> dropped_lines;  // the `line` of each dropped pair, in order
  int64_t truncated = 0;               // kept pairs with a side longer than T+1 ids
  int64_t seq_len = 0;                 // T
};

// Every line rendered (in parallel); a pair whose chosen or rejected side has
// no scored token is dropped. An Error naming `file` when there is no line or
// every pair is dropped, and render_preference_pair's errors.
PreferencePairs make_preference_pairs(const Tokenizer& tokenizer,
                                      const std::vector<PreferenceLine>& lines, int64_t seq_len,
                                      std::string_view file);

}  // namespace ember::data
