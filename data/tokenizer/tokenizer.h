// Tokenizer: byte-level BPE in the GPT-2 manner. Special tokens are matched
// first, the text between them is split by the GPT-2 pre-tokenizer and each
// piece's bytes are merged by rank. decode(encode(s)) == s for any bytes.
// Files: Hugging Face tokenizer.json (to_json / from_json, save / load) and
// GPT-2's encoder.json + vocab.bpe (from_gpt2_files).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer/bpe_model.h"
#include "data/tokenizer/encode_cache.h"

namespace ember::data {

inline constexpr std::string_view kEndOfText = "<|endoftext|>";
// ChatML's message delimiters (docs/formats.md#chat-data-jsonl).
inline constexpr std::string_view kImStart = "<|im_start|>";
inline constexpr std::string_view kImEnd = "<|im_end|>";
// The special tokens ember reserves in every tokenizer it trains, in id order.
inline constexpr std::string_view kReservedSpecials[] = {kEndOfText, kImStart, kImEnd};

// An added token of tokenizer.json: matched in raw text before pre-tokenizing.
struct SpecialToken {
  std::string content;
  uint32_t id = 0;
  bool special = true;  // tokenizer.json's "special" flag (kept for round trips)
};

class Tokenizer {
 public:
  // The plain byte tokenizer: ids 0-255 are the bytes, no merges, no specials.
  Tokenizer();
  // model holds every token, specials included (each special's id must hold its
  // content). add_prefix_space: tokenizer.json's ByteLevel option (a space is put
  // before each stretch of text that does not start with one).
  Tokenizer(BpeModel model, std::vector<SpecialToken> specials, bool add_prefix_space = false);
  // 256 byte tokens (id = byte value) followed by the given special tokens.
  static Tokenizer bytes(const std::vector<std::string>& specials = {});

  // --- files -------------------------------------------------------------
  // Hugging Face tokenizer.json text (BPE model, ByteLevel pre-tokenizer and
  // decoder, added tokens). Errors name the part of the file at fault.
  static Tokenizer from_json(std::string_view json_text);
  std::string to_json() const;
  static Tokenizer load(const std::string& path);  // a tokenizer.json file
  void save(const std::string& path) const;         // atomically (temp + rename)
  // OpenAI's GPT-2 files; <|endoftext|> (id 50256) becomes a special token.
  static Tokenizer from_gpt2_files(const std::string& encoder_json, const std::string& vocab_bpe);

  // --- encode / decode -----------------------------------------------------
  // Special tokens in text become their ids.
  std::vector<uint32_t> encode(std::string_view text) const;
  void encode(std::string_view text, std::vector<uint32_t>& out, EncodeCache& cache) const;
  // Special tokens are treated as plain text (as OpenAI's GPT-2 encoder does).
  std::vector<uint32_t> encode_ordinary(std::string_view text) const;
  void encode_ordinary(std::string_view text, std::vector<uint32_t>& out,
                       EncodeCache& cache) const;
  // Concatenated bytes of the tokens; an Error for an id outside the vocabulary.
  std::string decode(std::span<const uint32_t> ids) const;

  // --- vocabulary ----------------------------------------------------------
  size_t vocab_size() const { return model_.vocab_size(); }
  const BpeModel& model() const { return model_; }
  const std::vector<SpecialToken>& special_tokens() const { return specials_; }
  bool add_prefix_space() const { return add_prefix_space_; }
  // Id of a special token; nullopt when the tokenizer has none of that name.
  std::optional<uint32_t> find_special(std::string_view content) const;
  // Id of a special token; an Error listing the known ones when absent.
  uint32_t special_id(std::string_view content) const;
  // How many of <|endoftext|>, <|im_start|>, <|im_end|> are not special tokens here.
  int64_t missing_chat_tokens() const;
  // This tokenizer with each missing one of those three appended (in that order)
  // as a special token with the next free id; existing ids, merges and options
  // stay as they are, so every text encodes as before unless it names them.
  Tokenizer with_chat_tokens() const;

 private:
  void encode_segment(std::string_view text, std::vector<uint32_t>& out, EncodeCache& cache) const;

  BpeModel model_;
  std::vector<SpecialToken> specials_;
  bool add_prefix_space_ = false;
  uint64_t serial_ = 0;  // identifies this vocabulary to EncodeCache
};

}  // namespace ember::data
