// The CLI11 side of `ember train`'s options (see apps/cli/train_options.h): walks
// option_flags() of the field table, so a flag exists exactly when its field
// does. Booleans are flags; the others take a value and show their default.
#include "apps/cli/train_options.h"

#include <CLI/CLI.hpp>

namespace ember::apps {

void add_train_options(CLI::App& sub, TrainOptions& o) {
  for (const OptionFlag& f : option_flags(o)) {
    std::visit(
        [&](auto* member) {
          using T = std::remove_pointer_t<decltype(member)>;
          if constexpr (std::is_same_v<T, bool>) {
            sub.add_flag(f.flag, *member, f.help);
          } else {
            CLI::Option* op = sub.add_option(f.flag, *member, f.help)->capture_default_str();
            if (f.existing_file) op->check(CLI::ExistingFile);
          }
        },
        f.target);
  }
}

void mark_given_options(const CLI::App& sub, TrainOptions& o) {
  for (const OptionFlag& f : option_flags(o)) {
    if (sub.count(f.flag) > 0) o.given.insert(f.key);
  }
}

}  // namespace ember::apps
