// `ember train`: command-line options -> TrainOptions (SPEC.md section 8); the
// options themselves are the field table of apps/train/options.h.
#include "apps/cli/commands.h"
#include "apps/train/options.h"
#include "apps/train/trainer.h"
#include "dist/communicator.h"

namespace ember::apps {

namespace {
dist::Communicator* g_comm = nullptr;
}

void set_command_communicator(dist::Communicator* comm) { g_comm = comm; }

CommandRunner add_train_command(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* sub = app.add_subcommand("train", "Train a model from a text corpus or token shards (with no options: "
                                              "dense-small on Debian's fortunes)");
  add_train_options(*sub, *o);
  return [o, sub]() {
    mark_given_options(*sub, *o);
    return g_comm ? run_train(*o, *g_comm) : run_train(*o);
  };
}

}  // namespace ember::apps
