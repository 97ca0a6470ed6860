// Builds a Tokenizer from the string form shared by tokenizer.json and GPT-2's
// files: a vocab of byte-level strings to ids, merges as pairs of those
// strings, and added tokens. Checks that ids are 0..n-1 without holes.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "data/tokenizer/tokenizer.h"

namespace ember::data {

struct StringVocab {
  std::vector<std::pair<std::string, uint32_t>> vocab;           // byte-level string -> id
  std::vector<std::pair<std::string, std::string>> merges;       // in rank order
  std::vector<SpecialToken> added;                               // content is raw text
  bool ignore_merges = false;
  std::string unk_token;  // "" for none
  bool fuse_unk = false;
  bool add_prefix_space = false;
};

// source names the file(s) in error messages.
Tokenizer tokenizer_from_strings(const StringVocab& v, const std::string& source);

// The inverse: vocab keys (byte-level strings; specials' raw content) and merges.
StringVocab tokenizer_to_strings(const Tokenizer& t);

}  // namespace ember::data
