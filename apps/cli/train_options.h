// `ember train`'s options on the command line (CLI11): every field of the
// table of apps/train/options.h registered as a flag, and after parsing,
// which of them were given (a given option overrides a resumed run's).
#pragma once
#include "apps/train/options.h"

namespace CLI {
class App;
}

namespace ember::apps {

// Registers every field of the table on `sub`, bound to o's members.
void add_train_options(CLI::App& sub, TrainOptions& o);
// After parsing: records in o.given the fields given on the command line.
void mark_given_options(const CLI::App& sub, TrainOptions& o);

}  // namespace ember::apps
