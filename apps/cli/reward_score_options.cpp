// The options of `ember reward --score` (see reward_score_options.h).
#include "apps/cli/reward_score_options.h"

#include <CLI/CLI.hpp>

#include "apps/evaluate/reward_scores.h"
#include "core/error.h"

namespace ember::apps {

void add_reward_score_options(CLI::App& sub, RewardScoreFlags& flags) {
  sub.add_flag("--score", flags.score,
               "score --data's lines with the reward checkpoint --checkpoint: one JSON line each "
               "(pairs: chosen and rejected; {\"prompt\", \"completion\"}: reward)");
  sub.add_option("--checkpoint", flags.checkpoint, "with --score: the reward checkpoint (.h5)")
      ->check(CLI::ExistingFile);
}

int run_reward_score_command(const RewardScoreFlags& flags, const std::string& data,
                             const std::string& moved_base, int64_t batch_size) {
  EMBER_CHECK(!flags.checkpoint.empty(), "--score needs --checkpoint RM (a reward checkpoint)");
  EMBER_CHECK(!data.empty(), "--score needs --data FILE (JSONL pairs or prompt / completion lines)");
  return run_reward_score(RewardScoreOptions{flags.checkpoint, data, moved_base, batch_size});
}

}  // namespace ember::apps
