// `ember reward`: command-line options -> TrainOptions in reward mode (docs/cli.md#reward-models),
// the run (apps/train/, run_reward), then the run's OUT/loss.svg; registered from the table of
// the fine-tuning commands (finetune_commands.cpp).
#include "apps/cli/commands.h"

namespace ember::apps {

CommandRunner add_reward_command(CLI::App& app, dist::Communicator& comm) {
  return add_finetuning_command(app, comm, "reward").run;
}

}  // namespace ember::apps
