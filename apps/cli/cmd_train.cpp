// `ember train`: command-line options -> TrainOptions (docs/cli.md), the
// run (apps/train/), then the run's OUT/loss.svg (apps/plot/); the
// options themselves are the field table of apps/train/options.h (flags: apps/cli/train_options.h).
#include "apps/cli/commands.h"
#include "apps/cli/train_options.h"

namespace ember::apps {

CommandRunner add_train_command(CLI::App& app, dist::Communicator& comm) {
  CLI::App* sub = app.add_subcommand("train", "Train a model from a text corpus or token shards (with no options: "
                                              "dense-small on Debian's fortunes)");
  return add_run_command(*sub, std::make_shared<TrainOptions>(), comm);
}

}  // namespace ember::apps
