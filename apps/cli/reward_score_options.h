// `ember reward --score --checkpoint RM --data FILE` (docs/cli.md#scoring-with-a-reward-model)
// on the `reward` subcommand: the two options of scoring (--score, --checkpoint), added to the
// subcommand that trains reward models, whose --data, --batch-size and --base scoring shares
// (--base: the moved base of a LoRA reward checkpoint). The scoring is
// apps/evaluate/reward_scores.h.
#pragma once
#include <cstdint>
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
// ember reward --score: an Error without --checkpoint or --data, else run_reward_score. Returns
// the exit code.
int run_reward_score_command(const RewardScoreFlags& flags, const std::string& data,
                             const std::string& moved_base, int64_t batch_size);

}  // namespace ember::apps
