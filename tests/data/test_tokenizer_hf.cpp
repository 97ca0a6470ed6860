// Hugging Face tokenizer.json: ember's file gives the ids the HF tokenizers
// library gives with it, ember loads a file trained by that library and gives
// its ids (fixtures made by tests/fixtures/make_hf_expected.js), save/load round
// trips, clear errors for malformed files, and (when node and the npm package
// @anush008/tokenizers are at hand) a live check of a freshly trained file.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <random>

#include "data/tokenizer/bpe_trainer.h"
#include "skip_unless_ci.h"
#include "tokenizer_testing.h"

using namespace ember;
using namespace ember_test;

namespace {

// What tests/fixtures/ember_trained.tokenizer.json was made from. The file predates
// the reservation of <|im_start|> and <|im_end|> (Hugging Face's ids for it were
// computed then): it is trained with <|endoftext|> alone, as ember trained then.
data::Tokenizer train_fixture_tokenizer() {
  data::BpeTrainOptions o;
  o.vocab_size = 600;
  o.min_frequency = 1;
  o.special_tokens = {"<|endoftext|>"};
  data::CorpusOptions corpus;
  return data::train_bpe_on_corpus({(fixture_dir() / "small_corpus.txt").string()}, o, corpus);
}

void check_ids(const data::Tokenizer& t, const fs::path& expected_file) {
  const auto cases = nlohmann::json::parse(read_file(expected_file));
  REQUIRE(cases.size() >= 40);
  for (const auto& c : cases) {
    INFO(c["name"].get<std::string>());
    const std::string text = from_hex(c["hex"].get<std::string>());
    CHECK(t.encode(text) == c["ids"].get<std::vector<uint32_t>>());
  }
}

std::string edit_json(const std::string& text, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(text);
  edit(j);
  return j.dump();
}

}  // namespace

TEST_CASE("ember's tokenizer.json gives the Hugging Face library's ids", "[tokenizer][hf]") {
  const data::Tokenizer t = train_fixture_tokenizer();
  const fs::path fixture = fixture_dir() / "ember_trained.tokenizer.json";
  if (std::getenv("EMBER_UPDATE_FIXTURES")) t.save(fixture.string());
  CHECK(t.to_json() == read_file(fixture));  // training reproduces the file byte for byte
  check_ids(data::Tokenizer::load(fixture.string()), fixture_dir() / "ember_trained_hf_ids.json");
}

TEST_CASE("ember loads a tokenizer.json trained by the Hugging Face library", "[tokenizer][hf]") {
  const data::Tokenizer t = data::Tokenizer::load((fixture_dir() / "hf_trained.tokenizer.json").string());
  CHECK_FALSE(t.model().has_all_bytes());  // HF's default trainer keeps only the bytes it saw
  CHECK(t.find_special("<|endoftext|>").has_value());
  check_ids(t, fixture_dir() / "hf_trained_expected.json");
  // Written back by ember, it is the same tokenizer.
  const data::Tokenizer back = data::Tokenizer::from_json(t.to_json());
  CHECK(back.to_json() == t.to_json());
  check_ids(back, fixture_dir() / "hf_trained_expected.json");
}

TEST_CASE("tokenizer.json save and load round trip", "[tokenizer][hf]") {
  const data::Tokenizer t = train_fixture_tokenizer();
  const fs::path path = fs::temp_directory_path() / "ember_roundtrip.tokenizer.json";
  t.save(path.string());
  const data::Tokenizer back = data::Tokenizer::load(path.string());
  fs::remove(path);
  CHECK(back.to_json() == t.to_json());
  CHECK(back.vocab_size() == t.vocab_size());
  const std::string text = read_file(fixture_dir() / "small_corpus.txt") + "\xff\xfe tail";
  CHECK(back.encode(text) == t.encode(text));
  CHECK(back.decode(back.encode(text)) == text);
  // Merges written as [a, b] pairs (newer HF files) load the same.
  const std::string pairs = edit_json(t.to_json(), [](nlohmann::json& j) {
    for (auto& m : j["model"]["merges"]) {
      const std::string s = m.get<std::string>();
      m = nlohmann::json::array({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
    }
  });
  CHECK(data::Tokenizer::from_json(pairs).to_json() == t.to_json());
}

TEST_CASE("malformed tokenizer.json files give clear errors", "[tokenizer][hf]") {
  const std::string good = train_fixture_tokenizer().to_json();
  auto bad = [&](const std::function<void(nlohmann::json&)>& edit) {
    return edit_json(good, edit);
  };
  REQUIRE_THROWS_WITH(data::Tokenizer::load("/no/such/tokenizer.json"),
                      Catch::Contains("/no/such/tokenizer.json"));
  REQUIRE_THROWS_WITH(data::Tokenizer::from_json("{\"model\": "), Catch::Contains("malformed JSON"));
  REQUIRE_THROWS_WITH(data::Tokenizer::from_json("[1, 2]"), Catch::Contains("not a JSON object"));
  REQUIRE_THROWS_WITH(data::Tokenizer::from_json(bad([](auto& j) { j.erase("model"); })),
                      Catch::Contains("has no \"model\""));
  REQUIRE_THROWS_WITH(data::Tokenizer::from_json(bad([](auto& j) { j["model"]["type"] = "WordPiece"; })),
                      Catch::Contains("model type 'WordPiece'"));
  REQUIRE_THROWS_WITH(
      data::Tokenizer::from_json(bad([](auto& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; })),
      Catch::Contains("pre_tokenizer of type 'Whitespace'"));
  REQUIRE_THROWS_WITH(
      data::Tokenizer::from_json(bad([](auto& j) { j["normalizer"] = {{"type", "NFC"}}; })),
      Catch::Contains("normalizer of type 'NFC'"));
  REQUIRE_THROWS_WITH(data::Tokenizer::from_json(bad([](auto& j) { j["model"]["merges"][0] = "Ġ zzz"; })),
                      Catch::Contains("merge 0") && Catch::Contains("'zzz'"));
  REQUIRE_THROWS_WITH(data::Tokenizer::from_json(bad([](auto& j) { j["model"]["merges"][1] = "nospace"; })),
                      Catch::Contains("merge 1"));
  REQUIRE_THROWS_WITH(data::Tokenizer::from_json(bad([](auto& j) { j["model"]["vocab"]["x"] = "1"; })),
                      Catch::Contains("model.vocab['x']"));
  REQUIRE_THROWS_WITH(data::Tokenizer::from_json(bad([](auto& j) { j["model"]["vocab"].erase("a"); })),
                      Catch::Contains("no token has id 97"));
  REQUIRE_THROWS_WITH(
      data::Tokenizer::from_json(bad([](auto& j) { j["added_tokens"][0]["lstrip"] = true; })),
      Catch::Contains("lstrip"));
  REQUIRE_THROWS_WITH(
      data::Tokenizer::from_json(bad([](auto& j) { j["added_tokens"][0]["content"] = "<|other|>"; })),
      Catch::Contains("added token '<|other|>'"));
  REQUIRE_THROWS_WITH(data::Tokenizer::from_json(bad([](auto& j) { j["model"]["dropout"] = 0.1; })),
                      Catch::Contains("dropout"));
}

TEST_CASE("live: the Hugging Face library loads ember's file with identical ids",
          "[tokenizer][hf]") {
  const fs::path module = npm_package("@anush008/tokenizers", "EMBER_HF_MODULE");
  if (module.empty() || !have_command("node")) {
    EMBER_SKIP_UNLESS_CI("node or the npm package @anush008/tokenizers is not available");
  }
  data::BpeTrainOptions o;
  o.vocab_size = 2000;
  o.special_tokens = {"<|endoftext|>", "<|pad|>"};
  std::string corpus = read_file(fixture_dir() / "small_corpus.txt");
  for (const auto& c : nlohmann::json::parse(read_file(fixture_dir() / "gpt2_expected.json")))
    corpus += from_hex(c["hex"].get<std::string>()) + "<|endoftext|>";
  const data::Tokenizer t = data::train_bpe_on_text(corpus, o);
  const fs::path dir = fs::temp_directory_path() / ("ember_hf_live_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  t.save((dir / "tokenizer.json").string());
  nlohmann::json texts = nlohmann::json::parse(read_file(fixture_dir() / "gpt2_expected.json"));
  texts.push_back({{"name", "specials"}, {"hex", "613c7c7061647c3e3c7c656e646f66746578747c3e62"}});
  std::ofstream(dir / "texts.json") << texts.dump();
  const std::string cmd = "EMBER_HF_MODULE='" + module.string() + "' node '" +
                          (fixture_dir() / "hf_encode.js").string() + "' '" +
                          (dir / "tokenizer.json").string() + "' '" + (dir / "texts.json").string() +
                          "' '" + (dir / "ids.json").string() + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const auto cases = nlohmann::json::parse(read_file(dir / "ids.json"));
  fs::remove_all(dir);
  REQUIRE(cases.size() >= 40);
  for (const auto& c : cases) {
    INFO(c["name"].get<std::string>());
    CHECK(t.encode(from_hex(c["hex"].get<std::string>())) ==
          c["ids"].get<std::vector<uint32_t>>());
  }
}
