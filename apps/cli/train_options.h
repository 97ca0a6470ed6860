// `ember train`'s and `ember finetune`'s options on the command line (CLI11): every field of
// the table of apps/train/options.h registered as a flag, and after parsing,
// which of them were given (a given option overrides a resumed run's); and the command
// that runs either.
#pragma once
#include <functional>
#include <memory>

#include "apps/train/options.h"

namespace CLI {
class App;
}
namespace ember::dist {
class Communicator;
}

namespace ember::apps {

// Registers every field of the table on `sub`, bound to o's members.
void add_train_options(CLI::App& sub, TrainOptions& o);
// After parsing: records in o.given the fields given on the command line.
void mark_given_options(const CLI::App& sub, TrainOptions& o);
// Registers o's fields on sub; the returned command runs run_train, or run_finetune,
// run_align or run_reward as o's mode says, on comm (exit code 0, or 128 + the signal that stopped it), then writes the
// run's OUT/loss.svg (a warning, never a failed run).
std::function<int()> add_run_command(CLI::App& sub, std::shared_ptr<TrainOptions> o,
                                     dist::Communicator& comm);

}  // namespace ember::apps
