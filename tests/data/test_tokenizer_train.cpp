// BPE training: merges checked by hand on a small corpus, vocabulary size,
// min-frequency and special tokens, determinism (word order, thread count),
// streaming the corpus in blocks, and clear errors for bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "data/tokenizer/bpe_trainer.h"
#include "tokenizer_testing.h"
#include "temp_dir.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

using testing::TempDir;
using testing::read_text;

std::string merge_text(const data::Tokenizer& t, size_t i) {
  const auto& m = t.model().merges()[i];
  return t.model().token_bytes(m.left) + "|" + t.model().token_bytes(m.right);
}

// A temporary folder removed at scope exit.
std::string synthetic_text(uint32_t seed, size_t words, bool with_eot = true) {
  static const char* vocab[] = {"the", "cat", "sat", "on", "mat", "dog", "ran", "away", "and",
                                "then", "came", "back", "home", "again", "42", "3.14", "!", "?",
                                "über", "日本", "isn't", "we'll", "\n", "\n\n", "  ", "<|endoftext|>"};
  const size_t n = sizeof vocab / sizeof *vocab - (with_eot ? 0 : 1);
  std::mt19937 rng(seed);
  std::string s;
  for (size_t i = 0; i < words; ++i) {
    s += vocab[rng() % n];
    if (rng() % 4) s += ' ';
  }
  return s;
}

}  // namespace

TEST_CASE("training merges a small corpus as worked out by hand", "[tokenizer][train]") {
  // Words: "low" x1, " low" x4, " lower" x2, " newest" x6, " widest" x3.
  const std::string text =
      "low low low low low lower lower newest newest newest newest newest newest widest widest "
      "widest";
  data::BpeTrainOptions o;
  o.vocab_size = 256 + 7 + 3;  // the bytes, 7 merges, <|endoftext|> <|im_start|> <|im_end|>
  const data::Tokenizer t = data::train_bpe_on_text(text, o);
  REQUIRE(t.model().merges().size() == 7);
  // 1. (e,s) and (s,t) both occur 9 times: the lower pair of ids wins.
  CHECK(merge_text(t, 0) == "e|s");
  CHECK(merge_text(t, 1) == "es|t");  // 9
  CHECK(merge_text(t, 2) == "l|o");   // 7, ties with (o,w)
  CHECK(merge_text(t, 3) == "lo|w");  // 7
  // Then 6 each: (' ',n), (' ',low), (n,e), (e,w), (w,est); ' ' = 32 sorts first, n < low's id.
  CHECK(merge_text(t, 4) == " |n");
  CHECK(merge_text(t, 5) == " |low");
  CHECK(merge_text(t, 6) == "e|w");
  CHECK(t.vocab_size() == 266);
  CHECK(t.model().merges()[0].result == 256);
  CHECK(t.special_id("<|endoftext|>") == 263);
  CHECK(t.special_id("<|im_start|>") == 264);
  CHECK(t.special_id("<|im_end|>") == 265);
  CHECK(t.encode(" newest") == std::vector<uint32_t>{260, 262, 257});
}

TEST_CASE("training stops at the vocab size or the min frequency", "[tokenizer][train]") {
  const std::string text = synthetic_text(1, 3000);
  data::BpeTrainOptions o;
  o.vocab_size = 300;
  o.special_tokens = {"<|endoftext|>", "<|pad|>"};
  const data::Tokenizer t = data::train_bpe_on_text(text, o);
  CHECK(t.vocab_size() == 300);
  CHECK(t.special_id("<|pad|>") == 299);
  o.vocab_size = 100000;
  o.min_frequency = 50;
  const data::Tokenizer f = data::train_bpe_on_text(text, o);
  CHECK(f.vocab_size() < 100000);
  // Special tokens are cut out of the text before counting: no merge spans "<|".
  for (size_t i = 0; i < f.model().merges().size(); ++i) CHECK(merge_text(f, i) != "<|e");
  CHECK(f.decode(f.encode(text)) == text);
}

TEST_CASE("training is deterministic: word order and thread count do not matter",
          "[tokenizer][train]") {
  TempDir dir("tok");
  for (int i = 0; i < 6; ++i) dir.write("part" + std::to_string(i) + ".txt", synthetic_text(i, 4000));
  data::BpeTrainOptions o;
  o.vocab_size = 700;
  o.threads = 1;
  const std::string one = data::train_bpe_on_corpus({dir.path.string()}, o).to_json();
  o.threads = 2;
  const std::string two = data::train_bpe_on_corpus({dir.path.string()}, o).to_json();
  CHECK(one == two);
  data::CorpusOptions tiny_blocks;
  tiny_blocks.block_bytes = 1024;  // many more, smaller blocks: the same words
  CHECK(data::train_bpe_on_corpus({(dir.path / "*.txt").string()}, o, tiny_blocks).to_json() == one);

  data::WordCounts counts;
  counts.add_text(synthetic_text(9, 5000), {"<|endoftext|>"});
  auto words = counts.sorted();
  o.vocab_size = 500;
  const std::string sorted_json = data::train_bpe(words, o).to_json();
  std::shuffle(words.begin(), words.end(), std::mt19937(5));
  CHECK(data::train_bpe(words, o).to_json() == sorted_json);
}

TEST_CASE("the corpus reader splits documents and cuts long ones safely", "[tokenizer][train]") {
  TempDir dir("tok");
  dir.write("a.txt", "%\nfirst fortune\n%\nsecond\nfortune\n%\n%\nthird<|endoftext|>fourth\n%");
  std::string long_doc;
  for (int i = 0; i < 400; ++i) long_doc += synthetic_text(i, 20, false) + (i % 7 ? ".\n" : "\n\n  ");
  dir.write("b.txt", long_doc);
  data::CorpusOptions o;
  o.separator_line = "%";
  o.block_bytes = 1024;
  data::CorpusReader reader(data::list_corpus_files({dir.path.string()}), o);
  std::vector<data::TextBlock> blocks;
  data::TextBlock b;
  while (reader.next(b)) blocks.push_back(b);
  REQUIRE(blocks.size() > 6);
  CHECK(blocks[0].text == "first fortune\n");
  CHECK(blocks[1].text == "second\nfortune\n");
  CHECK(blocks[2].text == "third");
  CHECK(blocks[3].text == "fourth\n");
  for (int i = 0; i < 4; ++i) CHECK(blocks[i].starts_document);
  CHECK(reader.bytes_read() == reader.total_bytes());
  // b.txt: one document in blocks of about 1 KiB that encode as the whole does.
  CHECK(blocks[4].starts_document);
  std::string joined;
  std::vector<uint32_t> parts;
  data::BpeTrainOptions to;
  to.vocab_size = 400;
  const data::Tokenizer t = data::train_bpe_on_text(long_doc, to);
  for (size_t i = 4; i < blocks.size(); ++i) {
    CHECK(blocks[i].starts_document == (i == 4));
    CHECK(blocks[i].text.size() <= 1024);
    joined += blocks[i].text;
    const auto ids = t.encode(blocks[i].text);
    parts.insert(parts.end(), ids.begin(), ids.end());
  }
  CHECK(joined == long_doc);
  CHECK(parts == t.encode(long_doc));
}

TEST_CASE("corpus listing skips binary and duplicate files", "[tokenizer][train]") {
  TempDir dir("tok");
  dir.write("b.txt", "bee");
  dir.write("a.txt", "ay");
  dir.write("a.dat", std::string("\0\1\2", 3));
  dir.write(".hidden", "no");
  fs::create_symlink(dir.path / "a.txt", dir.path / "a.u8");
  const auto files = data::list_corpus_files({dir.path.string()});
  REQUIRE(files.size() == 2);
  CHECK(fs::path(files[0]).filename() == "a.txt");
  CHECK(fs::path(files[1]).filename() == "b.txt");
}

TEST_CASE("training reports bad input clearly", "[tokenizer][train]") {
  data::BpeTrainOptions o;
  REQUIRE_THROWS_WITH(data::train_bpe_on_corpus({"/no/such/corpus.txt"}, o),
                      Catch::Contains("/no/such/corpus.txt") && Catch::Contains("does not exist"));
  REQUIRE_THROWS_WITH(data::train_bpe_on_corpus({"/tmp/ember-none-*.nothing"}, o),
                      Catch::Contains("no corpus files match"));
  o.vocab_size = 200;
  REQUIRE_THROWS_WITH(data::train_bpe_on_text("abc", o), Catch::Contains("vocab size 200"));
  o.vocab_size = 300;
  o.special_tokens = {"<a>", "<a>"};
  REQUIRE_THROWS_WITH(data::train_bpe_on_text("abc", o), Catch::Contains("given twice"));
}
