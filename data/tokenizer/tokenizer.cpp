// Tokenizer construction, encoding (special tokens, then the pre-tokenizer,
// then BPE per piece through the cache) and decoding.
#include "data/tokenizer/tokenizer.h"

#include <atomic>

#include "core/error.h"
#include "data/tokenizer/pretokenize.h"
#include "data/tokenizer/utf8.h"

namespace ember::data {
namespace {

uint64_t next_serial() {
  static std::atomic<uint64_t> counter{1};
  return counter.fetch_add(1);
}

BpeModel byte_model(const std::vector<std::string>& specials) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  for (const auto& s : specials) tokens.push_back(s);
  return BpeModel(std::move(tokens), {});
}

// Pieces longer than this skip the cache: they are rare and would crowd it.
constexpr size_t kMaxCachedPiece = 64;

}  // namespace

Tokenizer::Tokenizer() : Tokenizer(byte_model({}), {}) {}

Tokenizer::Tokenizer(BpeModel model, std::vector<SpecialToken> specials, bool add_prefix_space)
    : model_(std::move(model)),
      specials_(std::move(specials)),
      add_prefix_space_(add_prefix_space),
      serial_(next_serial()) {
  for (const auto& s : specials_) {
    EMBER_CHECK(!s.content.empty(), "special token with id ", s.id, " is empty");
    EMBER_CHECK(is_valid_utf8(s.content), "special token with id ", s.id,
                " is not valid UTF-8");
    EMBER_CHECK(s.id < model_.vocab_size(), "special token '", s.content, "' has id ", s.id,
                ", outside the vocabulary of ", model_.vocab_size());
    EMBER_CHECK(model_.token_bytes(s.id) == s.content, "special token '", s.content,
                "' has id ", s.id, ", which the vocabulary gives to another token");
  }
}

Tokenizer Tokenizer::bytes(const std::vector<std::string>& specials) {
  std::vector<SpecialToken> list;
  for (size_t i = 0; i < specials.size(); ++i)
    list.push_back(SpecialToken{specials[i], static_cast<uint32_t>(256 + i), true});
  return Tokenizer(byte_model(specials), std::move(list));
}

std::optional<uint32_t> Tokenizer::find_special(std::string_view content) const {
  for (const auto& s : specials_)
    if (s.content == content) return s.id;
  return std::nullopt;
}

uint32_t Tokenizer::special_id(std::string_view content) const {
  if (auto id = find_special(content)) return *id;
  std::string known;
  for (const auto& s : specials_) known += (known.empty() ? "" : ", ") + s.content;
  throw Error(detail::concat("unknown special token '", content, "' (this tokenizer has ",
                             known.empty() ? std::string("none") : known, ")"));
}

int64_t Tokenizer::missing_chat_tokens() const {
  int64_t missing = 0;
  for (std::string_view s : kReservedSpecials) missing += find_special(s) ? 0 : 1;
  return missing;
}

Tokenizer Tokenizer::with_chat_tokens() const {
  std::vector<std::string> tokens = model_.tokens();
  std::vector<SpecialToken> specials = specials_;
  for (std::string_view s : kReservedSpecials) {
    if (find_special(s)) continue;
    specials.push_back(SpecialToken{std::string(s), static_cast<uint32_t>(tokens.size()), true});
    tokens.emplace_back(s);
  }
  return Tokenizer(BpeModel(std::move(tokens), model_.merges(), model_.options()), std::move(specials),
                   add_prefix_space_);
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> out;
  EncodeCache cache;
  encode(text, out, cache);
  return out;
}

std::vector<uint32_t> Tokenizer::encode_ordinary(std::string_view text) const {
  std::vector<uint32_t> out;
  EncodeCache cache;
  encode_ordinary(text, out, cache);
  return out;
}

void Tokenizer::encode(std::string_view text, std::vector<uint32_t>& out,
                       EncodeCache& cache) const {
  if (specials_.empty()) {
    encode_ordinary(text, out, cache);
    return;
  }
  // next[k]: where special k next occurs at or after pos (npos: nowhere).
  std::vector<size_t> next(specials_.size());
  for (size_t k = 0; k < specials_.size(); ++k) next[k] = text.find(specials_[k].content);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = std::string_view::npos, best_k = 0;
    for (size_t k = 0; k < specials_.size(); ++k) {
      if (next[k] != std::string_view::npos && next[k] < pos)
        next[k] = text.find(specials_[k].content, pos);
      if (next[k] < best ||
          (next[k] == best && best != std::string_view::npos &&
           specials_[k].content.size() > specials_[best_k].content.size())) {
        best = next[k];
        best_k = k;
      }
    }
    if (best == std::string_view::npos) {
      encode_ordinary(text.substr(pos), out, cache);
      return;
    }
    encode_ordinary(text.substr(pos, best - pos), out, cache);
    out.push_back(specials_[best_k].id);
    pos = best + specials_[best_k].content.size();
  }
}

void Tokenizer::encode_ordinary(std::string_view text, std::vector<uint32_t>& out,
                                EncodeCache& cache) const {
  if (text.empty()) return;
  if (add_prefix_space_ && text[0] != ' ') {
    std::string spaced = " ";
    spaced += text;
    encode_segment(spaced, out, cache);
  } else {
    encode_segment(text, out, cache);
  }
}

void Tokenizer::encode_segment(std::string_view text, std::vector<uint32_t>& out,
                               EncodeCache& cache) const {
  cache.bind(serial_);
  pretokenize(text, [&](std::string_view piece) {
    if (piece.size() == 1) {
      const uint32_t id = model_.byte_id(static_cast<uint8_t>(piece[0]));
      if (id != BpeModel::kNoToken) {
        out.push_back(id);
        return;
      }
    }
    if (piece.size() > kMaxCachedPiece) {
      model_.encode_piece(piece, out);
      return;
    }
    const uint64_t h = hash_bytes(piece);
    if (cache.append(piece, h, out)) return;
    const size_t before = out.size();
    model_.encode_piece(piece, out);
    cache.insert(piece, h, out.data() + before, out.size() - before);
  });
}

std::string Tokenizer::decode(std::span<const uint32_t> ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (uint32_t id : ids) {
    EMBER_CHECK(id < model_.vocab_size(), "decode: token id ", id,
                " is outside the vocabulary of ", model_.vocab_size());
    out += model_.token_bytes(id);
  }
  return out;
}

}  // namespace ember::data
