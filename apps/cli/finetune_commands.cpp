// The commands of the fine-tuning runtime as one table: `ember finetune` (chat data,
// docs/cli.md#fine-tuning), `ember align` (preference pairs, docs/cli.md#alignment) and `ember
// reward` (a reward model on preference pairs, docs/cli.md#reward-models), each a name, a
// description, the mode it sets in TrainOptions and its default --out; their options are the
// field tables of apps/train/options.h, the run is apps/train/'s, then the run's OUT/loss.svg.
#include <algorithm>
#include <cassert>
#include <iterator>
#include <string_view>

#include "apps/cli/commands.h"
#include "apps/cli/train_options.h"

namespace ember::apps {
namespace {

struct FinetuningCommand {
  const char* name;
  const char* description;
  bool TrainOptions::*mode;  // the flag it sets beside TrainOptions::finetune (none: finetune)
  const char* out;           // the default --out
};

const FinetuningCommand kFinetuningCommands[] = {
    {"finetune",
     "Fine-tune a checkpoint on chat data (JSONL messages): LoRA adapters, QLoRA "
     "(--quantize nf4) or every weight (--full)",
     nullptr, "runs/finetune"},
    {"align",
     "Align a checkpoint on preference pairs (JSONL prompt / chosen / rejected): dpo, ipo, "
     "simpo or orpo, with LoRA adapters, QLoRA (--quantize nf4) or every weight (--full)",
     &TrainOptions::align, "runs/align"},
    {"reward",
     "Train a reward model on preference pairs (JSONL prompt / chosen / rejected): a score head "
     "on a checkpoint, with LoRA adapters, QLoRA (--quantize nf4) or every weight (--full)",
     &TrainOptions::reward, "runs/reward"},
    {"rl",
     "RL from a reward on prompts (JSONL prompt / answer): GRPO or PPO with rollouts on the "
     "serving engine, --reward match or a reward model, LoRA, QLoRA or every weight (--full)",
     &TrainOptions::rl, "runs/rl"},
};

}  // namespace

RegisteredCommand add_finetuning_command(CLI::App& app, dist::Communicator& comm,
                                         std::string_view name) {
  const auto* c = std::find_if(std::begin(kFinetuningCommands), std::end(kFinetuningCommands),
                               [&](const FinetuningCommand& f) { return name == f.name; });
  assert(c != std::end(kFinetuningCommands) && "a row of kFinetuningCommands");
  auto o = std::make_shared<TrainOptions>();
  o->finetune = true;
  if (c->mode) (*o).*(c->mode) = true;
  o->out = c->out;
  CLI::App* sub = app.add_subcommand(c->name, c->description);
  return {sub, add_run_command(*sub, o, comm)};
}

}  // namespace ember::apps
