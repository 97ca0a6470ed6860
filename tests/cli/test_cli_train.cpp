// `ember train` as a program (docs/cli.md#safety-of-ember-train-runs): Ctrl-C (a checkpoint,
// then 130), option validation, the run folder's lock, resume with the run's options, data
// fingerprints and a changed corpus, divergence, a closed stdout, BPE shards and their
// tokenizer, and --out folders that hold another run. Tiny runs on a text corpus written here.
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
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/train/finite_parameters.h"
#include "apps/train/run_files.h"
#include "cli_run.h"
#include "cli_testing.h"
#include "data/tokenizer/tokenizer.h"
#include "nn/checkpoint_file.h"
#include "nn/transformer.h"

extern char** environ;

namespace fs = std::filesystem;

namespace {

using Run = ember::testing::CliRun;
using ember::testing::check_plain_message;
using ember::testing::latest_name;
using ember::testing::read_text;
using ember::testing::run_ember;
using ember::testing::TempDir;
using ember::testing::tiny_config;
using ember::testing::tiny_train;
using ember::testing::write_corpus;

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

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

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

// ---------------------------------------------------------------------------
// BPE shards, and runs and resume as a hostile user tries them: each fails with one clear
// line or resumes exactly.

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
