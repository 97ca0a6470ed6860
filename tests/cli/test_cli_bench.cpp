// `ember bench` given hostile options (a thread count, warmup or batch that crashed its child
// process, negative sizes): one plain line naming the option, exit 1.
#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli_run.h"
#include "cli_testing.h"

namespace {

using Run = ember::testing::CliRun;
using ember::testing::check_plain_message;
using ember::testing::run_ember;
using ember::testing::TempDir;
using ember::testing::tiny_config;

}  // namespace

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
