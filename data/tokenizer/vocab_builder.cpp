// tokenizer_from_strings / tokenizer_to_strings: between the string form of a
// byte-level BPE vocabulary (data/tokenizer/vocab_builder.h) and BpeModel's id form.
#include "data/tokenizer/vocab_builder.h"

#include <unordered_map>

#include "core/error.h"
#include "data/tokenizer/byte_level.h"

namespace ember::data {

Tokenizer tokenizer_from_strings(const StringVocab& v, const std::string& source) {
  uint64_t max_end = 0;  // the largest id + 1
  for (const auto& [key, id] : v.vocab) max_end = std::max<uint64_t>(max_end, uint64_t{id} + 1);
  for (const auto& a : v.added) max_end = std::max<uint64_t>(max_end, uint64_t{a.id} + 1);
  // Ids run from 0 without holes, so none reaches the count of entries: checked
  // before a table of that many tokens is allocated (a hostile id of 10^9 is one line).
  const uint64_t entries = v.vocab.size() + v.added.size();
  EMBER_CHECK(max_end <= entries, source, ": token ids must run from 0 without holes, but id ", max_end - 1,
              " is beyond the ", entries, " tokens listed");
  const uint32_t n = static_cast<uint32_t>(max_end);
  std::unordered_map<std::string, const SpecialToken*> added_by_content;
  for (const auto& a : v.added) added_by_content[a.content] = &a;

  std::vector<std::string> tokens(n);
  std::vector<bool> filled(n, false);
  std::vector<const std::string*> key_of(n, nullptr);  // the vocab's string of each id, for messages
  std::unordered_map<std::string, uint32_t> id_of;
  id_of.reserve(v.vocab.size());
  for (const auto& [key, id] : v.vocab) {
    EMBER_CHECK(!filled[id], source, ": vocab gives id ", id, " to two tokens ('",
                key_of[id] ? *key_of[id] : tokens[id], "' and '", key, "')");
    std::optional<std::string> bytes = byte_level_decode(key);
    if (!bytes) {
      auto it = added_by_content.find(key);
      EMBER_CHECK(it != added_by_content.end(), source, ": vocab token '", key, "' (id ", id,
                  ") is not a byte-level string and not an added token");
      bytes = key;
    }
    tokens[id] = std::move(*bytes);
    filled[id] = true;
    key_of[id] = &key;
    id_of.emplace(key, id);
  }
  for (const auto& a : v.added) {
    if (filled[a.id]) {
      EMBER_CHECK(tokens[a.id] == a.content, source, ": added token '", a.content, "' has id ",
                  a.id, ", which the vocab gives to another token");
    } else {
      tokens[a.id] = a.content;
      filled[a.id] = true;
    }
  }
  for (uint32_t id = 0; id < n; ++id)
    EMBER_CHECK(filled[id], source, ": token ids must run from 0 to ", n - 1,
                " without holes, but no token has id ", id);

  std::vector<BpeMerge> merges;
  merges.reserve(v.merges.size());
  for (size_t rank = 0; rank < v.merges.size(); ++rank) {
    const auto& [a, b] = v.merges[rank];
    auto find = [&](const std::string& key) {
      auto it = id_of.find(key);
      EMBER_CHECK(it != id_of.end(), source, ": merge ", rank, " ('", a, " ", b,
                  "') needs token '", key, "', which is not in the vocab");
      return it->second;
    };
    merges.push_back(BpeMerge{find(a), find(b), find(a + b)});
  }
  BpeOptions options{v.ignore_merges, std::nullopt, v.fuse_unk};
  if (!v.unk_token.empty()) {
    auto it = id_of.find(v.unk_token);
    EMBER_CHECK(it != id_of.end(), source, ": unk_token '", v.unk_token, "' is not in the vocab");
    options.unk = it->second;
  }
  try {
    BpeModel model(std::move(tokens), std::move(merges), options);
    return Tokenizer(std::move(model), v.added, v.add_prefix_space);
  } catch (const Error& e) {
    throw Error(source + ": " + e.what());
  }
}

StringVocab tokenizer_to_strings(const Tokenizer& t) {
  StringVocab v;
  const BpeModel& m = t.model();
  std::vector<bool> is_special(m.vocab_size(), false);
  for (const auto& s : t.special_tokens()) is_special[s.id] = true;
  v.vocab.reserve(m.vocab_size());
  for (uint32_t id = 0; id < m.vocab_size(); ++id)
    v.vocab.emplace_back(is_special[id] ? m.token_bytes(id) : byte_level_encode(m.token_bytes(id)),
                         id);
  v.merges.reserve(m.merges().size());
  for (const auto& mg : m.merges())
    v.merges.emplace_back(v.vocab[mg.left].first, v.vocab[mg.right].first);
  v.added = t.special_tokens();
  v.ignore_merges = m.options().ignore_merges;
  if (m.options().unk) v.unk_token = v.vocab[*m.options().unk].first;
  v.fuse_unk = m.options().fuse_unk;
  v.add_prefix_space = t.add_prefix_space();
  return v;
}

}  // namespace ember::data
