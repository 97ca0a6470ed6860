// `ember info --tp T --pp P --world-size N [--micro-batches M] [--pp-layers a,b,...]
// [--pp-schedule 1f1b|gpipe]`: the per-stage table after info's unchanged lines, its figures
// worked out here by hand from the formulas of docs/scaling.md, and one error line (exit 1)
// for a world size, a --tp or a --pp-layers the model cannot take.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_run.h"

using ember::testing::TempDir;
using Run = ember::testing::CliRun;

namespace {

// vocab 1001 (padded to 1002 at T = 2), d 256, 3 blocks, 8 heads of 32, 2 KV heads, SwiGLU 768,
// RMSNorm, RoPE, no biases, tied embeddings.
const char* kConfig = R"({"vocab_size": 1001, "d_model": 256, "n_layers": 3, "n_heads": 8, "n_kv_heads": 2,
  "ffn_hidden": 768, "max_seq_len": 64})";

struct Info {
  TempDir dir{"info_parallel"};
  Run run(const std::string& args) {
    dir.write("model.json", kConfig);
    return ember::testing::run_cli(dir, "info --config " + (dir / "model.json") + " " + args);
  }
};

// "  name" and one right-aligned cell per stage, as info prints them.
std::string row(const char* name, const std::vector<std::string>& cells) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "  %-19s", name);
  std::string line = buf;
  for (const std::string& c : cells) {
    std::snprintf(buf, sizeof buf, " %10s", c.c_str());
    line += buf;
  }
  return line + "\n";
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

TEST_CASE("ember info --tp 2 --pp 2 --world-size 8 prints each stage's memory per rank", "[cli][parallel_plan]") {
  Info info;
  const std::string base = "--batch-size 8 --seq-len 64";
  const Run plain = info.run(base);
  REQUIRE(plain.code == 0);
  const Run r = info.run(base + " --tp 2 --pp 2 --world-size 8");
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  REQUIRE(r.out.starts_with(plain.out));  // the usual lines, unchanged
  const std::string table = r.out.substr(plain.out.size());

  // One tensor rank (T = 2): a block's norms 2 x 256 whole; q 256 x 256 / 2, k and v 64 x 256 / 2,
  // o 256 x 256 / 2; gate, up, down 768 x 256 / 2 each.
  const int64_t block = 2 * 256 + (256 * 256 + 2 * 64 * 256 + 256 * 256) / 2 + 3 * 768 * 256 / 2;
  REQUIRE(block == 377344);
  const int64_t table_rows = (1001 + 1) / 2;  // 1002 / 2 = 501 rows of 256
  // Stage 0: blocks 0-1 and the table; stage 1: block 2, the final norm and the tied table.
  const int64_t p0 = table_rows * 256 + 2 * block, p1 = block + 256 + table_rows * 256;
  REQUIRE(p0 == 882944);
  REQUIRE(p1 == 505856);
  // --zero 0 over D = 8 / (2 x 2) = 2: parameters 4p, gradients 4p, AdamW 8p; communication the
  // flat buffer 4p (all-reduced in place: no MPI temporaries counted).
  const int64_t comm0 = 4 * p0, comm1 = 4 * p1;
  // Activations: B = 8 in M = P = 2 micro-batches of 4 rows of 64: 4 x 4 x 64 bytes per float
  // per token. A block keeps 4 x 256 whole and (q 256 + k, v 2 x 64 + attention output 256 +
  // 3 x 768) / 2 = 1472; stage 1 adds the logits and their gradient, 2 x 1002 / 2. 1F1B holds
  // min(P - s, M) micro-batches: 2 on stage 0, 1 on stage 1.
  const int64_t per_float = 4 * 4 * 64, block_floats = 4 * 256 + (256 + 2 * 64 + 256 + 3 * 768) / 2;
  const int64_t act0 = per_float * (2 * block_floats) * 2, act1 = per_float * (block_floats + 1002) * 1;
  const int64_t runtime = 50 << 20;  // a rank under mpirun
  const int64_t total0 = 4 * p0 + 4 * p0 + 8 * p0 + act0 + comm0 + runtime;
  const int64_t total1 = 4 * p1 + 4 * p1 + 8 * p1 + act1 + comm1 + runtime;
  REQUIRE(total0 == 80311296);
  REQUIRE(total1 == 66127872);

  const std::string want =
      "parallel layout       8 rank(s) = --tp 2 x --pp 2 x 2 data-parallel, --zero 0\n"
      "pipeline              B = 8 per rank in 2 micro-batch(es) of 4 row(s), 1f1b; bubble (P - 1) / (M + P - 1) "
      "= 1 / 3 = 33.3%\n"
      "per-rank peak memory by stage (MiB; sequence length 64, float32, no activation checkpointing)\n" +
      row("", {"stage 0", "stage 1"}) + row("blocks", {"0-1", "2"}) + row("micro-batches held", {"2", "1"}) +
      row("parameter elements", {std::to_string(p0), std::to_string(p1)}) +
      row("parameters", {mib(4 * p0), mib(4 * p1)}) + row("gradients", {mib(4 * p0), mib(4 * p1)}) +
      row("optimizer state", {mib(8 * p0), mib(8 * p1)}) + row("activations", {mib(act0), mib(act1)}) +
      row("communication", {mib(comm0), mib(comm1)}) + row("checkpoint save", {"0.0", "0.0"}) +
      row("runtime", {"50.0", "50.0"}) + row("total", {mib(total0), mib(total1)});
  CHECK(table == want);
  CHECK(table.find("  total                     76.6       63.1\n") != std::string::npos);
}

TEST_CASE("ember info --pp-layers, --micro-batches and gpipe", "[cli][parallel_plan]") {
  Info info;
  const Run r = info.run("--batch-size 8 --pp 3 --pp-layers 1,1,1 --micro-batches 8 --pp-schedule gpipe");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("parallel layout       3 rank(s) = --tp 1 x --pp 3 x 1 data-parallel, --zero 0\n") !=
        std::string::npos);
  CHECK(r.out.find("8 micro-batch(es) of 1 row(s), gpipe; bubble (P - 1) / (M + P - 1) = 2 / 10 = 20.0%\n") !=
        std::string::npos);
  CHECK(r.out.find(row("blocks", {"0", "1", "2"}) + row("micro-batches held", {"8", "8", "8"})) != std::string::npos);
  const Run one_f = info.run("--batch-size 8 --pp 3 --micro-batches 8");
  CHECK(one_f.out.find(row("micro-batches held", {"3", "2", "1"})) != std::string::npos);
}

TEST_CASE("ember info refuses a layout the model or the world size cannot take in one line", "[cli][parallel_plan]") {
  Info info;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--tp 2 --pp 2 --world-size 6", "--world-size 6 is not divisible by --tp 2 x --pp 2 = 4 (N = T x P x D)"},
      {"--tp 4", "--tp 4: n_kv_heads 2 is not divisible by 4"},
      {"--tp 3 --world-size 3", "--tp 3: n_heads 8 is not divisible by 3"},
      {"--pp 2 --pp-layers 1,1", "--pp-layers 1,1 sums to 2 blocks, but the model has n_layers 3"},
      {"--pp 2 --pp-layers 1,x", "--pp-layers must be block counts separated by commas (like 3,3,2), got \"1,x\""},
      {"--pp 2 --batch-size 3", "--batch-size 3 is not divisible by --micro-batches 2"},
      {"--pp 2 --zero 2", "--zero 2 with --tp 1 --pp 2: the tensor and pipeline plan covers --zero 0 and 1"},
      {"--pp 2 --micro-batches 0", "--micro-batches must be >= 1, got 0"},
  };
  for (const auto& [args, message] : cases) {
    INFO(args);
    const Run r = info.run(args);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "ember: error: " + message + "\n");
  }
}
