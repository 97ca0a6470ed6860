// `ember info --world-size N --zero K [--checkpoint-activations | --checkpoint-every K]
// [--bucket-mb M]`: the per-rank table after info's unchanged lines, its figures those of
// nn::rank_memory, and one plain error line for each bad value.
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "cli_run.h"
#include "nn/sizing/memory_plan.h"
#include "nn/presets.h"

using ember::testing::TempDir;
using Run = ember::testing::CliRun;

namespace {

// `ember ARGS` in a folder of its own.
Run run_ember(const std::string& args) {
  const TempDir dir("info_memory");
  return ember::testing::run_cli(dir, args);
}

std::string mib_row(const char* name, int64_t bytes) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "  %-19s %10.1f MiB\n", name, static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

TEST_CASE("ember info prints the per-rank table after its usual lines", "[cli][memory_plan]") {
  const std::string base = "info --preset gpt2-small --batch-size 4 --seq-len 256";
  const Run plain = run_ember(base);
  REQUIRE(plain.code == 0);
  CHECK(plain.out.find("per-rank") == std::string::npos);
  const Run r = run_ember(base + " --world-size 2 --zero 1 --checkpoint-activations");
  REQUIRE(r.code == 0);
  CHECK(r.out.starts_with(plain.out));  // the usual lines, unchanged
  const std::string table = r.out.substr(plain.out.size());
  CHECK(table.starts_with("per-rank peak memory  2 rank(s), --zero 1, B = 4, T = 256 per rank, float32, "
                          "every block recomputed\n"));
  ember::nn::TrainingPlan plan;
  plan.world_size = 2;
  plan.zero = 1;
  plan.batch = 4;
  plan.seq_len = 256;
  plan.checkpoint_every = 1;
  const ember::nn::RankMemory m = ember::nn::rank_memory(ember::nn::preset_config("gpt2-small"), plan);
  const std::string rows = mib_row("parameters", m.parameters) + mib_row("gradients", m.gradients) +
                           mib_row("optimizer state", m.optimizer) + mib_row("activations", m.activations) +
                           mib_row("communication", m.communication) +
                           mib_row("checkpoint save", m.checkpoint_save) + mib_row("runtime", m.runtime) +
                           mib_row("total", m.total());
  CHECK(table.substr(table.find('\n') + 1) == rows);
  // 124,439,808 parameters: 4P = 474.7 MiB.
  CHECK(table.find("  parameters               474.7 MiB\n") != std::string::npos);
}

TEST_CASE("ember info's plan options: the defaults, the stage note, the checkpoint interval", "[cli][memory_plan]") {
  const Run one = run_ember("info --preset dense-small --zero 0");
  REQUIRE(one.code == 0);
  CHECK(one.out.find("per-rank peak memory  1 rank(s), --zero 0, B = 8, T = 256 per rank, float32, no activation "
                     "checkpointing\n") != std::string::npos);
  const Run three = run_ember("info --preset dense-small --world-size 4 --zero 3 --checkpoint-every 2");
  REQUIRE(three.code == 0);
  CHECK(three.out.find("4 rank(s), --zero 3, B = 8, T = 256 per rank, float32, blocks 0, 2, ... recomputed\n") != std::string::npos);
}

TEST_CASE("ember info refuses bad plan values in one line", "[cli][memory_plan]") {
  for (const auto& [args, flag] : {std::pair<std::string, std::string>{"--world-size 0", "--world-size"},
                                   {"--world-size -3", "--world-size"},
                                   {"--world-size 1048577", "--world-size"},
                                   {"--zero 4", "--zero"},
                                   {"--zero -1", "--zero"},
                                   {"--checkpoint-every 0", "--checkpoint-every"},
                                   {"--bucket-mb 0", "--bucket-mb"}}) {
    INFO(args);
    const Run r = run_ember("info --preset dense-small " + args);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err.starts_with("ember: error: " + flag));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}
