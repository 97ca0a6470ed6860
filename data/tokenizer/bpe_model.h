// The BPE model: token byte strings (ids cover the whole vocabulary, specials
// included) and merges by rank. encode_piece applies the lowest-ranked merge
// present, leftmost first, until none applies, exactly as GPT-2 does. A byte
// without a token becomes unk or is dropped, as Hugging Face's BPE does.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer/hash_table.h"

namespace ember::data {

struct BpeMerge {
  uint32_t left;
  uint32_t right;
  uint32_t result;  // the id of left's bytes followed by right's bytes
};

struct BpeOptions {
  bool ignore_merges = false;     // HF: a piece that is itself a token maps to it
  std::optional<uint32_t> unk;    // HF's unk_token, for bytes without a token
  bool fuse_unk = false;          // HF: consecutive unk tokens become one
};

class BpeModel {
 public:
  BpeModel() = default;
  // tokens[id] are the bytes of token id; merges in rank order (rank = index);
  // each merge's result must spell left + right. Violations throw an Error
  // naming the token or merge.
  BpeModel(std::vector<std::string> tokens, std::vector<BpeMerge> merges,
           BpeOptions options = {});

  size_t vocab_size() const { return tokens_.size(); }
  const std::string& token_bytes(uint32_t id) const { return tokens_[id]; }
  const std::vector<std::string>& tokens() const { return tokens_; }
  const std::vector<BpeMerge>& merges() const { return merges_; }
  // The token of byte b, or kNoToken.
  uint32_t byte_id(uint8_t b) const { return byte_ids_[b]; }
  // Every byte has a token (so decode(encode(s)) == s).
  bool has_all_bytes() const { return all_bytes_; }
  const BpeOptions& options() const { return options_; }
  static constexpr uint32_t kNoToken = UINT32_MAX;
  // The id whose bytes are exactly `bytes`, preferring the lowest id.
  std::optional<uint32_t> find_token(std::string_view bytes) const;

  // Appends the ids of one piece (non-empty) to out.
  void encode_piece(std::string_view piece, std::vector<uint32_t>& out) const;

 private:
  struct MergeInfo {
    uint32_t rank;
    uint32_t result;
  };
  static constexpr uint32_t kNoRank = UINT32_MAX;
  uint32_t rank_of(uint32_t a, uint32_t b, uint32_t* result) const {
    const MergeInfo* m = merge_table_.find(pair_key(a, b));
    if (!m) return kNoRank;
    *result = m->result;
    return m->rank;
  }
  // Initial symbols of a piece: byte tokens, unk or nothing for the others.
  size_t initial_ids(const uint8_t* p, size_t n, uint32_t* ids) const;
  void merge_short(uint32_t* ids, size_t n, std::vector<uint32_t>& out) const;
  void merge_long(const uint32_t* ids, size_t n, std::vector<uint32_t>& out) const;

  std::vector<std::string> tokens_;
  std::vector<BpeMerge> merges_;
  std::array<uint32_t, 256> byte_ids_{};
  PairTable<MergeInfo> merge_table_;
  StringTable<uint32_t> lookup_;
  BpeOptions options_;
  bool all_bytes_ = true;
};

}  // namespace ember::data
