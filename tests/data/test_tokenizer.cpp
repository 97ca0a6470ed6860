// Tokenizer units: the GPT-2 pre-tokenizer's pieces, the byte-level alphabet,
// BPE merging against a naive reference (short and long pieces), special
// tokens, the encode cache, round trips on arbitrary bytes, and bad input.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "data/tokenizer/bpe_trainer.h"
#include "data/tokenizer/byte_level.h"
#include "data/tokenizer/pretokenize.h"
#include "data/tokenizer/tokenizer.h"
#include "tokenizer_testing.h"

using namespace ember;

namespace {

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  data::pretokenize(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

using V = std::vector<std::string>;

std::string random_bytes(std::mt19937& rng, size_t n, bool ascii_heavy) {
  static const char* samples[] = {"a", "b", "ab", " ", "  ", "\n", "'s", "1", "é", "你", "👋",
                                  "\xcc\x81", "\xff", "\x80", "<|", "|>", "\t", "!"};
  std::string s;
  while (s.size() < n) {
    if (ascii_heavy) s += samples[rng() % (sizeof samples / sizeof *samples)];
    else s += static_cast<char>(rng() & 0xFF);
  }
  return s;
}

// GPT-2's bpe(): merge every occurrence of the lowest-ranked pair, repeat.
std::vector<uint32_t> naive_bpe(const data::BpeModel& m, std::string_view piece) {
  std::map<std::pair<uint32_t, uint32_t>, std::pair<size_t, uint32_t>> rank;
  for (size_t r = 0; r < m.merges().size(); ++r) {
    const auto& mg = m.merges()[r];
    rank.emplace(std::make_pair(mg.left, mg.right), std::make_pair(r, mg.result));
  }
  std::vector<uint32_t> w;
  for (char c : piece) w.push_back(m.byte_id(static_cast<uint8_t>(c)));
  while (w.size() > 1) {
    size_t best = SIZE_MAX;
    std::pair<uint32_t, uint32_t> pair;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      auto it = rank.find({w[i], w[i + 1]});
      if (it != rank.end() && it->second.first < best) {
        best = it->second.first;
        pair = {w[i], w[i + 1]};
      }
    }
    if (best == SIZE_MAX) break;
    std::vector<uint32_t> next;
    for (size_t i = 0; i < w.size(); ++i) {
      if (i + 1 < w.size() && w[i] == pair.first && w[i + 1] == pair.second) {
        next.push_back(rank[pair].second);
        ++i;
      } else {
        next.push_back(w[i]);
      }
    }
    w = next;
  }
  return w;
}

const data::Tokenizer& small_trained() {
  static const data::Tokenizer tok = [] {
    data::BpeTrainOptions o;
    o.vocab_size = 600;
    o.min_frequency = 1;
    std::string text = ember_test::read_file(ember_test::fixture_dir() / "small_corpus.txt");
    text += std::string(50, 'a') + " " + std::string(40, '=') + " abababababababab";
    return data::train_bpe_on_text(text, o);
  }();
  return tok;
}

}  // namespace

TEST_CASE("pre-tokenizer follows the GPT-2 pattern", "[tokenizer]") {
  CHECK(pieces("Hello world") == V{"Hello", " world"});
  CHECK(pieces("a  b") == V{"a", " ", " b"});
  CHECK(pieces("a\n\nb") == V{"a", "\n", "\n", "b"});
  CHECK(pieces("end   ") == V{"end", "   "});
  CHECK(pieces("   x") == V{"  ", " x"});
  CHECK(pieces("it's we'll I'm they're you've he'd can't") ==
        V{"it", "'s", " we", "'ll", " I", "'m", " they", "'re", " you", "'ve", " he", "'d", " can",
          "'t"});
  CHECK(pieces("IT'S") == V{"IT", "'", "S"});  // contractions are lower case only
  CHECK(pieces("x' 'x") == V{"x", "'", " '", "x"});
  CHECK(pieces("!'s") == V{"!'", "s"});
  CHECK(pieces("12abc 34 5.6") == V{"12", "abc", " 34", " 5", ".", "6"});
  CHECK(pieces("!!! ?") == V{"!!!", " ?"});
  CHECK(pieces("你好 世界") == V{"你好", " 世界"});
  CHECK(pieces("e\xcc\x81t") == V{"e", "\xcc\x81", "t"});  // a combining mark is not a letter
  CHECK(pieces("\xc2\xa0x") == V{"\xc2\xa0", "x"});         // U+00A0 is White_Space
  CHECK(pieces(" \xc2\xa0x") == V{" ", "\xc2\xa0", "x"});
  CHECK(pieces("a\xc2\x85" "b") == V{"a", "\xc2\x85", "b"});  // U+0085 too
  CHECK(pieces("\xef\xbb\xbfx") == V{"\xef\xbb\xbf", "x"});  // U+FEFF is not
  CHECK(pieces("\xff\xfe" "ab \xff") == V{"\xff\xfe", "ab", " \xff"});
  CHECK(pieces("\xe2\x82" "A") == V{"\xe2\x82", "A"});       // truncated sequence
  CHECK(pieces("Ⅻ ½ ٣") == V{"Ⅻ", " ½", " ٣"});              // Nl, No, Nd
  CHECK(pieces("").empty());
}

TEST_CASE("pre-tokenizer pieces cover any byte string", "[tokenizer]") {
  std::mt19937 rng(7);
  for (int k = 0; k < 200; ++k) {
    const std::string s = random_bytes(rng, 1 + rng() % 300, k % 2 == 0);
    std::string joined;
    for (const auto& p : pieces(s)) {
      REQUIRE(!p.empty());
      joined += p;
    }
    REQUIRE(joined == s);
  }
}

TEST_CASE("byte-level alphabet is GPT-2's", "[tokenizer]") {
  CHECK(data::byte_level_code_point('!') == '!');
  CHECK(data::byte_level_code_point(' ') == 0x120);   // Ġ
  CHECK(data::byte_level_code_point('\n') == 0x10A);  // Ċ
  CHECK(data::byte_level_code_point(0xAD) == 0x143);
  CHECK(data::byte_level_encode(" the") == "\xc4\xa0the");
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  CHECK(data::byte_level_decode(data::byte_level_encode(all)) == all);
  CHECK_FALSE(data::byte_level_decode("\xe4\xbd\xa0").has_value());  // 你 is not in the alphabet
}

TEST_CASE("the byte tokenizer maps bytes to themselves", "[tokenizer]") {
  const data::Tokenizer t;
  CHECK(t.vocab_size() == 256);
  CHECK(t.encode("Ab\xff") == std::vector<uint32_t>{'A', 'b', 0xFF});
  const data::Tokenizer s = data::Tokenizer::bytes({"<|endoftext|>"});
  CHECK(s.vocab_size() == 257);
  CHECK(s.encode("a<|endoftext|>b") == std::vector<uint32_t>{'a', 256, 'b'});
  CHECK(s.decode(std::vector<uint32_t>{'a', 256}) == "a<|endoftext|>");
}

TEST_CASE("BPE merging matches GPT-2's algorithm on short and long pieces", "[tokenizer]") {
  const data::Tokenizer& t = small_trained();
  std::mt19937 rng(3);
  const std::vector<std::string> fixed = {std::string(50, 'a'), std::string(300, 'a'),
                                          std::string(1000, '='), "abababababababab",
                                          std::string(777, 'b') + "ab"};
  std::vector<std::string> all = fixed;
  for (int k = 0; k < 100; ++k) all.push_back(random_bytes(rng, 2 + rng() % 600, true));
  for (const auto& piece : all) {
    std::vector<uint32_t> got;
    t.model().encode_piece(piece, got);
    REQUIRE(got == naive_bpe(t.model(), piece));
  }
}

TEST_CASE("decode(encode(s)) == s for any bytes", "[tokenizer]") {
  const data::Tokenizer& t = small_trained();
  std::mt19937 rng(11);
  data::EncodeCache cache;
  for (int k = 0; k < 300; ++k) {
    const std::string s = random_bytes(rng, rng() % 500, k % 3 != 0);
    std::vector<uint32_t> ids;
    t.encode(s, ids, cache);
    REQUIRE(t.decode(ids) == s);
    REQUIRE(ids == t.encode(s));  // the cache changes nothing
  }
}

TEST_CASE("special tokens are matched before pre-tokenising, longest first", "[tokenizer]") {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  tokens.push_back("<|a|>");
  tokens.push_back("<|a|>b");
  const data::Tokenizer t(data::BpeModel(tokens, {}), {{"<|a|>", 256, true}, {"<|a|>b", 257, true}});
  CHECK(t.encode("x<|a|>y<|a|>b") == std::vector<uint32_t>{'x', 256, 'y', 257});
  CHECK(t.encode_ordinary("<|a|>").size() == 5);
  CHECK(t.special_id("<|a|>") == 256);
  CHECK_FALSE(t.find_special("<|b|>").has_value());
  REQUIRE_THROWS_WITH(t.special_id("<|endoftext|>"),
                      Catch::Contains("unknown special token '<|endoftext|>'") &&
                          Catch::Contains("<|a|>"));
}

TEST_CASE("one cache shared by two tokenizers stays correct", "[tokenizer]") {
  const data::Tokenizer& trained = small_trained();
  const data::Tokenizer bytes;
  data::EncodeCache cache;
  std::vector<uint32_t> a, b, c;
  trained.encode("the lighthouse keeper", a, cache);
  bytes.encode("the lighthouse keeper", b, cache);
  trained.encode("the lighthouse keeper", c, cache);
  CHECK(b.size() == 21);
  CHECK(a == c);
  CHECK(a.size() < b.size());
}

TEST_CASE("tokenizer rejects bad ids and bad vocabularies", "[tokenizer]") {
  const data::Tokenizer t;
  REQUIRE_THROWS_WITH(t.decode(std::vector<uint32_t>{300}), Catch::Contains("300"));
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  tokens.push_back("ab");
  REQUIRE_THROWS_WITH(data::BpeModel(tokens, {{'a', 'c', 256}}), Catch::Contains("does not spell"));
  REQUIRE_THROWS_WITH(data::BpeModel(tokens, {{'a', 'b', 999}}), Catch::Contains("outside"));
  REQUIRE_THROWS_WITH(data::Tokenizer(data::BpeModel(tokens, {}), {{"<x>", 256, true}}),
                      Catch::Contains("another token"));
}
