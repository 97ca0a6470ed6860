// `ember train`: command-line options -> TrainOptions (SPEC.md section 8), the
// run (apps/train/), then the run's OUT/loss.svg (apps/plot/); the
// options themselves are the field table of apps/train/options.h (flags: apps/cli/train_options.h).
#include "apps/cli/commands.h"
#include "apps/cli/train_options.h"
#include "apps/plot/training_plot.h"
#include "apps/train/trainer.h"
#include "dist/communicator.h"

namespace ember::apps {

CommandRunner add_train_command(CLI::App& app, dist::Communicator& comm) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* sub = app.add_subcommand("train", "Train a model from a text corpus or token shards (with no options: "
                                              "dense-small on Debian's fortunes)");
  add_train_options(*sub, *o);
  return [o, sub, &comm]() {
    mark_given_options(*sub, *o);
    const int code = run_train(*o, comm);  // 0, or 128 + the signal that stopped it
    // OUT/loss.svg from the run's metrics.jsonl: a warning, never a failed run.
    if (comm.is_root()) write_run_plot_or_warn(run_folder(*o));
    return code;
  };
}

}  // namespace ember::apps
