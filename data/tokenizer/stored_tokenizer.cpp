// The tokenizer of stored token ids (see stored_tokenizer.h).
#include "data/tokenizer/stored_tokenizer.h"

#include "core/error.h"

namespace ember::data {

Tokenizer byte_tokenizer(int64_t vocab_size) {
  if (vocab_size == 256) return Tokenizer();
  return Tokenizer::bytes({std::string(kEndOfText)});
}

std::optional<Tokenizer> stored_tokenizer(const std::string& tokenizer_json, int64_t vocab_size,
                                          const std::string& path) {
  if (!tokenizer_json.empty()) {
    try {
      return Tokenizer::from_json(tokenizer_json);
    } catch (const Error& e) {
      if (path.empty()) throw;
      throw Error(path + ": the stored tokenizer (/tokenizer/json): " + e.what());
    }
  }
  if (vocab_size == 256 || vocab_size == 257) return byte_tokenizer(vocab_size);
  return std::nullopt;
}

}  // namespace ember::data
