// Chat data (docs/formats.md#chat-data-jsonl): JSONL, one conversation per line in the
// OpenAI messages form, or a {"text": ...} line of plain text. ChatML
// rendering turns a line into token ids with one "trained" flag per id: the
// tokens of each assistant message's content and its <|im_end|> are labels,
// every other token is ignored; a text line's tokens are all labels.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer/tokenizer.h"

namespace ember::data {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// One line of a chat file: a conversation, or plain text when is_text.
struct ChatLine {
  std::vector<ChatMessage> messages;
  std::string text;
  bool is_text = false;
};

// One JSONL line; `where` (e.g. "chat.jsonl line 3") opens every error.
ChatLine parse_chat_line(std::string_view line, std::string_view where);
// Every line of a JSONL file, in order; blank lines are skipped. Errors name
// the file and line (1-based); a file without a line is an error.
std::vector<ChatLine> read_chat_file(const std::string& path);

// Token ids and one flag per id: trained[i] is 1 when ids[i] is a label.
struct ChatTokens {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> trained;
};

// The ids of <|im_start|> and <|im_end|>; an Error when the tokenizer lacks one.
struct ChatSpecials {
  uint32_t im_start = 0;
  uint32_t im_end = 0;
};
ChatSpecials chat_specials(const Tokenizer& tokenizer);

// ChatML: per message <|im_start|>, the text role + "\n" + content (encoded
// as one string, special-token names in it stay text), <|im_end|>, the text
// "\n". In an assistant message the ids holding content bytes (counted from
// the string's end) and its <|im_end|> are trained. A text line is
// tokenizer.encode(text) (special tokens in it count, as in a training
// corpus), every id trained.
ChatTokens render_chat(const Tokenizer& tokenizer, const ChatLine& line);
// The rendered messages, then <|im_start|> and the text "assistant\n".
std::vector<uint32_t> chat_generation_prompt(const Tokenizer& tokenizer,
                                             std::span<const ChatMessage> messages);

}  // namespace ember::data
