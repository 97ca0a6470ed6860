// Tokenizer::from_gpt2_files: OpenAI's encoder.json (byte-level string -> id)
// and vocab.bpe ("#version" line, then one "a b" merge per line, by rank).
// <|endoftext|> in encoder.json becomes a special token.
#include <nlohmann/json.hpp>

#include <sstream>

#include "core/error.h"
#include "core/io/read_file.h"
#include "core/io/json_message.h"
#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/vocab_builder.h"

namespace ember::data {
Tokenizer Tokenizer::from_gpt2_files(const std::string& encoder_json, const std::string& vocab_bpe) {
  StringVocab v;
  nlohmann::json encoder;
  try {
    encoder = nlohmann::json::parse(read_file(encoder_json, "GPT-2 encoder.json file", kMaxTokenizerFileBytes));
  } catch (const nlohmann::json::exception& e) {
    throw Error(encoder_json + ": malformed JSON: " + json_message(e.what()));
  }
  EMBER_CHECK(encoder.is_object(), encoder_json, ": expected an object of token -> id");
  for (auto it = encoder.begin(); it != encoder.end(); ++it) {
    EMBER_CHECK(it->is_number_unsigned() && it->get<uint64_t>() < UINT32_MAX, encoder_json, ": token '",
                it.key(), "' has no token id (an integer in [0, 2^32 - 1))");
    v.vocab.emplace_back(it.key(), it->get<uint32_t>());
    if (it.key() == kEndOfText) v.added.push_back(SpecialToken{it.key(), it->get<uint32_t>(), true});
  }
  std::istringstream lines(read_file(vocab_bpe, "GPT-2 vocab.bpe file", kMaxTokenizerFileBytes));
  std::string line;
  size_t line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    EMBER_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                    line.find(' ', space + 1) == std::string::npos,
                vocab_bpe, ":", line_no, ": expected two tokens separated by one space, got '",
                line, "'");
    v.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  return tokenizer_from_strings(v, encoder_json + " + " + vocab_bpe);
}

}  // namespace ember::data
