// The `ember` program's shell contract (docs/cli.md): --version, defaults in
// every subcommand's --help, and the exit codes of a usage error (2) and of a
// bad input file (1, one "ember: error:" line naming the file), and Ctrl-C
// during `ember train` (a checkpoint, then 130).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_run.h"
#include "tiny_train.h"

extern char** environ;

namespace fs = std::filesystem;

namespace {

using Run = ember::testing::CliRun;
using ember::testing::read_text;
using ember::testing::run_ember;

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

// Starts `ember` (args[0] is its path) in the background with stdout on /dev/null; returns its pid.
pid_t spawn_quiet(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, EMBER_BINARY, &quiet, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&quiet);
  REQUIRE(rc == 0);
  return pid;
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

TEST_CASE("Ctrl-C stops ember train with a checkpoint and exit code 130", "[cli]") {
  const fs::path dir = fs::temp_directory_path() / ("ember_cli_sigint_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "tiny.json")
      << R"({"vocab_size": 256, "d_model": 16, "n_layers": 1, "n_heads": 2,
    "ffn_hidden": 32, "max_seq_len": 32})";
  {
    std::ofstream corpus(dir / "corpus.txt");
    for (int i = 0; i < 200; ++i)
      corpus << "line " << i << ": the quick brown fox jumps over the lazy dog.\n";
  }
  const std::vector<std::string> args = {EMBER_BINARY,   "train",
                                         "--config",     (dir / "tiny.json").string(),
                                         "--data",       (dir / "corpus.txt").string(),
                                         "--out",        (dir / "run").string(),
                                         "--steps",      "1000000",
                                         "--batch-size", "2",
                                         "--seq-len",    "16",
                                         "--log-every",  "1000000"};
  const pid_t pid = spawn_quiet(args);
  // Interrupt once the loop runs (metrics.jsonl is opened after the handlers are installed).
  for (int i = 0; i < 6000 && !fs::exists(dir / "run" / "metrics.jsonl"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  kill(pid, SIGINT);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  std::ifstream latest(dir / "run" / "latest");
  std::string name;
  latest >> name;
  CHECK(fs::exists(dir / "run" / name));
  CHECK(name.starts_with("step_"));
  CHECK(fs::exists(dir / "run" / "loss.svg"));  // the plot of a stopped run too
  fs::remove_all(dir);
}

// --- run safety (docs/cli.md#safety-of-ember-train-runs): option validation, the run
// folder's lock, resume with the run's options, data fingerprints, divergence,
// and a closed stdout. Tiny runs on a text corpus written here.
namespace {
// run_ember() under another name: below, the name `ember` is also the namespace.
}  // namespace

#include <nlohmann/json.hpp>

#include "nn/checkpoint_file.h"
#include "apps/train/finite_parameters.h"
#include "apps/common/model_io.h"
#include "apps/train/run_files.h"
#include <cmath>
#include <functional>

#include "data/token_shard.h"
#include "data/tokenizer/tokenizer.h"
#include "inference/generate.h"
#include "nn/transformer.h"
#include "temp_dir.h"

namespace {

using ember::testing::TempDir;

// A tiny model and corpus in dir; the arguments of a short `ember train` writing to dir/OUT.
std::string tiny_train(const TempDir& dir, const std::string& out = "run") {
  return ember::testing::tiny_train_args(dir, out) + " --lr 0.01 --log-every 1000";
}

std::string latest_name(const std::string& run) {
  std::ifstream f(fs::path(run) / "latest");
  std::string name;
  f >> name;
  return name;
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TEST_CASE("ember train refuses an invalid option at start with one line naming it", "[cli][train]") {
  TempDir dir("cli_options");
  const std::string base = tiny_train(dir) + " --steps 3";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--schedule cosin", "--schedule must be one of cosine, constant, linear, wsd"},
      {"--val-fraction 2", "--val-fraction must be in [0, 1)"},
      {"--lr -1", "--lr must be > 0"},
      {"--lr 0", "--lr must be > 0"},
      {"--min-lr 0.5", "--min-lr must be at most --lr"},
      {"--min-lr -1", "--min-lr must be >= 0"},
      {"--beta1 1", "--beta1 must be in [0, 1)"},
      {"--beta2 -0.5", "--beta2 must be in [0, 1)"},
      {"--clip -1", "--clip must be >= 0"},
      {"--weight-decay -0.1", "--weight-decay must be >= 0"},
      {"--warmup -1", "--warmup must be >= 0"},
      {"--keep -1", "--keep must be >= 0"},
      {"--keep-every -2", "--keep-every must be >= 0"},
      {"--save-every -5", "--save-every must be >= 0"},
      {"--eval-every -1", "--eval-every must be >= 0"},
      {"--eval-batches -1", "--eval-batches must be >= 0"},
      {"--log-every -1", "--log-every must be >= 0"},
      {"--batch-size 0", "--batch-size must be > 0"},
      {"--steps 0", "--steps must be > 0"},
      {"--seq-len 0", "--seq-len must be > 0"},
      {"--grad-accum 0", "--grad-accum must be > 0"},
      {"--dtype fp16", "--dtype must be one of float32, bf16"},
      {"--zero 4", "--zero must be in [0, 3]"},
      {"--bucket-mb 0", "--bucket-mb must be > 0"},
      {"--vocab-size 100", "--vocab-size must be 0"},
      {"--vocab-size 258", "--vocab-size must be 0 (no tokenizer training) or at least 259 (the 256 byte tokens, "
                           "<|endoftext|>, <|im_start|> and <|im_end|>)"},
  };
  for (const auto& [option, message] : cases) {
    INFO("ember train ... " << option);
    const Run r = run_ember(base + " " + option);
    CHECK(r.code == 1);
    CHECK(r.err.find("ember: error: " + message) != std::string::npos);
    CHECK(lines(r.err) == 1);
    CHECK_FALSE(fs::exists(dir / "run"));  // nothing written
  }
}

TEST_CASE("a second ember train on the same --out refuses at once", "[cli][train]") {
  TempDir dir("cli_lock");
  const std::string base = tiny_train(dir);
  const std::vector<std::string> args = {EMBER_BINARY, "train", "--config", dir / "tiny.json", "--data",
                                         dir / "corpus.txt", "--out", dir / "run", "--steps", "1000000",
                                         "--batch-size", "2", "--seq-len", "16", "--log-every", "1000000"};
  const pid_t pid = spawn_quiet(args);
  for (int i = 0; i < 6000 && !fs::exists(dir / "run/metrics.jsonl"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // A second run into the same folder (short: without the lock it would finish with 0).
  const Run second = run_ember(base + " --steps 2");
  CHECK(second.code == 1);
  CHECK(second.err.find("--out " + (dir / "run") + ": another ember run (pid " + std::to_string(pid) +
                        ") is using this folder") != std::string::npos);
  CHECK(lines(second.err) == 1);
  kill(pid, SIGINT);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  // Free again once the first run ended: resuming it works.
  const Run resumed = run_ember("train --resume " + (dir / "run") + " --steps " +
                            std::to_string(std::stoll(latest_name(dir / "run").substr(5, 8)) + 1));
  CHECK(resumed.code == 0);
}

TEST_CASE("ember train --resume restores every option of the run and notes the ones a flag overrides", "[cli][train]") {
  TempDir dir("cli_resume");
  const Run first = run_ember(tiny_train(dir) + " --steps 4 --save-every 1 --keep 2 --eval-every 2 --keep-every 0"
                          " --sample-tokens 3 --check-every 7 --bucket-mb 3");
  REQUIRE(first.code == 0);
  CHECK(ember::apps::list_checkpoints(dir / "run") == std::vector<std::string>{"step_00000004.h5", "step_00000003.h5"});
  const ember::nn::Checkpoint c = ember::nn::read_checkpoint(dir / "run/step_00000004.h5", false);
  const nlohmann::json options = nlohmann::json::parse(*c.train_state).at("options");
  for (const char* key : {"save_every", "keep", "keep_every", "eval_every", "eval_batches", "log_every", "zero",
                          "bucket_mb", "check_every", "vocab_size", "sample_tokens", "sample_prompt", "dtype",
                          "lr", "batch_size", "seq_len", "seed", "data", "schedule"}) {
    INFO(key);
    CHECK(options.contains(key));
  }
  CHECK(options.at("bucket_mb") == 3);
  // ember train ends with OUT/loss.svg; a resumed run (no --out) writes it into the run's folder.
  REQUIRE(fs::exists(dir / "run/loss.svg"));
  fs::remove(dir / "run/loss.svg");
  // --save-every 1 and --keep 2 come back; --lr and --steps are overridden, with a note each.
  const Run resumed = run_ember("train --resume " + (dir / "run") + " --steps 6 --lr 0.005");
  REQUIRE(resumed.code == 0);
  CHECK(resumed.out.find("--resume: --lr 0.005 overrides the run's 0.01\n") != std::string::npos);
  CHECK(resumed.out.find("--resume: --steps 6 overrides the run's 4\n") != std::string::npos);
  CHECK(resumed.out.find("--resume: --save-every") == std::string::npos);  // not given: restored silently
  CHECK(ember::apps::list_checkpoints(dir / "run") == std::vector<std::string>{"step_00000006.h5", "step_00000005.h5"});
  CHECK(fs::exists(dir / "run/loss.svg"));
}

TEST_CASE("ember train --resume refuses another data order, other data, or a corpus changed since the run started", "[cli][train]") {
  TempDir dir("cli_resume_data");
  REQUIRE(run_ember(tiny_train(dir) + " --steps 2").code == 0);
  const std::string resume = "train --resume " + (dir / "run") + " --steps 3";
  Run r = run_ember(resume + " --seed 7");
  CHECK(r.code == 1);
  CHECK(r.err.find("--resume: --seed 7 differs from the run's 1337") != std::string::npos);
  CHECK(lines(r.err) == 1);
  r = run_ember(resume + " --seq-len 8");
  CHECK(r.code == 1);
  CHECK(r.err.find("--seq-len 8 differs from the run's 16") != std::string::npos);
  dir.write("other.txt", "some other text, long enough for a window or two of sixteen tokens.\n");
  r = run_ember(resume + " --data " + (dir / "other.txt"));
  CHECK(r.code == 1);
  CHECK(r.err.find("--data " + (dir / "other.txt") + " differs from the run's") != std::string::npos);
  CHECK(r.err.find("--allow-data-change") != std::string::npos);
  // The corpus file itself changed (one more line).
  std::ofstream(dir / "corpus.txt", std::ios::app) << "one more line of text\n";
  r = run_ember(resume);
  CHECK(r.code == 1);
  CHECK(r.err.find("the training data changed since the run started (" + (dir / "corpus.txt")) != std::string::npos);
  CHECK(lines(r.err) == 1);
  CHECK(latest_name(dir / "run") == "step_00000002.h5");
  r = run_ember(resume + " --allow-data-change");
  CHECK(r.code == 0);
  CHECK(r.out.find("--resume: training on changed data") != std::string::npos);
  CHECK(latest_name(dir / "run") == "step_00000003.h5");
}

TEST_CASE("ember train --resume finds relative --data from any folder, the same file by another name is no data "
          "change, a run that stored it relative resumes from its folder", "[cli][train]") {
  TempDir dir("cli_resume_cwd");
  tiny_train(dir);  // writes tiny.json and corpus.txt
  const std::string in_dir = "cd " + dir.path.string() + ";";
  const ember::testing::TempDir logs("cli_resume_cwd_logs");
  Run r = ember::testing::run_cli(logs,
                                  "train --config tiny.json --data corpus.txt --out run --batch-size 2 --seq-len 16 "
                                  "--warmup 1 --lr 0.01 --log-every 1000 --eval-batches 1 --steps 2",
                                  in_dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json options =
      nlohmann::json::parse(*ember::nn::read_checkpoint(dir / "run/step_00000002.h5", false).train_state)
          .at("options");
  CHECK(options.at("data") == dir / "corpus.txt");
  r = ember::testing::run_cli(logs, "train --resume " + (dir / "run") + " --steps 3", "cd /;");
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(latest_name(dir / "run") == "step_00000003.h5");
  r = ember::testing::run_cli(logs, "train --resume run --steps 4 --data ./corpus.txt", in_dir);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("--resume: --data") == std::string::npos);
  CHECK(latest_name(dir / "run") == "step_00000004.h5");
  // A run from before: options and fingerprint name the file as given, relative.
  const std::string path = dir / "run/step_00000004.h5";
  ember::nn::Checkpoint old = ember::nn::read_checkpoint(path, true);
  nlohmann::json state = nlohmann::json::parse(*old.train_state);
  REQUIRE(state.at("data_fingerprint").at(0).at("file") == dir / "corpus.txt");
  state["options"]["data"] = "corpus.txt";
  state["data_fingerprint"][0]["file"] = "corpus.txt";
  old.train_state = state.dump();
  fs::remove(path);
  ember::nn::write_checkpoint(path, old);
  r = ember::testing::run_cli(logs, "train --resume run --steps 5", in_dir);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("changed data") == std::string::npos);
  CHECK(latest_name(dir / "run") == "step_00000005.h5");
}

TEST_CASE("a diverging run exits 1 and latest never points at non-finite weights", "[cli][train]") {
  TempDir dir("cli_diverge");
  REQUIRE(run_ember(tiny_train(dir) + " --steps 2").code == 0);
  // The last step's update (lr 1e300) makes the weights infinite: validation at the end sees it.
  Run r = run_ember("train --resume " + (dir / "run") + " --steps 3 --lr 1e300 --min-lr 0 --clip 0");
  CHECK(r.code == 1);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("step 3: non-finite validation loss") != std::string::npos);
  CHECK(latest_name(dir / "run") == "step_00000002.h5");
  CHECK_FALSE(fs::exists(dir / "run/step_00000003.h5"));
  const ember::nn::Checkpoint c = ember::nn::read_checkpoint(dir / "run/step_00000002.h5", false);
  ember::nn::Transformer model(c.config, 1);
  model.load_state_dict(c.model);
  CHECK(ember::apps::first_non_finite_parameter(model.named_parameters()) == "");
  // No validation data: the parameters are checked before the checkpoint is written.
  r = run_ember(tiny_train(dir, "no_val") + " --steps 1 --warmup 0 --val-fraction 0 --lr 1e300 --min-lr 0 --clip 0");
  CHECK(r.code == 1);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("is not finite (the run diverged); no checkpoint written") != std::string::npos);
  CHECK(ember::apps::list_checkpoints(dir / "no_val").empty());
  CHECK_FALSE(fs::exists(dir / "no_val/latest"));
}

TEST_CASE("ember train piped into head trains to its end and checkpoints", "[cli][train]") {
  TempDir dir("cli_pipe");
  const std::string cmd = "bash -c '" + std::string(EMBER_BINARY) + " " + tiny_train(dir) +
                          " --steps 40 --log-every 1 2> " + (dir / "err") + " | head -1 > /dev/null; echo ${PIPESTATUS[0]} > " +
                          (dir / "rc") + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  CHECK(read_text(dir / "rc") == "0\n");
  CHECK(latest_name(dir / "run") == "step_00000040.h5");
  CHECK(fs::exists(dir / "run/step_00000040.h5"));
  CHECK(read_text(dir / "err").find("stdout is closed") != std::string::npos);
}

// --- huge and malformed model configs (docs/model.md#checks) -------------------------------

namespace {

// A config file in a fresh temporary folder, removed with it.
struct ConfigFile {
  fs::path dir = fs::temp_directory_path() / ("ember_cli_cfg_" + std::to_string(getpid()));
  fs::path path = dir / "model.json";
  explicit ConfigFile(const std::string& text) {
    fs::create_directories(dir);
    std::ofstream(path) << text;
  }
  ~ConfigFile() { fs::remove_all(dir); }
};

bool one_error_line(const Run& r) {
  return r.code == 1 && r.err.starts_with("ember: error: ") &&
         std::count(r.err.begin(), r.err.end(), '\n') == 1 &&
         r.err.find("json.exception") == std::string::npos;
}

}  // namespace

TEST_CASE("ember info and train refuse sizes beyond a key's bound in one line", "[cli]") {
  for (const auto& [text, key] : std::vector<std::pair<std::string, std::string>>{
           {R"({"d_model": 4611686018427387904})", "d_model"},  // 2^62
           {R"({"n_layers": 1000000000})", "n_layers"},
           {R"({"vocab_size": 1099511627776})", "vocab_size"}}) {
    const ConfigFile cfg(text);
    for (const std::string& cmd : {"info --config " + cfg.path.string(),
                                   "train --steps 1 --out " + (cfg.dir / "run").string() +
                                       " --config " + cfg.path.string()}) {
      INFO(cmd << ": " << text);
      const Run r = run_ember(cmd);
      CHECK(one_error_line(r));
      CHECK(r.err.find(cfg.path.string() + ": key \"" + key + "\" must be between 1 and") !=
            std::string::npos);
      CHECK(r.out.empty());
    }
    CHECK_FALSE(fs::exists(cfg.dir / "run"));
  }
}

TEST_CASE("a model larger than this machine: exact numbers in info, refused by train", "[cli]") {
  // d_model 8192 x 200 layers: 161,905,516,544 parameters, 603 GiB of float32 weights.
  const ConfigFile cfg(R"({"d_model": 8192, "n_layers": 200, "n_heads": 64})");
  const Run info = run_ember("info --config " + cfg.path.string());
  CHECK(info.code == 0);
  CHECK(info.out.find("parameters            161.91G (161905516544)\n") != std::string::npos);
  CHECK(info.out.find("training memory       2806.08G bytes at B = 8, T = 256") != std::string::npos);
  CHECK(info.out.find("inference memory      647.62G bytes") != std::string::npos);
  CHECK(info.out.find("too little to run this model (needs 603 GiB) or train it (needs 2.55 TiB)") !=
        std::string::npos);
  // train stops before it prepares data or allocates a layer (the --out folder is never made).
  const Run train = run_ember("train --steps 1 --out " + (cfg.dir / "run").string() + " --config " +
                          cfg.path.string());
  CHECK(one_error_line(train));
  CHECK(train.err.find("the model needs 2.55 TiB for training at B = 8, T = 256 (weights 603 GiB") !=
        std::string::npos);
  CHECK(train.err.find("but this machine has ") != std::string::npos);
  CHECK_FALSE(fs::exists(cfg.dir / "run"));
}

TEST_CASE("a config file that is not JSON or has a wrong type is one line naming file and key", "[cli]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"d_model = 256", ": invalid JSON: line 1, column 1: "},
      {R"({"d_model": "256"})", ": key \"d_model\" must be an integer, got \"256\""},
      {R"({"qk_norm": "yes"})", ": key \"qk_norm\" must be true or false, got \"yes\""},
      {R"({"moe": {"top_k": 1.5}})", ": moe: key \"top_k\" must be an integer, got 1.5"},
      {R"({"d_modle": 256})", ": unknown key \"d_modle\""},
      {R"([256])", ": a model config must be a JSON object, got array"},
  };
  for (const auto& [text, expected] : cases) {
    INFO(text);
    const ConfigFile cfg(text);
    const Run r = run_ember("info --config " + cfg.path.string());
    CHECK(one_error_line(r));
    CHECK(r.err.find(cfg.path.string() + expected) != std::string::npos);
  }
}

TEST_CASE("ember info prints the shipped presets' figures of the README", "[cli]") {
  // README.md "Presets and what they cost" (batch 8 at each preset's full context).
  const Run dense = run_ember("info --preset dense-small");
  CHECK(dense.code == 0);
  CHECK(dense.out.starts_with("parameters            3.08M ("));
  CHECK(dense.out.find("FLOPs per token       21.63M") != std::string::npos);
  CHECK(dense.out.find("KV cache per token    2048 bytes") != std::string::npos);
  CHECK(dense.out.find("training memory       183.54M bytes at B = 8, T = 256") != std::string::npos);
  CHECK(dense.out.find("enough to train and run this model") != std::string::npos);
  const Run gpt2 = run_ember("info --preset gpt2-small");
  CHECK(gpt2.out.starts_with("parameters            124.44M ("));
  CHECK(gpt2.out.find("training memory       10.12G bytes at B = 8, T = 1024") != std::string::npos);
}

// ---------------------------------------------------------------------------
// Evaluation, --grads-out, shard tokenizers, checkpoint tensors, messages (docs/cli.md).
namespace eval_cli {
namespace {
using ember::testing::TempDir;

const char* kTinyConfig = R"({"vocab_size": VOCAB, "d_model": 16, "n_layers": 1, "n_heads": 2,
  "ffn_hidden": 32, "max_seq_len": 32})";

std::string tiny_config(int vocab) {
  std::string s = kTinyConfig;
  s.replace(s.find("VOCAB"), 5, std::to_string(vocab));
  return s;
}

// A corpus of fortune-like documents separated by "%" lines.
void write_corpus(const TempDir& dir, const std::string& name) {
  std::ofstream f(dir.path / name);
  for (int i = 0; i < 120; ++i) {
    f << "fortune " << i << ": the quick brown fox jumps over the lazy dog, " << (i * 7) % 13 << " times.\n";
    if (i % 4 == 3) f << "%\n";
  }
}

// The number after `key` in a line of text ("val_loss":5.56 or "loss 5.56").
double number_after(const std::string& text, const std::string& key) {
  const size_t at = text.rfind(key);
  REQUIRE(at != std::string::npos);
  return std::stod(text.substr(at + key.size()));
}

// No raw library text in a message.
void check_plain_message(const std::string& err) {
  CHECK(err.starts_with("ember: error: "));
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  for (const char* raw : {"std::", "bad_alloc", "basic_string", "[json.exception", "filesystem error"})
    CHECK(err.find(raw) == std::string::npos);
}

// A checkpoint of the tiny model (vocab 257, every weight zero: logits 0, CE = ln 257 per token).
ember::nn::Checkpoint zero_checkpoint(const std::string& config_json) {
  ember::nn::Checkpoint c;
  c.config = ember::nn::ModelConfig::from_json(config_json, "test config");
  for (const auto& [name, t] : ember::nn::Transformer(c.config, 0).state_dict())
    c.model[name] = ember::Tensor::zeros(t.shape());
  return c;
}

}  // namespace

TEST_CASE("ember eval and ember train's validation give the same loss and bits per byte", "[cli][eval]") {
  TempDir dir("cli_eval_same");
  write_corpus(dir, "corpus.txt");
  dir.write("tiny.json", tiny_config(256));
  const Run t = run_ember("train --config " + dir / "tiny.json" + " --data " + dir / "corpus.txt" + " --out " +
                      dir / "run" + " --vocab-size 300 --steps 3 --batch-size 2 --seq-len 16 --eval-batches 2 "
                      "--val-fraction 0.3 --log-every 100");
  REQUIRE(t.code == 0);
  // The last metrics line holds the end-of-run validation: 2 batches of 2 x 16 of OUT/data/val.
  const std::string metrics = read_text(dir.path / "run" / "metrics.jsonl");
  const double val_loss = number_after(metrics, "\"val_loss\":"), val_bpb = number_after(metrics, "\"val_bpb\":");
  const Run e = run_ember("eval --checkpoint " + dir / "run/step_00000003.h5" + " --data " + dir / "run/data/val" +
                      " --batch-size 2 --seq-len 16 --batches 2");
  REQUIRE(e.code == 0);
  INFO(e.out);
  CHECK(std::abs(number_after(e.out, "loss ") - val_loss) < 1e-6);
  REQUIRE(e.out.find(" bits per byte") != std::string::npos);  // the checkpoint stores the BPE tokenizer
  CHECK(std::abs(number_after(e.out, "tokens; ") - val_bpb) < 1e-6);
  CHECK(t.out.find("bits/byte") != std::string::npos);
}

TEST_CASE("bits per byte: CE in nats over the targets / (ln 2 x their text's bytes), <|endoftext|> has none",
          "[cli][eval]") {
  TempDir dir("cli_eval_bpb");
  ember::nn::write_checkpoint(dir / "zero.h5", zero_checkpoint(tiny_config(257)));
  // T = 4, B = 1, 2 batches: targets 'b' EOT 'c' 0xC3 | 0xA9 EOT 'd' 'e' = 8 tokens, 6 bytes of text.
  const std::vector<uint32_t> tokens = {'a', 'b', 256, 'c', 0xC3, 0xA9, 256, 'd', 'e'};
  ember::data::write_shard(dir / "tokens.bin", tokens, 257);
  const Run r = run_ember("eval --checkpoint " + dir / "zero.h5" + " --data " + dir / "tokens.bin" +
                      " --batch-size 1 --seq-len 4 --batches 2");
  REQUIRE(r.code == 0);
  INFO(r.out);
  const double ce = std::log(257.0);  // uniform logits
  CHECK(std::abs(number_after(r.out, "loss ") - ce) < 1e-5);
  CHECK(r.out.find("(8 tokens, 6 bytes)") != std::string::npos);
  CHECK(std::abs(number_after(r.out, "tokens; ") - 8 * ce / (std::log(2.0) * 6)) < 1e-5);
  // Without a tokenizer (vocab 300, none stored) the figure is bits per token.
  ember::nn::write_checkpoint(dir / "zero300.h5", zero_checkpoint(tiny_config(300)));
  const Run p = run_ember("eval --checkpoint " + dir / "zero300.h5" + " --data " + dir / "tokens.bin" +
                      " --batch-size 1 --seq-len 4 --batches 2");
  REQUIRE(p.code == 0);
  CHECK(p.out.find("bits per token") != std::string::npos);
  CHECK(std::abs(number_after(p.out, "tokens; ") - std::log2(300.0)) < 1e-5);
}

TEST_CASE("eval --grads-out never overwrites a file and leaves no temporary", "[cli][eval]") {
  TempDir dir("cli_grads_out");
  ember::nn::write_checkpoint(dir / "zero.h5", zero_checkpoint(tiny_config(257)));
  const std::vector<uint32_t> tokens = {'a', 'b', 256, 'c', 0xC3, 0xA9, 256, 'd', 'e'};
  ember::data::write_shard(dir / "tokens.bin", tokens, 257);
  const std::string args = "eval --checkpoint " + dir / "zero.h5" + " --data " + dir / "tokens.bin" +
                           " --batch-size 1 --seq-len 4 --grads-out ";
  const std::string before = read_text(dir.path / "zero.h5");
  const Run r = run_ember(args + dir / "zero.h5");  // the checkpoint itself
  CHECK(r.code == 1);
  check_plain_message(r.err);
  CHECK(r.err.find("--grads-out") != std::string::npos);
  CHECK(read_text(dir.path / "zero.h5") == before);
  const Run ok = run_ember(args + dir / "grads.h5");
  CHECK(ok.code == 0);
  CHECK(fs::exists(dir.path / "grads.h5"));
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++files;
  CHECK(files == 3);  // zero.h5, tokens.bin, grads.h5: no temporary left
  CHECK(run_ember(args + dir / "grads.h5").code == 1);
}

TEST_CASE("train on BPE shards stores the shards' tokenizer, without one it asks for --tokenizer", "[cli][tokenizer]") {
  TempDir dir("cli_shard_tok");
  write_corpus(dir, "corpus.txt");
  dir.write("v300.json", tiny_config(300));
  REQUIRE(run_ember("tokenize --train --encode --vocab-size 300 --separator % " + dir / "corpus.txt" + " --tokenizer " +
                dir / "tok.json" + " --out " + dir / "shards" + " --val-fraction 0.2")
              .code == 0);
  REQUIRE(fs::exists(dir.path / "shards" / "tokenizer.json"));  // written beside the shards
  const std::string train = "train --config " + dir / "v300.json" + " --data " + dir / "shards/train" +
                            " --val-data " + dir / "shards/val" + " --steps 2 --batch-size 2 --seq-len 16 "
                            "--eval-batches 1 --log-every 100 --out ";
  REQUIRE(run_ember(train + dir / "run").code == 0);
  // The folder tokenize wrote, given whole: refused with the path to give, not read as text.
  const Run whole = run_ember("train --config " + dir / "v300.json" + " --data " + dir / "shards" +
                              " --steps 2 --batch-size 2 --seq-len 16 --out " + dir / "run_whole");
  CHECK(whole.code == 1);
  check_plain_message(whole.err);
  CHECK(whole.err.find("--data " + (dir.path / "shards" / "train").string()) != std::string::npos);
  CHECK(!fs::exists(dir.path / "run_whole"));  // the refused run takes back the folder it made
  // A folder that was there before keeps what it holds (and its new lock file).
  fs::create_directories(dir.path / "kept");
  std::ofstream(dir.path / "kept" / "notes.txt") << "mine\n";
  const Run into_kept = run_ember("train --config " + dir / "v300.json" + " --data " + dir / "shards" +
                                  " --steps 2 --batch-size 2 --seq-len 16 --out " + dir / "kept");
  CHECK(into_kept.code == 1);
  CHECK(fs::exists(dir.path / "kept" / "notes.txt"));
  const ember::nn::Checkpoint c = ember::nn::read_checkpoint(dir / "run/step_00000002.h5", false);
  CHECK(ember::data::Tokenizer::from_json(c.tokenizer_json).vocab_size() == 300);
  CHECK(run_ember("generate --checkpoint " + dir / "run/step_00000002.h5" + " --max-tokens 40 --seed 3").code == 0);
  CHECK(run_ember("eval --checkpoint " + dir / "run/step_00000002.h5" + " --data " + dir / "shards/val" +
              " --batch-size 1 --seq-len 16 --batches 1")
            .out.find("bits per byte") != std::string::npos);
  // The shards alone (their ids exceed the byte tokenizer): a clear refusal naming --tokenizer.
  fs::rename(dir.path / "shards" / "tokenizer.json", dir.path / "elsewhere.json");
  const Run refused = run_ember(train + dir / "run2");
  CHECK(refused.code == 1);
  check_plain_message(refused.err);
  CHECK(refused.err.find("--tokenizer") != std::string::npos);
  // ... and --tokenizer FILE makes it work.
  CHECK(run_ember(train + dir / "run3 --tokenizer " + dir / "elsewhere.json").code == 0);
}

TEST_CASE("export and eval refuse a checkpoint whose tensors do not match its config", "[cli][export]") {
  TempDir dir("cli_bad_tensors");
  const std::string cfg = tiny_config(257);
  std::vector<std::pair<std::string, std::function<void(ember::nn::Checkpoint&)>>> variants = {
      {"model.norm.weight", [](auto& c) { c.model.erase("model.norm.weight"); }},
      {"model.extra.weight", [](auto& c) { c.model["model.extra.weight"] = ember::Tensor::zeros({2, 2}); }},
      {"model.embed_tokens.weight", [](auto& c) { c.model["model.embed_tokens.weight"] = ember::Tensor::zeros({257, 8}); }},
      {"model.norm.weight", [](auto& c) { c.model["model.norm.weight"] = ember::Tensor::zeros({16, 1}); }},
      {"model.norm.weight", [](auto& c) { c.model["model.norm.weight"] = ember::Tensor::zeros({}); }},
      {"lm_head.weight", [](auto& c) { c.model["lm_head.weight"] = ember::Tensor::zeros({257, 16}); }},
      {"model.layers.0.mlp.up_proj.weight",
       [](auto& c) { c.model["model.layers.0.mlp.up_proj.weight"].template data<float>()[5] = NAN; }},
      {"model.layers.0.self_attn.q_proj.weight", [](auto& c) {
         c.model.erase("model.layers.0.self_attn.q_proj.weight");
         c.model["model.layers.0.self_attn.q_proj.weights"] = ember::Tensor::zeros({16, 16});
       }},
  };
  const std::vector<uint32_t> tokens = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'};
  ember::data::write_shard(dir / "tokens.bin", tokens, 257);
  int i = 0;
  for (auto& [tensor, breakit] : variants) {
    ember::nn::Checkpoint c = zero_checkpoint(cfg);
    breakit(c);
    const std::string path = dir / ("bad" + std::to_string(i++) + ".h5");
    ember::nn::write_checkpoint(path, c);
    INFO(path << " " << tensor);
    const Run r = run_ember("export --checkpoint " + path + " --out " + dir / "hf");
    CHECK(r.code == 1);
    check_plain_message(r.err);
    CHECK(r.err.find(tensor) != std::string::npos);
    CHECK(r.err.find(path) != std::string::npos);
    CHECK(!fs::exists(dir.path / "hf"));
    const Run e = run_ember("eval --checkpoint " + path + " --data " + dir / "tokens.bin" + " --batch-size 1 --seq-len 4");
    CHECK(e.code == 1);
    CHECK(e.err.find(tensor) != std::string::npos);
  }
  const Run shape = run_ember("export --checkpoint " + dir / "bad2.h5" + " --out " + dir / "hf");
  CHECK(shape.err.find("[257, 8], expected [257, 16]") != std::string::npos);
  ember::nn::write_checkpoint(dir / "good.h5", zero_checkpoint(cfg));
  CHECK(run_ember("export --checkpoint " + dir / "good.h5" + " --out " + dir / "hf").code == 0);
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
}  // namespace eval_cli

// ---------------------------------------------------------------------------
// Runs and resume as a hostile user tries them: each fails with one clear line or resumes exactly.
namespace hostile_runs {
namespace {
using ember::testing::TempDir;
}  // namespace

TEST_CASE("a killed BPE run's temporaries in data/, data/train/ and data/val/ go at the next start", "[cli][train]") {
  TempDir dir("cli_bpe_tmp");
  const std::string run = dir / "run";
  REQUIRE(run_ember(tiny_train(dir) + " --steps 1 --vocab-size 300").code == 0);
  REQUIRE(fs::exists(dir.path / "run/data/train/train_000000.bin"));  // BPE shards live one level down
  fs::create_directories(dir.path / "run/data/val");
  // What a process killed while encoding leaves: shard temporaries and the tokenizer's (tokenizer.json.tmp<pid>).
  const std::vector<std::string> stale = {"data/train/train_000001.bin.tmp", "data/val/val_000000.bin.tmp",
                                          "data/tokenizer.json.tmp4242"};
  for (const std::string& f : stale) std::ofstream(dir.path / "run" / f) << "partial";
  std::ofstream(dir.path / "run/data/train/notes.txt") << "the user's";  // not ember's: stays
  const Run r = run_ember("train --resume " + run + " --steps 2");
  CHECK(r.code == 0);
  for (const std::string& f : stale) {
    INFO(f);
    CHECK_FALSE(fs::exists(dir.path / "run" / f));
  }
  CHECK(fs::exists(dir.path / "run/data/train/notes.txt"));
  CHECK(fs::exists(dir.path / "run/data/train/train_000000.bin"));
  CHECK(latest_name(run) == "step_00000002.h5");
}

TEST_CASE("train --resume of a checkpoint whose /train state is not ember's JSON: one line naming it", "[cli][train]") {
  TempDir dir("cli_bad_state");
  const std::string run = dir / "run";
  REQUIRE(run_ember(tiny_train(dir) + " --steps 1").code == 0);
  const std::string path = run + "/step_00000001.h5";
  const ember::nn::Checkpoint good = ember::nn::read_checkpoint(path, true);
  // Written with a valid digest (as another tool would): only the state's text is wrong.
  nlohmann::json wrong_step = nlohmann::json::parse(*good.train_state);
  wrong_step["step"] = "one";
  for (const std::string& state : {std::string("{\"options\": {\"lr\": 0.01"), std::string("{}"),
                                   std::string("[1, 2]"), wrong_step.dump()}) {
    INFO(state);
    ember::nn::Checkpoint c = good;
    c.train_state = state;
    fs::remove(path);
    ember::nn::write_checkpoint(path, c);
    const Run r = run_ember("train --resume " + run + " --steps 2");
    CHECK(r.code == 1);
    CHECK(lines(r.err) == 1);
    INFO(r.err);
    CHECK(r.err.starts_with("ember: error: " + path + ": the training state (/train) is not ember's: "));
    CHECK(r.err.find("json.exception") == std::string::npos);
    CHECK(latest_name(run) == "step_00000001.h5");
  }
}

TEST_CASE("train --resume of a folder another run is using prints its one error line and nothing else", "[cli][train]") {
  TempDir dir("cli_resume_busy");
  REQUIRE(run_ember(tiny_train(dir) + " --steps 2").code == 0);
  // --save-every 50: the first run saves (and so holds the lock) within a fraction of a second.
  const std::vector<std::string> args = {EMBER_BINARY, "train", "--resume", dir / "run", "--steps", "1000000",
                                         "--log-every", "1000000", "--save-every", "50"};
  const pid_t pid = spawn_quiet(args);
  for (int i = 0; i < 6000 && latest_name(dir / "run") == "step_00000002.h5"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // until the first run saves (it holds the lock)
  }
  REQUIRE(latest_name(dir / "run") != "step_00000002.h5");
  // Flags that would each print a note ("--steps 9 overrides the run's ...", the global batch).
  const Run second = run_ember("train --resume " + (dir / "run") + " --steps 2000000 --batch-size 4");
  kill(pid, SIGINT);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(second.code == 1);
  CHECK(second.err.find("another ember run (pid " + std::to_string(pid) + ") is using this folder") !=
        std::string::npos);
  CHECK(lines(second.err) == 1);
  CHECK(second.out.empty());
}

TEST_CASE("train --resume of a run already at --steps ends with latest on its checkpoint and no nan", "[cli][train]") {
  TempDir dir("cli_resume_done");
  const std::string run = dir / "run";
  REQUIRE(run_ember(tiny_train(dir) + " --steps 3 --save-every 1").code == 0);
  // kill -9 between writing step 3 and moving `latest` to it leaves `latest` one behind.
  std::ofstream(dir.path / "run/latest") << "step_00000002.h5\n";
  const Run r = run_ember("train --resume " + run + " --steps 3");
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("nan") == std::string::npos);
  CHECK(r.out.find("done: 3 steps, 96 tokens in ") != std::string::npos);
  CHECK(latest_name(run) == "step_00000003.h5");
  CHECK(ember::nn::read_checkpoint(run + "/step_00000003.h5", true).train_step == 3);
}

TEST_CASE("a new run refuses an --out that holds another run's checkpoints, and changes nothing there", "[cli][train]") {
  TempDir dir("cli_other_run");
  const std::string run = dir / "run";
  REQUIRE(run_ember(tiny_train(dir) + " --steps 4 --save-every 1").code == 0);
  const std::string metrics = read_text(dir / "run/metrics.jsonl");
  const auto step2 = fs::last_write_time(dir / "run/step_00000002.h5");
  // A fresh run would have overwritten steps 1-2 and left 3-4, newer, for --resume to mix in.
  Run r = run_ember(tiny_train(dir) + " --steps 2 --seed 9");
  CHECK(r.code == 1);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("ember: error: --out " + run + " already holds another run's checkpoints (newest "
                   "step_00000004.h5); continue that run with --resume " + run) != std::string::npos);
  CHECK(r.out.empty());
  // A --resume writing into another run's folder, likewise.
  REQUIRE(run_ember(tiny_train(dir, "other") + " --steps 1").code == 0);
  r = run_ember("train --resume " + (dir / "other") + " --steps 3 --out " + run);
  CHECK(r.code == 1);
  CHECK(r.err.find("already holds another run's checkpoints") != std::string::npos);
  CHECK(r.out.empty());
  CHECK(read_text(dir / "run/metrics.jsonl") == metrics);
  CHECK(fs::last_write_time(dir / "run/step_00000002.h5") == step2);
  CHECK(latest_name(run) == "step_00000004.h5");
  // Its own folder: --resume goes on.
  CHECK(run_ember("train --resume " + run + " --steps 5 --out " + run).code == 0);
}

TEST_CASE("a refused new run with --vocab-size leaves the other run's tokenizer and shards as they were",
          "[cli][train]") {
  TempDir dir("cli_other_run_bpe");
  REQUIRE(run_ember(tiny_train(dir) + " --steps 1 --vocab-size 300").code == 0);
  const std::string tokenizer = read_text(dir / "run/data/tokenizer.json");
  const std::string shard = read_text(dir / "run/data/train/train_000000.bin");
  REQUIRE(!tokenizer.empty());
  REQUIRE(!shard.empty());
  // Another vocabulary: had it trained and prepared its data before looking at the folder,
  // it would have replaced both files of the run that owns the folder.
  const Run r = run_ember(tiny_train(dir) + " --steps 1 --vocab-size 280");
  CHECK(r.code == 1);
  CHECK(r.err.find("already holds another run's checkpoints") != std::string::npos);
  CHECK(read_text(dir / "run/data/tokenizer.json") == tokenizer);
  CHECK(read_text(dir / "run/data/train/train_000000.bin") == shard);
}

}  // namespace hostile_runs

// ---------------------------------------------------------------------------
// Hostile input files and options outside training: one line, exit 1 (2 for
// a value that does not parse), no file destroyed.
#include <hdf5.h>

#include <cstring>

#include "core/io/file_digest.h"

namespace eval_cli {
namespace {

// Replaces the dataset `name` of a sealed ember HDF5 file by one of `type` and
// `dims` (rank -1: a 0-d scalar) holding `data` (nullptr: none written), then
// seals the file again: a valid digest over wrong content.
void replace_dataset(const std::string& file, const std::string& name, hid_t type, int rank,
                     const std::vector<hsize_t>& dims, const void* data) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(f >= 0);
  REQUIRE(H5Ldelete(f, name.c_str(), H5P_DEFAULT) >= 0);
  const hid_t space = rank < 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims.data(), nullptr);
  const hid_t ds = H5Dcreate2(f, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(ds >= 0);
  if (data) REQUIRE(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
  H5Dclose(ds);
  H5Sclose(space);
  H5Fclose(f);
  ember::seal_file_digest(file);
}

}  // namespace

TEST_CASE("eval, generate and export refuse checkpoint tensors of a wrong kind or a huge declared shape",
          "[cli][hostile]") {
  TempDir dir("cli_hostile_tensors");
  const std::vector<uint32_t> tokens = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'};
  ember::data::write_shard(dir / "tokens.bin", tokens, 257);
  const std::string norm = "/model/model.norm.weight";
  const std::vector<int32_t> ints(16, 1);
  const std::vector<int8_t> bytes(16, 1);
  const float one = 1;
  const std::vector<std::function<void(const std::string&)>> variants = {
      [&](const std::string& f) { replace_dataset(f, norm, H5T_NATIVE_INT32, 1, {16}, ints.data()); },
      [&](const std::string& f) { replace_dataset(f, norm, H5T_NATIVE_INT8, 1, {16}, bytes.data()); },
      [&](const std::string& f) { replace_dataset(f, norm, H5T_NATIVE_FLOAT, -1, {}, &one); },
      // 4 TiB declared, nothing stored: refused before it is allocated.
      [&](const std::string& f) { replace_dataset(f, norm, H5T_NATIVE_FLOAT, 1, {hsize_t{1} << 40}, nullptr); },
      // 2^64 + 2^31 elements: the count overflows 64 bits.
      [&](const std::string& f) {
        replace_dataset(f, norm, H5T_NATIVE_FLOAT, 2, {(hsize_t{1} << 33) + 1, hsize_t{1} << 31}, nullptr);
      },
  };
  for (size_t i = 0; i < variants.size(); ++i) {
    const std::string path = dir / ("bad" + std::to_string(i) + ".h5");
    ember::nn::write_checkpoint(path, zero_checkpoint(tiny_config(257)));
    variants[i](path);
    for (const std::string& args :
         {"eval --checkpoint " + path + " --data " + dir / "tokens.bin" + " --batch-size 1 --seq-len 4",
          "generate --checkpoint " + path + " --max-tokens 2", "export --checkpoint " + path + " --out " + dir / "hf"}) {
      INFO(args);
      const Run r = run_ember(args);
      CHECK(r.code == 1);
      check_plain_message(r.err);
      CHECK(r.err.find(path) != std::string::npos);
      CHECK(r.err.find("model.norm.weight") != std::string::npos);
      CHECK(r.err.find("out of memory") == std::string::npos);
      CHECK(!fs::exists(dir.path / "hf"));
    }
  }
}

TEST_CASE("a checkpoint whose stored tokenizer does not parse is one line naming the checkpoint", "[cli][hostile]") {
  TempDir dir("cli_hostile_stored_tok");
  ember::nn::Checkpoint c = zero_checkpoint(tiny_config(257));
  c.tokenizer_json = R"({"model": 3})";
  ember::nn::write_checkpoint(dir / "c.h5", c);
  for (const std::string& args : {"generate --checkpoint " + dir / "c.h5" + " --max-tokens 2",
                                  "export --checkpoint " + dir / "c.h5" + " --out " + dir / "hf"}) {
    INFO(args);
    const Run r = run_ember(args);
    CHECK(r.code == 1);
    check_plain_message(r.err);
    CHECK(r.err.starts_with("ember: error: " + dir / "c.h5" + ": the stored tokenizer"));  // was: "tokenizer.json: ..."
  }
}

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

TEST_CASE("generate --tokenizer with more tokens than the model names the option", "[cli][hostile]") {
  TempDir dir("cli_hostile_gen_tok");
  ember::nn::write_checkpoint(dir / "zero.h5", zero_checkpoint(tiny_config(257)));
  dir.write("tok.json", ember::data::Tokenizer::bytes({"<|endoftext|>", "<|pad|>", "<|x|>"}).to_json());
  const Run r = run_ember("generate --checkpoint " + dir / "zero.h5" + " --tokenizer " + dir / "tok.json" +
                          " --max-tokens 2");
  CHECK(r.code == 1);
  check_plain_message(r.err);
  CHECK(r.err.find("--tokenizer " + dir / "tok.json" + ": 259 tokens") != std::string::npos);
}

TEST_CASE("import never overwrites a file and refuses non-finite weights", "[cli][hostile]") {
  TempDir dir("cli_hostile_import");
  ember::nn::write_checkpoint(dir / "zero.h5", zero_checkpoint(tiny_config(257)));
  REQUIRE(run_ember("export --checkpoint " + dir / "zero.h5" + " --out " + dir / "hf").code == 0);
  dir.write("precious.h5", "a checkpoint of another run");
  const Run over = run_ember("import --from " + dir / "hf" + " --out " + dir / "precious.h5");
  CHECK(over.code == 1);
  check_plain_message(over.err);
  CHECK(over.err.find("--out " + dir / "precious.h5") != std::string::npos);
  CHECK(read_text(dir.path / "precious.h5") == "a checkpoint of another run");
  // A NaN in model.safetensors (its first tensor's first float, right after the header).
  const std::string st = dir / "hf/model.safetensors";
  std::string bytes = read_text(st);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  const float nan = NAN;
  std::memcpy(bytes.data() + 8 + header, &nan, 4);
  std::ofstream(st, std::ios::binary | std::ios::trunc) << bytes;
  const Run r = run_ember("import --from " + dir / "hf" + " --out " + dir / "nan.h5");
  CHECK(r.code == 1);
  check_plain_message(r.err);
  CHECK(r.err.find("non-finite") != std::string::npos);
  CHECK(!fs::exists(dir.path / "nan.h5"));
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

TEST_CASE("bench refuses options that crashed its child process", "[cli][hostile]") {
  TempDir dir("cli_hostile_bench");
  dir.write("tiny.json", tiny_config(256));
  const std::string bench = "bench --config " + dir / "tiny.json" + " --batch-size 1 --seq-len 4 --steps 1 --warmup 0 ";
  for (const auto& [option, name] : std::vector<std::pair<std::string, std::string>>{
           {"--threads 100000", "--threads"},                     // was: segfault in the child
           {"--threads -1", "--threads"},                         // was: accepted
           {"--warmup 9223372036854775807", "--warmup"},          // was: segfault (no timed step)
           {"--batch-size 9223372036854775807", "--batch-size"},  // was: segfault; now the memory it needs
           {"--batch-size -1", "--batch-size"},                   // was: accepted as the default
           {"--seq-len -1", "--seq-len"}}) {
    INFO(option);
    const Run r = run_ember(bench + option);
    CHECK(r.code == 1);
    check_plain_message(r.err);
    CHECK(r.err.find(name) != std::string::npos);
  }
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

}  // namespace eval_cli

// --- ember generate --chat (docs/cli.md#chat-generation): ChatML prompt, only the reply printed,
// stops at <|im_end|>. The model's hidden state is constant (every embedding
// row is ones, every block weight zero, the final norm's weight ones), so its
// logits are lm_head.weight · ones: the row set to ones (id `favoured`) is the
// greedy token at every step.
namespace chat_cli {
namespace {
using ember::testing::TempDir;

// `vocab` rows over the 259-token byte tokenizer (its specials chat tokens or not); row
// `favoured` of lm_head is ones (logit 16), the others zero.
ember::nn::Checkpoint chat_checkpoint(int64_t favoured, bool chat_tokens, int64_t vocab = 259) {
  ember::nn::Checkpoint c = eval_cli::zero_checkpoint(
      R"({"vocab_size": )" + std::to_string(vocab) + R"(, "d_model": 16, "n_layers": 1, "n_heads": 2,
          "ffn_hidden": 32, "max_seq_len": 64, "tie_embeddings": false})");
  c.model["model.embed_tokens.weight"] = ember::Tensor::ones(c.model.at("model.embed_tokens.weight").shape());
  c.model["model.norm.weight"] = ember::Tensor::ones(c.model.at("model.norm.weight").shape());
  float* head = c.model.at("lm_head.weight").data<float>();
  for (int64_t j = 0; j < 16; ++j) head[favoured * 16 + j] = 1.0f;
  const std::vector<std::string> specials = chat_tokens
                                                ? std::vector<std::string>{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
                                                : std::vector<std::string>{"<|endoftext|>", "<|pad|>", "<|x|>"};
  c.tokenizer_json = ember::data::Tokenizer::bytes(specials).to_json();
  return c;
}

}  // namespace

TEST_CASE("generate --chat prints only the reply and stops at <|im_end|>", "[cli][generate]") {
  TempDir dir("cli_generate_chat");
  ember::nn::write_checkpoint(dir / "x.h5", chat_checkpoint('x', true));
  ember::nn::write_checkpoint(dir / "end.h5", chat_checkpoint(258, true));
  const std::string opts = " --temperature 0 --max-tokens 5 --prompt hi";
  Run r = run_ember("generate --chat --checkpoint " + dir / "x.h5" + opts + " --system 'be brief'");
  CHECK(r.code == 0);
  CHECK(r.out == "xxxxx\n");  // no rendered prompt, no <|im_start|>
  CHECK(r.err.find("maximum number of new tokens") != std::string::npos);
  r = run_ember("generate --chat --checkpoint " + dir / "end.h5" + opts);
  CHECK(r.code == 0);
  CHECK(r.out == "\n");  // the first token is <|im_end|>: an empty reply
  CHECK(r.err.find("reached the <|im_end|> token") != std::string::npos);
  r = run_ember("generate --checkpoint " + dir / "x.h5" + opts);  // without --chat: the prompt, then the text
  CHECK(r.code == 0);
  CHECK(r.out == "hixxxxx\n");
  r = run_ember("generate --checkpoint " + dir / "x.h5" + opts + " --kv-cache-dtype bfloat16");
  CHECK(r.code == 0);
  CHECK(r.out == "hixxxxx\n");
  r = run_ember("generate --checkpoint " + dir / "x.h5" + opts + " --kv-cache-dtype float16");
  CHECK(r.code != 0);
  CHECK(r.out.empty());
  CHECK(r.err.find("--kv-cache-dtype: float16 not in {float32,bfloat16}") != std::string::npos);
}

TEST_CASE("generate refuses a prompt longer than max_seq_len before printing any of it", "[cli][generate]") {
  TempDir dir("cli_generate_long_prompt");
  ember::nn::write_checkpoint(dir / "x.h5", chat_checkpoint('x', true));  // max_seq_len 64
  const Run r = run_ember("generate --checkpoint " + dir / "x.h5" + " --max-tokens 2 --prompt " +
                          std::string(100, 'a'));  // 100 byte tokens
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "ember: error: generate: the prompt has 100 tokens, more than the model's max_seq_len of 64; "
                 "shorten it\n");
}

TEST_CASE("generate refuses a sampling option out of range before printing the prompt", "[cli][generate]") {
  TempDir dir("cli_generate_bad_sampling");
  ember::nn::write_checkpoint(dir / "x.h5", chat_checkpoint('x', true));
  const std::string base = "generate --checkpoint " + dir / "x.h5" + " --max-tokens 2 --prompt hi ";
  const std::pair<const char*, const char*> cases[] = {
      {"--temperature -1", "temperature must be >= 0"},
      {"--temperature nan", "temperature must be >= 0"},
      {"--top-p 2", "top_p must be in (0, 1]"},
      {"--top-k -3", "top_k must be >= 0"},
      {"--repetition-penalty 0", "repetition_penalty must be > 0"},
      {"--num-samples 0", "--num-samples must be positive, got 0"}};
  for (const auto& [option, message] : cases) {
    const Run r = run_ember(base + option);
    INFO(option << ": " << r.err);
    CHECK(r.code == 1);
    CHECK(r.out.empty());  // "hi" was echoed before the check
    eval_cli::check_plain_message(r.err);
    CHECK(r.err.find(message) != std::string::npos);
  }
}

TEST_CASE("generate --prompt-file refuses an endless stream instead of reading it forever", "[cli][generate]") {
  TempDir dir("cli_generate_endless_prompt");
  ember::nn::write_checkpoint(dir / "x.h5", chat_checkpoint('x', true));
  const Run r = run_ember("generate --checkpoint " + dir / "x.h5" + " --max-tokens 2 --prompt-file /dev/zero");
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "ember: error: /dev/zero: the prompt file is larger than 64 MiB, more than such a file holds "
                 "(an endless stream or device?)\n");
}

TEST_CASE("generate draws only ids its tokenizer decodes when the model's vocabulary is larger",
          "[cli][generate]") {
  // 300 rows over the 259-token tokenizer (as a preset's 50257 over a byte tokenizer): row 290, the
  // argmax, has no text; 'y' (logit 16 x 0.5 = 8) is the best id the tokenizer has.
  TempDir dir("cli_generate_padded_vocab");
  ember::nn::Checkpoint c = chat_checkpoint(290, true, 300);
  float* head = c.model.at("lm_head.weight").data<float>();
  for (int64_t j = 0; j < 16; ++j) head['y' * 16 + j] = 0.5f;
  ember::nn::write_checkpoint(dir / "padded.h5", c);
  Run r = run_ember("generate --checkpoint " + dir / "padded.h5" + " --temperature 0 --max-tokens 4 --prompt hi");
  CHECK(r.code == 0);
  CHECK(r.out == "hiyyyy\n");
  r = run_ember("generate --checkpoint " + dir / "padded.h5" + " --temperature 1 --top-k 0 --max-tokens 30 --prompt hi");
  CHECK(r.code == 0);  // sampled over the 259 decodable ids only
}

TEST_CASE("generate --chat refuses a tokenizer without the chat tokens", "[cli][generate]") {
  TempDir dir("cli_generate_chat_plain");
  ember::nn::write_checkpoint(dir / "plain.h5", chat_checkpoint('x', false));
  const Run r = run_ember("generate --chat --checkpoint " + dir / "plain.h5" + " --prompt hi --max-tokens 2");
  CHECK(r.code == 1);
  eval_cli::check_plain_message(r.err);
  CHECK(r.err.find("<|im_start|>") != std::string::npos);
  CHECK(r.out.empty());
  CHECK(run_ember("generate --system hi --checkpoint " + dir / "plain.h5").code == 2);  // --system needs --chat
}


namespace {

// Runs `ember ARGS` with `input` as its stdin.
Run run_with_input(const TempDir& dir, const std::string& args, const std::string& input) {
  dir.write("stdin.txt", input);
  const std::string cmd = std::string(EMBER_BINARY) + " " + args + " > " + dir / "out" + " 2> " + dir / "err" +
                          " < " + dir / "stdin.txt";
  const int status = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(dir.path / "out");
  r.err = read_text(dir.path / "err");
  return r;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

// The hand-made checkpoint (byte tokenizer, specials 256-258, context 64) always
// draws 'x'. Rendered lengths: a user message "hi" is 10 tokens (<|im_start|>
// "user\nhi" <|im_end|> "\n"), a reply "xxx" 16, "--system s" 11, the
// generation header <|im_start|> "assistant\n" 11.
TEST_CASE("ember chat answers each line, keeping the conversation", "[cli][chat]") {
  TempDir dir("cli_chat");
  ember::nn::write_checkpoint(dir / "x.h5", chat_checkpoint('x', true));
  const std::string chat = "chat --checkpoint " + dir / "x.h5" + " --temperature 0 --max-tokens 3";
  Run r = run_with_input(dir, chat + " --system s", "hi\nhi\n");
  CHECK(r.code == 0);
  CHECK(r.out == "xxx\nxxx\n");
  CHECK(count(r.err, "maximum number of new tokens") == 2);
  CHECK(count(r.err, "prompt 32 tokens") == 1);  // 11 + 10 + 11
  CHECK(count(r.err, "prompt 58 tokens") == 1);  // 11 + 10 + 16 + 10 + 11: the first turn is kept
  // /exit ends the conversation; /reset starts a new one.
  r = run_with_input(dir, chat, "hi\n/reset\nhi\n/exit\nhi\n");
  CHECK(r.code == 0);
  CHECK(r.out == "xxx\nxxx\n");
  CHECK(count(r.err, "prompt 21 tokens") == 2);
  CHECK(count(r.err, "[conversation cleared]") == 1);
  // An empty reply: the first token drawn is <|im_end|>.
  ember::nn::write_checkpoint(dir / "end.h5", chat_checkpoint(258, true));
  r = run_with_input(dir, "chat --checkpoint " + dir / "end.h5" + " --temperature 0", "hi\n");
  CHECK(r.code == 0);
  CHECK(r.out == "\n");
  CHECK(r.err.find("reached the <|im_end|> token") != std::string::npos);
}

TEST_CASE("ember chat drops the oldest turns when the context is full, saying so once", "[cli][chat]") {
  TempDir dir("cli_chat_full");
  ember::nn::write_checkpoint(dir / "x.h5", chat_checkpoint('x', true));
  // Turn 3 would need 10 + 16 + 10 + 16 + 21 + 3 (reply room) > 64: turn 1 goes, the prompt is 47 tokens.
  const Run r = run_with_input(dir, "chat --checkpoint " + dir / "x.h5" + " --temperature 0 --max-tokens 3",
                               "hi\nhi\nhi\nhi\n");
  CHECK(r.code == 0);
  CHECK(r.out == "xxx\nxxx\nxxx\nxxx\n");
  CHECK(count(r.err, "prompt 21 tokens") == 1);
  CHECK(count(r.err, "prompt 47 tokens") == 3);
  CHECK(count(r.err, "dropping the oldest turns") == 1);
  // A message too long even alone (1 + 65 + 1 + 1 + 11 tokens) is not sent; the conversation stays.
  const Run big = run_with_input(dir, "chat --checkpoint " + dir / "x.h5" + " --temperature 0 --max-tokens 3",
                                 "hi\n" + std::string(60, 'a') + "\nhi\n");
  CHECK(big.code == 0);
  CHECK(big.out == "xxx\nxxx\n");
  CHECK(count(big.err, "needs 79 tokens; the model's context holds 64: not sent") == 1);  // no --system: not named
  CHECK(count(big.err, "prompt 47 tokens") == 1);
}

TEST_CASE("ember chat on a trained checkpoint: its tokenizer reserves the chat tokens", "[cli][chat]") {
  TempDir dir("cli_chat_trained");
  REQUIRE(run_ember(tiny_train(dir) + " --steps 2 --vocab-size 300").code == 0);
  const std::string ckpt = dir / ("run/" + latest_name(dir / "run"));
  const ember::data::Tokenizer tok =
      ember::data::Tokenizer::from_json(ember::nn::read_checkpoint(ckpt, false).tokenizer_json);
  CHECK(tok.vocab_size() == 300);
  CHECK(tok.missing_chat_tokens() == 0);
  const std::string sampling = " --temperature 0 --max-tokens 4";
  const Run r = run_with_input(dir, "chat --checkpoint " + ckpt + sampling, "the fox\nand the dog?\n");
  CHECK(r.code == 0);
  CHECK(count(r.err, "decode") == 2);  // one line per reply
  // The first reply is what `generate --chat` answers to the same message.
  const Run one = run_ember("generate --chat --checkpoint " + ckpt + sampling + " --prompt 'the fox'");
  REQUIRE(one.code == 0);
  CHECK(r.out.starts_with(one.out));
  CHECK(r.out.size() > one.out.size());
}

TEST_CASE("ember chat refuses a tokenizer without the chat tokens in one line naming --add-chat-tokens",
          "[cli][chat]") {
  TempDir dir("cli_chat_plain");
  ember::nn::write_checkpoint(dir / "plain.h5", chat_checkpoint('x', false));
  for (const std::string& cmd : {"chat --checkpoint " + dir / "plain.h5",
                                 "generate --chat --prompt hi --checkpoint " + dir / "plain.h5"}) {
    const Run r = run_with_input(dir, cmd, "hi\n");
    CHECK(r.code == 1);
    eval_cli::check_plain_message(r.err);
    CHECK(r.err.find("plain.h5: its tokenizer has no <|im_start|> or <|im_end|> special token") != std::string::npos);
    CHECK(r.err.find("--add-chat-tokens") != std::string::npos);
    CHECK(r.out.empty());
  }
}

}  // namespace chat_cli
