// `ember reward`: scoring with a reward model, `--score --checkpoint RM --data FILE`
// (docs/cli.md#scoring-with-a-reward-model; the options: reward_score_options.h).
#include "apps/cli/commands.h"
#include "apps/cli/moved_base_option.h"
#include "apps/cli/reward_score_options.h"
#include "core/error.h"

namespace ember::apps {
namespace {

struct RewardOptions {
  RewardScoreFlags flags;
  std::string data, base;
  int64_t batch_size = 8;
};

}  // namespace

CommandRunner add_reward_command(CLI::App& app, dist::Communicator&) {
  auto o = std::make_shared<RewardOptions>();
  CLI::App* sub = app.add_subcommand("reward", "Score text with a reward model (--score)");
  add_reward_score_options(*sub, o->flags);
  sub->add_option("--data", o->data, "JSONL lines to score")->check(CLI::ExistingFile);
  sub->add_option("--batch-size", o->batch_size, "with --score: sides per forward pass")
      ->capture_default_str();
  add_moved_base_option(*sub, o->base);
  return [o]() {
    EMBER_CHECK(o->flags.score, "ember reward: give --score (scoring with a reward checkpoint)");
    return run_reward_score_command(o->flags, o->data, o->base, o->batch_size);
  };
}

}  // namespace ember::apps
