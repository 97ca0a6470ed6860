// The tokenizer a model's token ids are in, from what a checkpoint stores
// (the tokenizer.json text, possibly empty) and its vocabulary size: the
// stored one; else the byte tokenizer when the vocabulary is the bytes (256,
// or 257 with <|endoftext|>); else none.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "data/tokenizer/tokenizer.h"

namespace ember::data {

// The byte tokenizer: plain (vocab 256) when vocab_size is 256, else bytes +
// <|endoftext|> (id 256).
Tokenizer byte_tokenizer(int64_t vocab_size);

// A stored tokenizer that does not parse is an Error naming `path` (the
// checkpoint file) when one is given.
std::optional<Tokenizer> stored_tokenizer(const std::string& tokenizer_json, int64_t vocab_size,
                                          const std::string& path = "");

}  // namespace ember::data
