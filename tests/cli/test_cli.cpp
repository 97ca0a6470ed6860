// The `ember` program's shell contract (docs/cli.md), across its commands: --version,
// defaults in every subcommand's --help, the exit codes of a usage error (2, also for an
// integer out of its type's range) and of a bad input file (1, one "ember: error:" line
// naming the file or option), and outputs that replace only a file of their kind.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli_run.h"
#include "cli_testing.h"
#include "data/token_shard.h"

namespace fs = std::filesystem;

namespace {

using Run = ember::testing::CliRun;
using ember::testing::check_plain_message;
using ember::testing::read_text;
using ember::testing::run_ember;
using ember::testing::TempDir;
using ember::testing::tiny_config;
using ember::testing::zero_checkpoint;

// Names listed under "Subcommands:" in `ember --help`.
std::vector<std::string> subcommands() {
  const std::string help = run_ember("--help").out;
  std::vector<std::string> names;
  std::istringstream lines(help.substr(help.find("Subcommands:")));
  std::string line;
  const std::regex entry(R"(^  ([a-z][a-z0-9-]*) .*)");
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_match(line, m, entry)) names.push_back(m[1]);
  }
  return names;
}

}  // namespace

TEST_CASE("ember --version prints the project version and build info", "[cli]") {
  const Run r = run_ember("--version");
  CHECK(r.code == 0);
  CHECK(r.out.starts_with(std::string("ember ") + EMBER_PROJECT_VERSION + "\nbuild: "));
}

TEST_CASE("every numeric option of every subcommand shows its default in --help", "[cli]") {
  const std::vector<std::string> names = subcommands();
  REQUIRE(names.size() >= 5);
  CHECK(run_ember("train --help").out.find("--steps INT=1000 ") != std::string::npos);
  CHECK(run_ember("generate --help").out.find("--temperature FLOAT=1 ") != std::string::npos);
  // An option line: "  --name TYPE[:CHECK][=default] ...", CHECK e.g. "POSITIVE" or
  // "INT in [0 - 1]"; numbers always have a default.
  const std::regex numeric(R"(^\s+(-\w,)?--[a-z0-9-]+ (INT|UINT|FLOAT)\b(.*)$)");
  const std::regex with_default(R"(^(:[A-Z]+( in \[[^\]]*\])?)?=\S)");
  int options = 0;
  for (const std::string& name : names) {
    const Run r = run_ember(name + " --help");
    CHECK(r.code == 0);
    std::istringstream lines(r.out);
    std::string line;
    std::smatch m;
    while (std::getline(lines, line)) {
      if (!std::regex_match(line, m, numeric)) continue;
      ++options;
      INFO("ember " << name << " --help: " << line);
      CHECK(std::regex_search(m[3].str(), with_default));
    }
  }
  CHECK(options >= 20);  // the check above did see the options
}

TEST_CASE("a command-line usage error exits with 2", "[cli]") {
  Run r = run_ember("train --no-such-option");
  CHECK(r.code == 2);
  CHECK(r.err.find("--no-such-option") != std::string::npos);
  CHECK(run_ember("").code == 2);                                    // no subcommand
  CHECK(run_ember("generate --max-tokens many").code == 2);          // not a number
  CHECK(run_ember("info --config /no/such/config.json").code == 2);  // the option's file check
}

TEST_CASE("a bad input file exits with 1 and one error line naming it", "[cli]") {
  const fs::path bad =
      fs::temp_directory_path() / ("ember_cli_bad_" + std::to_string(getpid()) + ".json");
  std::ofstream(bad) << R"({"vocab_size": 256, "d_model": )";
  const Run r = run_ember("info --config " + bad.string());
  fs::remove(bad);
  CHECK(r.code == 1);
  CHECK(r.err.starts_with("ember: error: "));
  CHECK(r.err.find(bad.string()) != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("hostile command-line values and files get one plain line naming the option or file", "[cli][messages]") {
  TempDir dir("cli_hostile");
  ember::nn::write_checkpoint(dir / "zero.h5", zero_checkpoint(tiny_config(257)));
  const std::vector<uint32_t> tokens = {'a', 'b', 256, 'c', 0xC3, 0xA9, 256, 'd', 'e'};
  ember::data::write_shard(dir / "tokens.bin", tokens, 257);
  dir.write("corpus.txt", "some text\n");
  dir.write("garbage.json", "{\"model\": ");
  fs::create_directories(dir.path / "folder");
  ember::nn::write_checkpoint(dir / "zero300.h5", zero_checkpoint(tiny_config(300)));  // stores no tokenizer
  const std::string ckpt = " --checkpoint " + dir / "zero.h5";
  // A huge --max-tokens ends at the context, as any other.
  CHECK(run_ember("generate" + ckpt + " --max-tokens 1000000000000 --seed 1").code == 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"eval" + ckpt + " --data " + dir / "tokens.bin" + " --seq-len 4 --batch-size 100000000000", "--batch-size"},
      {"eval" + ckpt + " --data " + dir / "tokens.bin" + " --seq-len -1", "--seq-len"},
      {"tokenize --train " + dir / "corpus.txt" + " --vocab-size -1 --out " + dir / "t.json", "--vocab-size"},
      {"tokenize --train " + dir / "corpus.txt" + " --vocab-size 258 --out " + dir / "t.json",
       "--vocab-size must be between 259 (the 256 bytes, <|endoftext|>, <|im_start|> and <|im_end|>)"},
      {"tokenize --encode " + dir / "corpus.txt" + " --tokenizer " + dir / "garbage.json" + " --out " + dir / "sh",
       "garbage.json"},
      {"tokenize --encode " + dir / "corpus.txt" + " --tokenizer " + dir / "garbage.json" + " --shard-tokens -5 --out " +
           dir / "sh",
       "--shard-tokens"},
      {"tokenize --train " + dir / "corpus.txt" + " --encode --tokenizer " + dir / "t.json" + " --out " +
           dir / "corpus.txt",
       "--out"},
      {"generate" + ckpt + " --tokenizer " + dir / "garbage.json", "garbage.json"},
      {"generate --checkpoint " + dir / "zero300.h5", "--tokenizer"},
      {"import --from " + dir.path.string() + " --tokenizer " + dir / "folder" + " --out " + dir / "x.h5", "folder"},
      {"import --from " + dir / "folder" + " --out " + dir / "x.h5", "config.json"},
      {"import --from " + dir.path.string() + " --out " + dir / "folder", "--out"},
      {"info --preset dense-small --batch-size 0", "--batch-size"},
      {"info --preset dense-small --seq-len -5", "--seq-len"},
  };
  for (const auto& [args, names] : cases) {
    INFO(args);
    const Run r = run_ember(args);
    CHECK(r.code == 1);
    check_plain_message(r.err);
    CHECK(r.err.find(names) != std::string::npos);
  }
}

TEST_CASE("tokenize --train, plot and bench --json replace only a file of their kind", "[cli][hostile]") {
  TempDir dir("cli_hostile_replace");
  ember::nn::write_checkpoint(dir / "zero.h5", zero_checkpoint(tiny_config(257)));
  const std::string before = read_text(dir.path / "zero.h5");
  fs::create_directories(dir.path / "run");
  dir.write("run/metrics.jsonl", "{\"step\":1,\"loss\":5.0,\"lr\":0.001,\"tokens\":32}\n"
                                 "{\"step\":2,\"loss\":4.0,\"lr\":0.001,\"tokens\":64}\n");
  dir.write("corpus.txt", "some text to train a tokenizer on\n");
  const Run tok = run_ember("tokenize --train " + dir / "corpus.txt" + " --vocab-size 300 --out " + dir / "zero.h5");
  CHECK(tok.code == 1);  // was: the checkpoint replaced by a tokenizer.json
  check_plain_message(tok.err);
  CHECK(tok.err.find("--out " + dir / "zero.h5") != std::string::npos);
  CHECK(read_text(dir.path / "zero.h5") == before);
  const Run plot = run_ember("plot " + dir / "run" + " --out " + dir / "zero.h5");
  CHECK(plot.code == 1);
  check_plain_message(plot.err);
  CHECK(plot.err.find("--out " + dir / "zero.h5") != std::string::npos);
  CHECK(read_text(dir.path / "zero.h5") == before);
  CHECK(run_ember("plot " + dir / "run" + " --out " + dir / "p.svg").code == 0);
  CHECK(run_ember("plot " + dir / "run" + " --out " + dir / "p.svg").code == 0);  // an SVG is replaced
  dir.write("tiny.json", tiny_config(256));
  const Run bench = run_ember("bench --config " + dir / "tiny.json" +
                              " --batch-size 1 --seq-len 4 --steps 1 --warmup 0 --json " + dir / "zero.h5");
  CHECK(bench.code == 1);
  check_plain_message(bench.err);
  CHECK(bench.err.find("--json " + dir / "zero.h5") != std::string::npos);
  CHECK(read_text(dir.path / "zero.h5") == before);
  // metrics.jsonl that is a folder
  fs::create_directories(dir.path / "odd/metrics.jsonl");
  const Run odd = run_ember("plot " + dir / "odd" + " --out " + dir / "q.svg");
  CHECK(odd.code == 1);
  CHECK(odd.err.find("is a folder") != std::string::npos);
}

TEST_CASE("integer options out of their type's range or in octal are usage errors", "[cli][hostile]") {
  for (const auto& [args, option] : std::vector<std::pair<std::string, std::string>>{
           {"generate --checkpoint /dev/null --seed -1", "--seed"},  // was: seed 2^64 - 1
           {"info --preset dense-small --batch-size 9223372036854775808", "--batch-size"},  // was: 2^63 - 1
           {"info --preset dense-small --batch-size 1e3", "--batch-size"},
           {"tokenize --train x --out y --min-frequency 18446744073709551616", "--min-frequency"}}) {
    INFO(args);
    const Run r = run_ember(args);
    CHECK(r.code == 2);
    CHECK(r.err.find(option) != std::string::npos);
  }
  // "010" is ten, not octal 8.
  const Run ten = run_ember("info --preset dense-small --batch-size 010");
  CHECK(ten.code == 0);
  CHECK(ten.out.find("at B = 10,") != std::string::npos);
}
