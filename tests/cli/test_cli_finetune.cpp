// The `ember finetune` program (docs/cli.md): a run writes what `ember train` writes (progress,
// metrics.jsonl, loss.svg, checkpoints, latest, --keep) and its checkpoint generates;
// SIGTERM stops it with a checkpoint that --resume continues (from any folder; with --base when
// the base moved); each bad input is one "ember: error:" line with a non-zero exit and nothing
// written in --out.
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/io/sha256.h"
#include "data/token_shard.h"
#include "finetune_testing.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using ember::testing::read_text;
using ember::testing::TempDir;

namespace {

struct Run {
  int code = -1;  // the exit code
  std::string out, err;
};

// Runs `bash -c SCRIPT` where SCRIPT may use $EMBER, and collects its exit code and output.
Run run_script(const TempDir& dir, const std::string& script) {
  const std::string cmd = "EMBER=" + std::string(EMBER_BINARY) + " bash -c '" + script + "' > " +
                          (dir / "stdout") + " 2> " + (dir / "stderr") + " < /dev/null";
  const int status = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(dir / "stdout");
  r.err = read_text(dir / "stderr");
  return r;
}

Run finetune(const TempDir& dir, const std::string& args) {
  return run_script(dir, "exec $EMBER finetune " + args);
}

// A base and chat data in dir; the options of a small run into out.
std::string chat_args(const TempDir& dir, const std::string& out) {
  if (!fs::exists(dir / "base.h5")) ember::testing::write_chat_base(dir / "base.h5");
  if (!fs::exists(dir / "chat.jsonl")) ember::testing::write_chat_data(dir / "chat.jsonl");
  return "--base " + (dir / "base.h5") + " --data " + (dir / "chat.jsonl") + " --out " +
         (dir / out) + " --full --batch-size 2 --seq-len 32 --steps 4 --warmup 1 --lr 1e-2";
}

// A LoRA run (the small run without --full) into dir/run, with extra options.
Run lora_finetune(const TempDir& dir, const std::string& extra) {
  std::string args = chat_args(dir, "run");
  args.erase(args.find(" --full"), 7);
  return finetune(dir, args + extra);
}

}  // namespace

TEST_CASE("ember finetune --full writes a run as ember train does, its checkpoint generates",
          "[cli][finetune]") {
  TempDir dir("cli_finetune");
  const Run r = finetune(
      dir, chat_args(dir, "run") + " --save-every 2 --keep 1 --eval-every 2 --val-fraction 0.25");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("ember finetune: ") != std::string::npos);
  CHECK(r.out.find("data: 24 conversations, 6 held out for validation; 13 cut to --seq-len + 1 = "
                   "33 tokens\n") != std::string::npos);
  CHECK(r.out.find("step 0: val loss ") != std::string::npos);
  CHECK(r.out.find("step      4/4 | loss ") != std::string::npos);
  CHECK(r.out.find("peak RSS ") != std::string::npos);
  CHECK(read_text(dir / "run/latest") == "step_00000004.h5\n");
  CHECK(fs::exists(dir / "run/step_00000004.h5"));
  CHECK_FALSE(fs::exists(dir / "run/step_00000002.h5"));  // --keep 1
  CHECK(fs::exists(dir / "run/loss.svg"));
  const std::string metrics = read_text(dir / "run/metrics.jsonl");
  CHECK(std::count(metrics.begin(), metrics.end(), '\n') == 5);  // step 0's validation, steps 1-4
  const Run g =
      run_script(dir, "exec $EMBER generate --checkpoint " + (dir / "run/step_00000004.h5") +
                          " --chat --prompt hi --max-tokens 4 --seed 1");
  INFO(g.err);
  CHECK(g.code == 0);
}

TEST_CASE("SIGTERM stops ember finetune with a checkpoint, --resume continues the run",
          "[cli][finetune]") {
  TempDir dir("cli_finetune");
  const std::string out = dir / "run";
  const Run r = run_script(dir, "$EMBER finetune " + chat_args(dir, "run") +
                                    " --steps 1000000 --log-every 1000000 & pid=$!; "
                                    "while kill -0 $pid && [ ! -s " +
                                    out +
                                    "/metrics.jsonl ]; do sleep 0.05; done; "
                                    "kill -TERM $pid; wait $pid");
  INFO(r.out << r.err);
  CHECK(r.code == 143);
  const std::string stopped_at = "stopped by signal 15 at step ";
  const size_t at = r.out.find(stopped_at);
  REQUIRE(at != std::string::npos);
  // The tiny model takes tens of steps between polls, so the signal lands at any step: resume
  // to a few steps past it.
  const long long stopped = std::stoll(r.out.substr(at + stopped_at.size()));
  const long long steps = stopped + 5;
  char want_latest[32];
  std::snprintf(want_latest, sizeof want_latest, "step_%08lld.h5\n", steps);
  const std::string latest = read_text(out + "/latest");
  REQUIRE(latest.starts_with("step_"));
  const Run resumed = finetune(dir, "--resume " + out + " --steps " + std::to_string(steps) +
                                        " --log-every 1000000");
  INFO(resumed.out << resumed.err);
  CHECK(resumed.code == 0);
  CHECK(resumed.out.find("--resume: --steps " + std::to_string(steps) +
                         " overrides the run's 1000000") != std::string::npos);
  CHECK(read_text(out + "/latest") == want_latest);
}

TEST_CASE("each bad input of ember finetune is one line, a non-zero exit and nothing in --out",
          "[cli][finetune]") {
  TempDir dir("cli_finetune");
  const std::string good = chat_args(dir, "out");
  dir.write("not_json.jsonl", "{\"text\": \"fine\"}\n{not json\n");
  dir.write("role.jsonl", R"({"messages": [{"role": "robot", "content": "beep"}]})"
                          "\n");
  dir.write("empty.jsonl", R"({"messages": []})"
                           "\n");
  // No token to train on: no assistant message, or every answer past the first 33 ids.
  std::string unanswered, late;
  for (int i = 0; i < 8; ++i) {
    unanswered += R"({"messages": [{"role": "user", "content": "q)" + std::to_string(i) + "\"}]}\n";
    late += R"({"messages": [{"role": "user", "content": ")" + std::string(40, 'q') +
            R"("}, {"role": "assistant", "content": "a"}]})" + "\n";
  }
  dir.write("unanswered.jsonl", unanswered);
  dir.write("short_text.jsonl", unanswered + "{\"text\": \"\"}\n{\"text\": \"a\"}\n");  // one byte: no target
  dir.write("late.jsonl", late);
  {
    ember::nn::Checkpoint c = ember::nn::read_checkpoint(dir / "base.h5", false);
    c.tokenizer_json = ember::data::Tokenizer::bytes({"<|endoftext|>"}).to_json();
    ember::nn::write_checkpoint(dir / "no_chat_tokens.h5", c);
  }
  const std::string out = " --out " + (dir / "out");
  const std::string data = " --data " + (dir / "chat.jsonl");
  const struct {
    std::string args, expect;
  } cases[] = {
      {good + " --data " + (dir / "not_json.jsonl"), "not_json.jsonl line 2: not JSON"},
      {good + " --data " + (dir / "role.jsonl"), "robot"},
      {good + " --data " + (dir / "empty.jsonl"), "empty.jsonl line 1: \"messages\" is empty"},
      {"--full" + data + out, "--base is required"},
      {good + " --lora-r 0", "--lora-r must be > 0; got 0"},
      {"--base " + (dir / "base.h5") + data + out + " --lora-targets q,x",
       "--lora-targets: unknown target \"x\" (expected q, k, v, o, gate, up, down, head)"},
      {good + " --quantize nf4", "--quantize nf4 quantizes the frozen base of LoRA"},
      {"--base " + (dir / "base.h5") + data + out + " --lora-r 100000000",
       "--lora-r 100000000 exceeds the base's d_model "},
      {good + " --base " + (dir / "no_chat_tokens.h5"),
       "no_chat_tokens.h5: the tokenizer has no <|im_start|>"},
      {good + " --dtype fp16", "--dtype must be one of float32, bf16; got 'fp16'"},
      {good + " --seq-len 100", "max_seq_len"},
      {good + " --data " + (dir / "unanswered.jsonl"),
       "no tokens to train on in " + (dir / "unanswered.jsonl") +
           ": 8 training lines, 8 conversations without an assistant message (only assistant answers "
           "and {\"text\"} lines are trained)"},
      {good + " --data " + (dir / "short_text.jsonl") + " --val-fraction 0",
       "no tokens to train on in " + (dir / "short_text.jsonl") +
           ": 10 training lines, 8 conversations without an assistant message and 2 {\"text\"} lines "
           "of at most one token"},
      {good + " --data " + (dir / "unanswered.jsonl") + " --val-fraction 0.25",
       "no tokens to train on in " + (dir / "unanswered.jsonl") +
           ": 6 training lines (2 more held out by --val-fraction), 6 conversations without an "
           "assistant message"},
      {good + " --data " + (dir / "late.jsonl"),
       "no tokens to train on in " + (dir / "late.jsonl") +
           ": 8 training lines, every assistant answer begins beyond --seq-len + 1 = 33 tokens "
           "(a larger --seq-len, at most the base's max_seq_len 64, or shorter prompts)"},
  };
  for (const auto& c : cases) {
    const Run r = finetune(dir, c.args);
    INFO(c.args << "\n" << r.out << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.starts_with("ember: error: "));
    CHECK(r.err.find(c.expect) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir / "out"));
  }
}

TEST_CASE(
    "a LoRA fine-tune generates and evaluates through its base, a missing or changed base is "
    "one line naming it",
    "[cli][finetune][lora]") {
  TempDir dir("cli_finetune");
  const Run r = lora_finetune(dir, " --lora-targets q,k,v,o --save-every 2");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("(LoRA r 8 alpha 16 on q,k,v,o, base float32)") != std::string::npos);
  const std::string ckpt = dir / "run/step_00000004.h5";
  const Run g = run_script(dir, "exec $EMBER generate --checkpoint " + ckpt +
                                    " --chat --prompt hi --max-tokens 4 --seed 1");
  INFO(g.err);
  CHECK(g.code == 0);
  std::vector<uint32_t> ids(400);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint32_t>((i * 7) % 256);
  ember::data::write_shard(dir / "eval.bin", ids, 264);
  const Run e =
      run_script(dir, "exec $EMBER eval --checkpoint " + ckpt + " --data " + (dir / "eval.bin") +
                          " --batch-size 2 --seq-len 16 --batches 2");
  INFO(e.out << e.err);
  CHECK(e.code == 0);

  // The base changes: a resume (and any command reading the checkpoint) names it.
  ember::testing::write_chat_base(dir / "base.h5", false, 4);
  const Run changed = finetune(dir, "--resume " + (dir / "run") + " --steps 6");
  INFO(changed.out << changed.err);
  CHECK(changed.code == 1);
  CHECK(changed.err.find("its base " + (dir / "base.h5") + " has changed (sha256 ") !=
        std::string::npos);
  CHECK(std::count(changed.err.begin(), changed.err.end(), '\n') == 1);
  fs::remove(dir / "base.h5");
  const Run missing = run_script(dir, "exec $EMBER generate --checkpoint " + ckpt + " --prompt hi");
  CHECK(missing.code == 1);
  CHECK(missing.err.find("its base " + (dir / "base.h5") + " is missing") != std::string::npos);
  CHECK(read_text(dir / "run/latest") == "step_00000004.h5\n");
  CHECK_FALSE(fs::exists(dir / "run/step_00000006.h5"));
}

TEST_CASE(
    "a LoRA fine-tune exports as a PEFT adapter and merged (hf, ember), the merged checkpoint "
    "chats as the fine-tune does",
    "[cli][finetune][export]") {
  TempDir dir("cli_finetune");
  const Run r = lora_finetune(dir, " --lora-targets q,v,up,head --lora-alpha 32");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const std::string ckpt = dir / "run/step_00000004.h5";
  const Run peft = run_script(dir, "exec $EMBER export --checkpoint " + ckpt + " --out " + (dir / "adapter"));
  INFO(peft.out << peft.err);
  REQUIRE(peft.code == 0);
  CHECK(peft.out.find("PEFT adapter") != std::string::npos);
  CHECK(fs::exists(dir / "adapter/adapter_model.safetensors"));
  CHECK(read_text(dir / "adapter/adapter_config.json").find("\"lm_head\"") != std::string::npos);
  const Run hf = run_script(dir, "exec $EMBER export --checkpoint " + ckpt + " --merge --out " + (dir / "merged_hf"));
  INFO(hf.err);
  CHECK(hf.code == 0);
  CHECK(fs::exists(dir / "merged_hf/model.safetensors"));
  const Run em = run_script(dir, "exec $EMBER export --checkpoint " + ckpt +
                                     " --merge --format ember --out " + (dir / "merged.h5"));
  INFO(em.err);
  REQUIRE(em.code == 0);
  // The merged weights compute the fine-tune's function: the same eval loss (to the printed
  // digits) and the same greedy continuation.
  std::vector<uint32_t> ids(400);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint32_t>((i * 7) % 256);
  ember::data::write_shard(dir / "eval.bin", ids, 264);
  std::vector<std::string> outs;
  for (const std::string& c : {ckpt, dir / "merged.h5"}) {
    const Run e = run_script(dir, "exec $EMBER eval --checkpoint " + c + " --data " + (dir / "eval.bin") +
                                      " --batch-size 2 --seq-len 16 --batches 2");
    const Run g = run_script(dir, "exec $EMBER generate --checkpoint " + c +
                                      " --prompt hello --max-tokens 12 --top-k 1 --seed 1");
    INFO(e.err << g.err);
    REQUIRE(e.code == 0);
    REQUIRE(g.code == 0);
    outs.push_back(e.out.substr(e.out.find("loss")) + "|" + g.out);
  }
  INFO(outs[0] << "\n" << outs[1]);
  CHECK(outs[0].size() > 20);
  CHECK(outs[0] == outs[1]);
  // Refusals: --merge of a plain checkpoint, --format ember without --merge; nothing written.
  const Run plain = run_script(dir, "exec $EMBER export --checkpoint " + (dir / "base.h5") +
                                        " --merge --out " + (dir / "x"));
  CHECK(plain.code == 1);
  CHECK(plain.err.find("not a fine-tune checkpoint") != std::string::npos);
  const Run nomerge = run_script(dir, "exec $EMBER export --checkpoint " + ckpt +
                                          " --format ember --out " + (dir / "x.h5"));
  CHECK(nomerge.code == 1);
  CHECK(nomerge.err.find("--format ember needs --merge") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "x"));
  CHECK_FALSE(fs::exists(dir / "x.h5"));
}

TEST_CASE(
    "ember finetune --resume finds its data from any folder, takes the same file by another name, "
    "and a run that stored a relative --data still resumes from its folder",
    "[cli][finetune][resume]") {
  TempDir dir("cli_finetune");
  chat_args(dir, "unused");  // writes base.h5 and chat.jsonl
  const std::string in_dir = "cd " + dir.path.string() + " && exec $EMBER finetune ";
  const Run first = run_script(dir, in_dir + "--base base.h5 --data chat.jsonl --out run "
                                             "--batch-size 2 --seq-len 32 --steps 2 --warmup 1");
  INFO(first.out << first.err);
  REQUIRE(first.code == 0);
  // The run stores the data's absolute path.
  const ember::nn::Checkpoint c = ember::nn::read_checkpoint(dir / "run/step_00000002.h5", false);
  CHECK(nlohmann::json::parse(*c.train_state).at("options").at("data") == dir / "chat.jsonl");
  // From another working directory.
  const Run elsewhere =
      run_script(dir, "cd / && exec $EMBER finetune --resume " + (dir / "run") + " --steps 3");
  INFO(elsewhere.out << elsewhere.err);
  CHECK(elsewhere.code == 0);
  CHECK(read_text(dir / "run/latest") == "step_00000003.h5\n");
  // The same file named another way: no data change.
  const Run renamed = run_script(dir, in_dir + "--resume run --steps 4 --data ./chat.jsonl");
  INFO(renamed.out << renamed.err);
  CHECK(renamed.code == 0);
  CHECK(renamed.out.find("--resume: --data") == std::string::npos);
  CHECK(read_text(dir / "run/latest") == "step_00000004.h5\n");

  // A run from before: its options and data fingerprint name the file as it was given.
  const std::string path = dir / "run/step_00000004.h5";
  ember::nn::Checkpoint old = ember::nn::read_checkpoint(path, true);
  nlohmann::json state = nlohmann::json::parse(*old.train_state);
  REQUIRE(state.at("data_fingerprint").at(0).at("file") == dir / "chat.jsonl");
  state["options"]["data"] = "chat.jsonl";
  state["data_fingerprint"][0]["file"] = "chat.jsonl";
  old.train_state = state.dump();
  fs::remove(path);
  ember::nn::write_checkpoint(path, old);
  const Run resumed = run_script(dir, in_dir + "--resume run --steps 5");
  INFO(resumed.out << resumed.err);
  CHECK(resumed.code == 0);
  CHECK(resumed.out.find("changed data") == std::string::npos);
  CHECK(read_text(dir / "run/latest") == "step_00000005.h5\n");
}

TEST_CASE(
    "ember finetune --resume: --seq-len suggests --base, and a run that has not saved yet is named "
    "with its pid",
    "[cli][finetune][resume]") {
  TempDir dir("cli_finetune");
  const std::string out = dir / "run";
  // The first run saves only when it stops; meanwhile a --resume names it.
  const Run r = run_script(dir, "$EMBER finetune " + chat_args(dir, "run") +
                                    " --steps 1000000 --log-every 1000000 > /dev/null 2>&1 & pid=$!; "
                                    "while kill -0 $pid && [ ! -s " + out +
                                    "/metrics.jsonl ]; do sleep 0.05; done; echo pid=$pid; "
                                    "$EMBER finetune --resume " + out +
                                    " --steps 2000000; echo code=$?; kill -TERM $pid; wait $pid");
  INFO(r.out << r.err);
  const size_t at = r.out.find("pid=");
  REQUIRE(at != std::string::npos);
  const std::string pid = r.out.substr(at + 4, r.out.find('\n', at) - at - 4);
  CHECK(r.out.find("code=1\n") != std::string::npos);
  CHECK(r.err == "ember: error: --resume: another ember process (pid " + pid + ") is running in " +
                     out + " and has not saved a checkpoint yet; wait for its first checkpoint "
                     "(--save-every) or for it to end\n");
  REQUIRE(read_text(out + "/latest").starts_with("step_"));
  const Run seq = finetune(dir, "--resume " + out + " --seq-len 16");
  CHECK(seq.code == 1);
  CHECK(seq.err.find("--resume: --seq-len 16 differs from the run's 32; it changes which data the "
                     "rest of the run reads (resume without it, or start a new run with --base)") !=
        std::string::npos);
  CHECK(seq.err.find("--init-from") == std::string::npos);
}

TEST_CASE(
    "a LoRA fine-tune whose base moved resumes, generates and exports with --base NEW, checked by "
    "its sha256",
    "[cli][finetune][lora]") {
  TempDir dir("cli_finetune");
  const Run r = lora_finetune(dir, "");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const std::string ckpt = dir / "run/step_00000004.h5";
  const std::string sha = ember::nn::read_checkpoint(ckpt, false).base_sha256;
  fs::create_directories(dir / "moved");
  const std::string moved = dir / "moved/base.h5";
  fs::rename(dir / "base.h5", moved);
  // Without --base: the remedy is named.
  const Run missing = finetune(dir, "--resume " + (dir / "run") + " --steps 5");
  CHECK(missing.code == 1);
  CHECK(missing.err == "ember: error: " + ckpt + ": its base " + (dir / "base.h5") +
                           " is missing; if it moved, give its new path with --base (checked "
                           "against the sha256 the checkpoint records, " + sha + ")\n");
  // Another file as --base: one line naming both hashes.
  ember::testing::write_chat_base(dir / "other.h5", false, 9);
  const Run other =
      finetune(dir, "--resume " + (dir / "run") + " --steps 5 --base " + (dir / "other.h5"));
  CHECK(other.code == 1);
  CHECK(other.err == "ember: error: --base " + (dir / "other.h5") + ": sha256 " +
                         ember::sha256_file(dir / "other.h5") + ", but " + ckpt +
                         " was fine-tuned on a base with sha256 " + sha + " (" +
                         (dir / "base.h5") + ")\n");
  CHECK(read_text(dir / "run/latest") == "step_00000004.h5\n");
  // The moved base: the run goes on and its new checkpoints name the new path.
  const Run resumed = finetune(dir, "--resume " + (dir / "run") + " --steps 5 --base " + moved);
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.code == 0);
  const ember::nn::Checkpoint next = ember::nn::read_checkpoint(dir / "run/step_00000005.h5", false);
  CHECK(next.base == moved);
  CHECK(next.base_sha256 == sha);
  // Commands reading the old checkpoint take --base too.
  const Run g = run_script(dir, "exec $EMBER generate --checkpoint " + ckpt + " --base " + moved +
                                    " --chat --prompt hi --max-tokens 4 --seed 1");
  INFO(g.err);
  CHECK(g.code == 0);
  const Run e = run_script(dir, "exec $EMBER export --checkpoint " + ckpt + " --base " + moved +
                                    " --merge --format ember --out " + (dir / "merged.h5"));
  INFO(e.err);
  CHECK(e.code == 0);
  const Run wrong = run_script(dir, "exec $EMBER generate --checkpoint " + ckpt + " --base " +
                                        (dir / "other.h5") + " --prompt hi --max-tokens 4");
  CHECK(wrong.code == 1);
  CHECK(wrong.err.find("--base " + (dir / "other.h5") + ": sha256 ") != std::string::npos);
  // A --full run reads no base: --base on its resume is refused.
  REQUIRE(finetune(dir, chat_args(dir, "full") + " --steps 2").code == 0);
  const Run full = finetune(dir, "--resume " + (dir / "full") + " --steps 3 --base " + moved);
  CHECK(full.code == 1);
  CHECK(full.err == "ember: error: --base " + moved +
                        " with --resume gives a LoRA run's moved base; " +
                        (dir / "full/step_00000002.h5") +
                        " is a --full fine-tune's checkpoint, which holds every weight and reads "
                        "no base\n");
}
