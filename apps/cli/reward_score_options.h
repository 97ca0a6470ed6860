// `ember reward --score --checkpoint RM --data FILE [--batch-size N] [--base BASE]`
// (docs/cli.md#scoring-with-a-reward-model) on the `reward` subcommand that trains reward
// models: its own options --score and --checkpoint, beside the training options --data,
// --batch-size (with --score: sides per forward) and --base (with --score: the new path of a LoRA
// reward checkpoint's base that moved) it shares; any other option with --score, or --checkpoint
// without it, is one line. The scoring is apps/evaluate/reward_scores.h.
#pragma once
#include <string>

namespace CLI {
class App;
}

namespace ember::apps {

struct RewardScoreFlags {
  bool score = false;
  std::string checkpoint;
};
// Registers --score and --checkpoint on `sub`.
void add_reward_score_options(CLI::App& sub, RewardScoreFlags& flags);
// After parsing: the options given fit the mode (scoring or training); --score runs in one
// process (world_size 1).
void check_reward_score_options(const CLI::App& sub, const RewardScoreFlags& flags, int world_size);
// ember reward --score: run_reward_score with --checkpoint, --data, --base and --batch-size
// (default 8) of `sub`. Returns the exit code.
int run_reward_score_command(const CLI::App& sub, const RewardScoreFlags& flags);

}  // namespace ember::apps
