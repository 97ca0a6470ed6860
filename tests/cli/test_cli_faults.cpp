// `ember` under file faults (docs/cli.md#exit-codes): corrupt checkpoints give one error
// line and exit 1 from eval and generate; --resume falls back past a corrupt
// checkpoint and removes stale temporaries; a full disk (a small tmpfs, as
// root) and a file-size limit (ulimit -f) end training with one line and
// exit 1, never a crash, leaving earlier checkpoints, `latest` and
// metrics.jsonl intact and no temporary file behind.
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "nn/checkpoint_file.h"
#include "data/tokenizer/tokenizer.h"
#include "cli_run.h"
#include "skip_unless_ci.h"
#include "temp_dir.h"


namespace fs = std::filesystem;
using ember::testing::read_text;
using ember::testing::TempDir;
using Run = ember::testing::CliRun;
using ember::testing::run_cli;

namespace {

// A 1-layer byte-level model and a small text corpus in dir; the train options for them.
std::string tiny_train_args(const TempDir& dir, const std::string& out) {
  std::ofstream(dir.path / "tiny.json")
      << R"({"vocab_size": 256, "d_model": 16, "n_layers": 1, "n_heads": 2, "ffn_hidden": 32, "max_seq_len": 32})";
  {
    std::ofstream corpus(dir.path / "corpus.txt");
    for (int i = 0; i < 200; ++i) corpus << "line " << i << ": the quick brown fox jumps over the lazy dog.\n";
  }
  return "train --config " + (dir / "tiny.json") + " --data " + (dir / "corpus.txt") + " --out " + out +
         " --batch-size 2 --seq-len 16 --log-every 1000000 --eval-batches 1";
}

void flip_byte(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  const char c = static_cast<char>(f.get() ^ 0x04);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(c);
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// Files in `folder` and its data/ subfolder whose name contains ".tmp".
std::vector<std::string> temporaries(const fs::path& folder) {
  std::vector<std::string> found;
  for (const fs::path& d : {folder, folder / "data"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      if (e.path().filename().string().find(".tmp") != std::string::npos) found.push_back(e.path().string());
    }
  }
  return found;
}

// The run's checkpoints all read, `latest` names one of them, metrics.jsonl has whole lines only.
void check_run_intact(const fs::path& run, int64_t min_checkpoints) {
  int64_t checkpoints = 0;
  for (const auto& e : fs::directory_iterator(run)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("step_")) continue;
    ++checkpoints;
    CHECK_NOTHROW(ember::nn::read_checkpoint(e.path().string(), true));
  }
  CHECK(checkpoints >= min_checkpoints);
  std::string latest;
  std::ifstream(run / "latest") >> latest;
  CHECK(fs::exists(run / latest));
  const std::string metrics = read_text((run / "metrics.jsonl").string());
  CHECK((metrics.empty() || metrics.back() == '\n'));
  CHECK(temporaries(run).empty());
}

}  // namespace

TEST_CASE("eval and generate refuse a corrupt checkpoint with one line and exit 1", "[cli][faults]") {
  TempDir dir("cli_corrupt");
  const std::string run = dir / "run";
  REQUIRE(run_cli(dir, tiny_train_args(dir, run) + " --steps 1").code == 0);
  const std::string good = run + "/step_00000001.h5", bad = dir / "bad.h5";
  const std::string shards = run + "/data/train_000000.bin";
  REQUIRE(run_cli(dir, "eval --checkpoint " + good + " --data " + shards + " --batches 1").code == 0);
  // The superblock, the first object header, a tensor's data, the end.
  for (const size_t at : {size_t{520}, size_t{1100}, fs::file_size(good) / 2, fs::file_size(good) - 3}) {
    fs::copy_file(good, bad, fs::copy_options::overwrite_existing);
    flip_byte(bad, at);
    const Run r = run_cli(dir, "eval --checkpoint " + bad + " --data " + shards + " --batches 1");
    CHECK(r.code == 1);
    CHECK(lines(r.err) == 1);
    CHECK(r.err == "ember: error: " + bad + ": checksum mismatch (file corrupt)\n");
    const Run g = run_cli(dir, "generate --checkpoint " + bad + " --max-tokens 2");
    CHECK(g.code == 1);
    CHECK(g.err == "ember: error: " + bad + ": checksum mismatch (file corrupt)\n");
  }
}

TEST_CASE("train --resume falls back past a corrupt checkpoint and removes stale temporaries", "[cli][faults]") {
  TempDir dir("cli_resume");
  const fs::path run = dir.path / "run";
  const std::string args = tiny_train_args(dir, run.string());
  REQUIRE(run_cli(dir, args + " --steps 4 --save-every 2").code == 0);
  flip_byte((run / "step_00000004.h5").string(), 530);  // the superblock: libhdf5 crashed on such files
  for (const char* stale : {".step_00000006.h5.tmp", ".latest.tmp", "data/train_000000.bin.tmp"}) {
    std::ofstream(run / stale) << "partial";
  }
  const Run r = run_cli(dir, "train --resume " + run.string() + " --steps 6 --save-every 2");
  CHECK(r.code == 0);
  CHECK(r.err.find("warning: skipping " + (run / "step_00000004.h5").string() + ": ") != std::string::npos);
  CHECK(r.err.find("checksum mismatch") != std::string::npos);
  CHECK(read_text((run / "latest").string()) == "step_00000006.h5\n");
  check_run_intact(run, 3);
}

TEST_CASE("a full disk ends training with one error line, exit 1 and the earlier checkpoints intact",
          "[cli][faults]") {
  TempDir dir("cli_disk_full");
  const fs::path mnt = dir.path / "small";
  fs::create_directories(mnt);
  if (geteuid() != 0) {
    EMBER_SKIP_UNLESS_CI("mounting a small tmpfs needs root");
  }
  // Sizes that fill up at different points (a checkpoint, `latest`, metrics.jsonl, shards).
  for (const char* size : {"300k", "700k", "1100k"}) {
    const std::string options = std::string("size=") + size;
    if (mount("tmpfs", mnt.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      EMBER_SKIP_UNLESS_CI("cannot mount a tmpfs at " << mnt << " (" << std::strerror(errno) << ")");
    }
    const fs::path run = mnt / "run";
    const Run r = run_cli(dir, tiny_train_args(dir, run.string()) + " --steps 100000 --save-every 1");
    INFO("tmpfs " << size << ": " << r.err);
    CHECK(r.code == 1);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.starts_with("ember: error: "));
    CHECK((r.err.find("No space left on device") != std::string::npos ||
           r.err.find("disk full") != std::string::npos));
    if (fs::exists(run / "latest")) check_run_intact(run, 1);
    CHECK(temporaries(run).empty());
    umount(mnt.c_str());
  }
}

TEST_CASE("a file-size limit ends training with one error line, exit 1 and no temporary", "[cli][faults]") {
  TempDir dir("cli_fsize");
  const fs::path run = dir.path / "run";
  const std::string args = tiny_train_args(dir, run.string());
  REQUIRE(run_cli(dir, args + " --steps 2").code == 0);
  const std::string before = read_text((run / "step_00000002.h5").string());
  // 64 KiB per file: the data shards and metrics.jsonl fit, a checkpoint does not.
  REQUIRE(before.size() > 64 * 1024);
  const Run r = run_cli(dir, "train --resume " + run.string() + " --steps 4", "ulimit -f 64;");
  CHECK(r.code == 1);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.starts_with("ember: error: "));
  CHECK(r.err.find("File too large") != std::string::npos);
  CHECK(read_text((run / "step_00000002.h5").string()) == before);
  CHECK(read_text((run / "latest").string()) == "step_00000002.h5\n");
  CHECK_FALSE(fs::exists(run / "step_00000004.h5"));
  check_run_intact(run, 1);
}

// ---------------------------------------------------------------------------
// The outputs of the other subcommands on a full disk, and the fsyncs of the
// one atomic writer (core/io/atomic_file.h) seen by strace.
namespace {

// Files under `folder` (recursively), as paths relative to it.
std::vector<std::string> files_under(const fs::path& folder) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(folder, ec)) {
    if (e.is_regular_file()) found.push_back(fs::relative(e.path(), folder).string());
  }
  return found;
}

}  // namespace

TEST_CASE("a full disk under tokenize, export, import, plot, eval --grads-out and bench --json: one line, "
          "exit 1, no partial file",
          "[cli][faults]") {
  TempDir dir("cli_outputs_full");
  if (geteuid() != 0) {
    EMBER_SKIP_UNLESS_CI("mounting a small tmpfs needs root");
  }
  const std::string run = dir / "run";
  REQUIRE(run_cli(dir, tiny_train_args(dir, run) + " --steps 1").code == 0);
  const std::string ckpt = run + "/step_00000001.h5";
  REQUIRE(run_cli(dir, "export --checkpoint " + ckpt + " --out " + dir / "hf").code == 0);
  dir.write("eot.json", ember::data::Tokenizer::bytes({"<|endoftext|>"}).to_json());
  const fs::path mnt = dir.path / "full";
  fs::create_directories(mnt);
  const std::string m = mnt.string();
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"tokenize --encode " + dir / "corpus.txt" + " --tokenizer " + dir / "eot.json" + " --out " + m + "/sh",
       "sh/"},
      {"export --checkpoint " + ckpt + " --out " + m + "/hf", "hf/"},
      {"import --from " + dir / "hf" + " --out " + m + "/imported.h5", "imported.h5"},
      {"plot " + run + " --out " + m + "/plot.svg", "plot.svg"},
      {"eval --checkpoint " + ckpt + " --data " + run + "/data/val_000000.bin --batch-size 1 --seq-len 8 --batches 1 "
       "--grads-out " + m + "/grads.h5",
       "grads.h5"},
      {"bench --config " + dir / "tiny.json" + " --batch-size 1 --seq-len 8 --steps 1 --warmup 0 --json " + m +
           "/bench.json",
       "bench.json"},
  };
  // Free space left: none, and a few KiB (each output then fails part-way).
  for (const int free_kib : {0, 4}) {
    REQUIRE(mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=1m") == 0);
    {
      std::ofstream filler(mnt / "filler", std::ios::binary);
      const std::string block(4096, 'x');
      for (int i = 0; i < 256 && filler; ++i) filler << block;
    }
    fs::resize_file(mnt / "filler", fs::file_size(mnt / "filler") - free_kib * 1024);
    for (const auto& [args, output] : commands) {
      INFO(args << " with " << free_kib << " KiB free");
      const Run r = run_cli(dir, args);
      CHECK(r.code == 1);
      CHECK(r.err.ends_with("No space left on device\n"));
      // One error line (tokenize reports its progress on stderr before it).
      CHECK(r.err.find("ember: error: ") == r.err.rfind('\n', r.err.size() - 2) + 1);
      CHECK(r.err.find("ember: error: ", 1) == std::string::npos);
      for (const std::string& f : files_under(mnt)) {
        INFO(f);
        CHECK(f.find(".tmp") == std::string::npos);  // no temporary left
        // Nothing under a final name, except shards and files that were complete.
        if (f != "filler" && !f.ends_with(".bin")) CHECK_FALSE(f.starts_with(output));
      }
    }
    umount(mnt.c_str());
  }
}

TEST_CASE("plot, bench --json, train --profile and eval --grads-out fsync the file, rename, then fsync the folder",
          "[cli][faults]") {
  TempDir dir("cli_fsync");
  if (std::system("strace -V > /dev/null 2>&1") != 0) {
    EMBER_SKIP_UNLESS_CI("no strace");
  }
  const std::string run = dir / "run";
  REQUIRE(run_cli(dir, tiny_train_args(dir, run) + " --steps 1").code == 0);
  const std::string ckpt = run + "/step_00000001.h5";
  // strace -y prints each descriptor's path: fsync(5</tmp/.../out>).
  const std::string strace = "strace -f -y -o " + dir / "trace" + " -e trace=fsync,rename,renameat,renameat2 ";
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"plot " + run + " --out " + dir / "plot.svg", dir / "plot.svg"},
      {"bench --config " + dir / "tiny.json" + " --batch-size 1 --seq-len 8 --steps 1 --warmup 0 --json " +
           dir / "bench.json",
       dir / "bench.json"},
      {"eval --checkpoint " + ckpt + " --data " + run + "/data/val_000000.bin --batch-size 1 --seq-len 8 --batches 1 "
       "--grads-out " + dir / "grads.h5",
       dir / "grads.h5"},
      {tiny_train_args(dir, dir / "prof") + " --steps 2 --profile", dir / "prof/profile.json"},
  };
  for (const auto& [args, target] : commands) {
    INFO(args);
    REQUIRE(std::system((strace + EMBER_BINARY + " " + args + " > /dev/null 2>&1").c_str()) == 0);
    const std::string trace = read_text(dir / "trace");
    const std::string folder = fs::path(target).parent_path().string();
    // The last rename to the target; before it an fsync of a temporary beside it, after it one of the folder.
    const size_t renamed = trace.rfind("\"" + target + "\"");
    REQUIRE(renamed != std::string::npos);
    const size_t line = trace.rfind('\n', renamed);
    CHECK(trace.find("rename", line) < renamed);
    CHECK(trace.rfind("fsync(", renamed) != std::string::npos);
    CHECK(trace.find("fsync(", renamed) != std::string::npos);
    CHECK(trace.find("<" + folder + ">) = 0", renamed) != std::string::npos);
  }
}
