// `ember reward`: command-line options -> TrainOptions in reward mode (docs/cli.md#reward-models),
// the run (apps/train/, run_reward), then the run's OUT/loss.svg; registered from the table of
// the fine-tuning commands (finetune_commands.cpp). With --score it scores instead
// (docs/cli.md#scoring-with-a-reward-model; its options: reward_score_options.h).
#include "apps/cli/commands.h"
#include "apps/cli/reward_score_options.h"
#include "dist/communicator.h"

namespace ember::apps {

CommandRunner add_reward_command(CLI::App& app, dist::Communicator& comm) {
  const RegisteredCommand train = add_finetuning_command(app, comm, "reward");
  auto flags = std::make_shared<RewardScoreFlags>();
  add_reward_score_options(*train.sub, *flags);
  return [sub = train.sub, run = train.run, flags, &comm]() {
    check_reward_score_options(*sub, *flags, comm.world_size());
    return flags->score ? run_reward_score_command(*sub, *flags) : run();
  };
}

}  // namespace ember::apps
