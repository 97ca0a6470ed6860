// `ember evaluate` as a program: on a checkpoint with zeroed weights (every token
// log 1/V) the four hand-worked items of test_evaluate.cpp give acc 0.5 and
// acc_norm 0.75 in the table and in --json; --limit; the text mode's bits per
// byte is log2(V); a bad task line is one error line naming FILE:LINE (exit 1).
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "autograd/grad_mode.h"
#include "data/tokenizer/tokenizer.h"
#include "cli_run.h"
#include "nn/checkpoint_file.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

using Run = ember::testing::CliRun;
using ember::testing::read_text;

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

// A temporary folder with a zeroed 257-token model over bytes + <|endoftext|>.
struct Fixture {
  fs::path dir = fs::temp_directory_path() / ("ember_cli_evaluate_" + std::to_string(getpid()));
  Fixture() {
    fs::create_directories(dir);
    nn::Checkpoint c;
    c.config = nn::ModelConfig::from_json(
        R"({"vocab_size": 257, "d_model": 16, "n_layers": 1, "n_heads": 2, "ffn_hidden": 32, "max_seq_len": 16})");
    nn::Transformer model(c.config, 1);
    NoGradGuard no_grad;
    for (const Variable& p : model.parameters()) p.data().fill_(0.0);
    c.model = model.state_dict();
    c.tokenizer_json = data::Tokenizer::bytes({"<|endoftext|>"}).to_json();
    nn::write_checkpoint((dir / "zero.h5").string(), c);
  }
  ~Fixture() { fs::remove_all(dir); }

  Run ember(const std::string& args) const { return ember::testing::run_ember(args); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

const std::string kItems =
    "{\"context\": \"Q:\", \"choices\": [\"ab\", \"abc\"], \"gold\": 0}\n"
    "{\"context\": \"Q:\", \"choices\": [\"\u00e9\", \"ab\"], \"gold\": 1}\n"
    "{\"context\": \"Q: \", \"choices\": [\"xyz\", \"xy\"], \"gold\": 0}\n"
    "{\"context\": \"\", \"choices\": [\"aaaa\", \"b\"], \"gold\": 1}\n";

}  // namespace

TEST_CASE("ember evaluate --tasks: the table and --json on hand-worked items", "[cli][evaluate]") {
  const Fixture f;
  write_text(f.dir / "t.jsonl", kItems);
  const std::string base =
      "evaluate --checkpoint " + f.path("zero.h5") + " --tasks " + f.path("t.jsonl");
  const Run table = f.ember(base + " --batch-size 2");
  REQUIRE(table.code == 0);
  CHECK(table.out.find("4 items (chance 0.5000)") != std::string::npos);
  CHECK(table.out.find("acc         0.5000   0.2887") != std::string::npos);
  CHECK(table.out.find("acc_norm    0.7500   0.2500") != std::string::npos);
  const Run js = f.ember(base + " --json");
  REQUIRE(js.code == 0);
  const nlohmann::json j = nlohmann::json::parse(js.out);
  CHECK(j["tasks"] == f.path("t.jsonl"));
  CHECK(j["n"] == 4);
  CHECK(j["acc"].get<double>() == 0.5);
  CHECK(j["acc_norm"].get<double>() == 0.75);
  CHECK(j["acc_stderr"].get<double>() == Approx(std::sqrt(0.25 / 3)));
  CHECK(j["acc_norm_stderr"].get<double>() == Approx(0.25));
  const nlohmann::json one = nlohmann::json::parse(f.ember(base + " --json --limit 1").out);
  CHECK(one["n"] == 1);
  CHECK(one["acc"].get<double>() == 1.0);
  CHECK(one["acc_stderr"].is_null());  // undefined for one item
}

TEST_CASE("ember evaluate --text: bits per byte of a uniform model is log2(V)", "[cli][evaluate]") {
  const Fixture f;
  write_text(f.dir / "a.txt", "hello, world: a text longer than one window of sixteen tokens\n");
  const Run r = f.ember("evaluate --checkpoint " + f.path("zero.h5") + " --text " +
                        f.path("a.txt") + " --seq-len 8 --stride 4 --json");
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["tokens"] == 62);
  CHECK(j["bytes"] == 62);
  CHECK(j["seq_len"] == 8);
  CHECK(j["stride"] == 4);
  CHECK(j["bits_per_byte"].get<double>() == Approx(std::log2(257.0)));
  CHECK(j["perplexity"].get<double>() == Approx(257.0));
}

TEST_CASE("ember evaluate: a bad task line is one error line naming FILE:LINE", "[cli][evaluate]") {
  const Fixture f;
  write_text(f.dir / "bad.jsonl",
             kItems + "{\"context\": \"Q\", \"choices\": [\"a\"], \"gold\": 0}\n");
  const Run r =
      f.ember("evaluate --checkpoint " + f.path("zero.h5") + " --tasks " + f.path("bad.jsonl"));
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "ember: error: " + f.path("bad.jsonl") +
                     ":5: \"choices\" needs at least 2 entries, got 1\n");
  const Run usage = f.ember("evaluate --checkpoint " + f.path("zero.h5"));
  CHECK(usage.code == 1);
  CHECK(usage.err == "ember: error: give --tasks FILE.jsonl or --text FILE\n");
}
