// `ember finetune`: command-line options -> TrainOptions in fine-tuning mode
// (docs/cli.md#fine-tuning), the run (apps/train/, run_finetune), then the run's OUT/loss.svg; the
// options are the fine-tuning field table of apps/train/options.h.
#include "apps/cli/commands.h"
#include "apps/cli/train_options.h"

namespace ember::apps {

CommandRunner add_finetune_command(CLI::App& app, dist::Communicator& comm) {
  auto o = std::make_shared<TrainOptions>();
  o->finetune = true;
  o->out = "runs/finetune";
  CLI::App* sub = app.add_subcommand(
      "finetune",
      "Fine-tune a checkpoint on chat data (JSONL messages): LoRA adapters, QLoRA "
      "(--quantize nf4) or every weight (--full)");
  return add_run_command(*sub, o, comm);
}

}  // namespace ember::apps
