// `ember align`: command-line options -> TrainOptions in alignment mode
// (docs/cli.md#alignment), the run (apps/train/, run_align), then the run's OUT/loss.svg; the
// options are the alignment field table of apps/train/options.h (finetune's and the loss's).
#include "apps/cli/commands.h"
#include "apps/cli/train_options.h"

namespace ember::apps {

CommandRunner add_align_command(CLI::App& app, dist::Communicator& comm) {
  auto o = std::make_shared<TrainOptions>();
  o->finetune = o->align = true;
  o->out = "runs/align";
  CLI::App* sub = app.add_subcommand(
      "align",
      "Align a checkpoint on preference pairs (JSONL prompt / chosen / rejected): dpo, ipo, "
      "simpo or orpo, with LoRA adapters, QLoRA (--quantize nf4) or every weight (--full)");
  return add_run_command(*sub, o, comm);
}

}  // namespace ember::apps
