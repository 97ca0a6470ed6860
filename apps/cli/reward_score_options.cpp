// The options of `ember reward --score` (see reward_score_options.h).
#include "apps/cli/reward_score_options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <string_view>

#include "apps/evaluate/reward_scores.h"
#include "core/error.h"

namespace ember::apps {
namespace {

// The options --score reads; every other one of the subcommand is training's.
constexpr std::array<std::string_view, 5> kScoreOptions = {"--score", "--checkpoint", "--data",
                                                           "--batch-size", "--base"};

std::string given_value(const CLI::App& sub, const char* flag) {
  const CLI::Option* o = sub.get_option(flag);
  return o->count() > 0 ? o->as<std::string>() : std::string();
}

}  // namespace

void add_reward_score_options(CLI::App& sub, RewardScoreFlags& flags) {
  sub.add_flag(
      "--score", flags.score,
      "score --data's lines with the reward checkpoint --checkpoint instead of training: "
      "one JSON line each (pairs: chosen, rejected; {\"prompt\", \"completion\"}: reward)");
  sub.add_option("--checkpoint", flags.checkpoint, "with --score: the reward checkpoint (.h5)")
      ->check(CLI::ExistingFile);
}

void check_reward_score_options(const CLI::App& sub, const RewardScoreFlags& flags,
                                int world_size) {
  if (!flags.score) {
    EMBER_CHECK(flags.checkpoint.empty(),
                "--checkpoint is --score's (scoring with a reward "
                "checkpoint); training starts from --base");
    return;
  }
  for (const CLI::Option* o : sub.get_options()) {
    const std::string name = o->get_name();  // "--flag"
    const bool scoring =
        std::find(kScoreOptions.begin(), kScoreOptions.end(), name) != kScoreOptions.end();
    EMBER_CHECK(
        scoring || o->count() == 0, name,
        " is an option of training; --score takes --checkpoint, --data, --batch-size and --base");
  }
  EMBER_CHECK(!flags.checkpoint.empty(), "--score needs --checkpoint RM (a reward checkpoint)");
  EMBER_CHECK(sub.get_option("--data")->count() > 0,
              "--score needs --data FILE (JSONL pairs, or {\"prompt\", \"completion\"} lines)");
  EMBER_CHECK(world_size == 1, "--score runs in one process (not under mpirun)");
}

int run_reward_score_command(const CLI::App& sub, const RewardScoreFlags& flags) {
  const CLI::Option* batch = sub.get_option("--batch-size");
  const int64_t batch_size = batch->count() > 0 ? batch->as<int64_t>() : 8;
  return run_reward_score(RewardScoreOptions{flags.checkpoint, given_value(sub, "--data"),
                                             given_value(sub, "--base"), batch_size});
}

}  // namespace ember::apps
