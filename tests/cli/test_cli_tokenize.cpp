// `ember tokenize` given hostile input: a tokenizer.json whose ids are out of range or given
// twice (also as `ember import --tokenizer`) and an empty corpus are one plain line naming the
// file, exit 1.
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "cli_testing.h"
#include "data/tokenizer/tokenizer.h"
#include "nn/checkpoint_file.h"

namespace {

using Run = ember::testing::CliRun;
using ember::testing::check_plain_message;
using ember::testing::run_ember;
using ember::testing::TempDir;
using ember::testing::tiny_config;
using ember::testing::zero_checkpoint;

}  // namespace

TEST_CASE("tokenizer.json ids out of range or given twice are one line naming the file", "[cli][hostile]") {
  TempDir dir("cli_hostile_tokenizer");
  dir.write("corpus.txt", "some text\n");
  ember::nn::write_checkpoint(dir / "zero.h5", zero_checkpoint(tiny_config(257)));
  REQUIRE(run_ember("export --checkpoint " + dir / "zero.h5" + " --out " + dir / "hf").code == 0);
  const nlohmann::json good = nlohmann::json::parse(ember::data::Tokenizer::bytes({"<|endoftext|>"}).to_json());
  const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> variants = {
      {"1000000000", [](auto& j) { j["added_tokens"][0]["id"] = 1000000000; }},  // was: out of memory
      {"Ā", [](auto& j) { j["model"]["vocab"]["Ā"] = uint64_t{1} << 40; }},      // was: read as id 0
      {"Ċ", [](auto& j) { j["model"]["vocab"]["Ċ"] = 32; }},  // id 32 twice; '\n' in the message was a second line
  };
  for (const auto& [needle, breakit] : variants) {
    nlohmann::json j = good;
    breakit(j);
    dir.write("tok.json", j.dump());
    for (const std::string& args : {"tokenize --encode " + dir / "corpus.txt" + " --tokenizer " + dir / "tok.json" +
                                        " --out " + dir / "shards",
                                    "import --from " + dir / "hf" + " --tokenizer " + dir / "tok.json" +
                                        " --out " + dir / "x.h5"}) {
      INFO(args);
      const Run r = run_ember(args);
      CHECK(r.code == 1);
      check_plain_message(r.err);
      CHECK(r.err.find(dir / "tok.json") != std::string::npos);
      if (args.starts_with("tokenize")) CHECK(r.err.find(needle) != std::string::npos);
    }
  }
}

TEST_CASE("tokenize --encode of an empty corpus says so", "[cli][hostile]") {
  TempDir dir("cli_hostile_empty_corpus");
  dir.write("empty.txt", "");
  dir.write("tok.json", ember::data::Tokenizer::bytes({"<|endoftext|>"}).to_json());
  const Run r = run_ember("tokenize --encode " + dir / "empty.txt" + " --tokenizer " + dir / "tok.json" + " --out " +
                          dir / "shards");
  CHECK(r.code == 1);
  check_plain_message(r.err);
  CHECK(r.err.find("holds no text") != std::string::npos);  // was: "cannot write 'DIR/tokenizer.json': No such file"
}
