// Chat data: JSONL lines parsed with nlohmann::json into ChatLine, each bad
// line an Error naming the file and line; ChatML rendering into ids with
// their trained flags, and the generation prompt.
#include "data/chat.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/json_line.h"

namespace ember::data {
namespace {

using nlohmann::json;

ChatMessage parse_message(const json& m, size_t index, std::string_view where) {
  EMBER_CHECK(m.is_object(), where, ": messages[", index, "] is not an object");
  const auto role = m.find("role");
  EMBER_CHECK(role != m.end() && role->is_string(), where, ": messages[", index,
              "] has no string \"role\"");
  const std::string r = role->get<std::string>();
  EMBER_CHECK(r == "system" || r == "user" || r == "assistant", where, ": messages[", index,
              "] has unknown role \"", r, "\" (expected system, user or assistant)");
  const auto content = m.find("content");
  EMBER_CHECK(content != m.end() && content->is_string(), where, ": messages[", index, "] (", r,
              ") has no string \"content\"");
  return ChatMessage{r, content->get<std::string>()};
}

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// Appends the ids of text (no special tokens); the trained_tail bytes at its end are
// trained: an id is trained when it holds one of those bytes.
void append_text(const Tokenizer& tok, std::string_view text, size_t trained_tail,
                 ChatTokens& out) {
  if (text.empty()) return;
  const std::vector<uint32_t> ids = tok.encode_ordinary(text);
  size_t total = 0;
  for (uint32_t id : ids) total += tok.model().token_bytes(id).size();
  const size_t first_trained = total - std::min(trained_tail, total);
  size_t end = 0;
  for (uint32_t id : ids) {
    end += tok.model().token_bytes(id).size();
    out.ids.push_back(id);
    out.trained.push_back(trained_tail > 0 && end > first_trained ? 1 : 0);
  }
}

void append_special(uint32_t id, bool trained, ChatTokens& out) {
  out.ids.push_back(id);
  out.trained.push_back(trained ? 1 : 0);
}

ChatTokens render_messages(const Tokenizer& tok, std::span<const ChatMessage> messages) {
  const ChatSpecials sp = chat_specials(tok);
  ChatTokens out;
  for (const ChatMessage& m : messages) {
    const bool assistant = m.role == "assistant";
    append_special(sp.im_start, false, out);
    append_text(tok, m.role + "\n" + m.content, assistant ? m.content.size() : 0, out);
    append_special(sp.im_end, assistant, out);
    append_text(tok, "\n", 0, out);
  }
  return out;
}

}  // namespace

ChatLine parse_chat_line(std::string_view line, std::string_view where) {
  const json j = parse_json_line(line, where);
  EMBER_CHECK(j.is_object(), where,
              ": not a JSON object (expected {\"messages\": [...]} or {\"text\": \"...\"})");
  const auto messages = j.find("messages"), text = j.find("text");
  EMBER_CHECK(messages == j.end() || text == j.end(), where,
              ": both \"messages\" and \"text\" (a line is one or the other)");
  ChatLine out;
  if (text != j.end()) {
    EMBER_CHECK(text->is_string(), where, ": \"text\" is not a string");
    out.text = text->get<std::string>();
    out.is_text = true;
    return out;
  }
  EMBER_CHECK(messages != j.end(), where, ": no \"messages\" or \"text\" key");
  EMBER_CHECK(messages->is_array(), where, ": \"messages\" is not an array");
  EMBER_CHECK(!messages->empty(), where, ": \"messages\" is empty");
  for (size_t i = 0; i < messages->size(); ++i)
    out.messages.push_back(parse_message((*messages)[i], i, where));
  return out;
}

std::vector<ChatLine> read_chat_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), "cannot open chat file ", path);
  std::vector<ChatLine> lines;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number)
    if (!blank(line))
      lines.push_back(parse_chat_line(line, detail::concat(path, " line ", number)));
  EMBER_CHECK(!lines.empty(), path, ": empty chat file (no conversation or text line)");
  return lines;
}

ChatSpecials chat_specials(const Tokenizer& tokenizer) {
  const auto start = tokenizer.find_special(kImStart), end = tokenizer.find_special(kImEnd);
  EMBER_CHECK(start && end, "the tokenizer has no ", !start ? kImStart : kImEnd,
              " special token, which ChatML needs: add <|im_start|> and <|im_end|> with `ember finetune "
              "--add-chat-tokens` (new embedding rows, trained with the adapters)");
  return ChatSpecials{*start, *end};
}

ChatTokens render_chat(const Tokenizer& tokenizer, const ChatLine& line) {
  if (!line.is_text) return render_messages(tokenizer, line.messages);
  ChatTokens out;
  out.ids = tokenizer.encode(line.text);
  out.trained.assign(out.ids.size(), 1);
  return out;
}

std::vector<uint32_t> chat_generation_prompt(const Tokenizer& tokenizer,
                                             std::span<const ChatMessage> messages) {
  ChatTokens out = render_messages(tokenizer, messages);
  append_special(chat_specials(tokenizer).im_start, false, out);
  append_text(tokenizer, "assistant\n", 0, out);
  return out.ids;
}

}  // namespace ember::data
