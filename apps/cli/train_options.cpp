// The CLI11 side of `ember train`'s options (see apps/cli/train_options.h): walks
// option_flags() of the field table, so a flag exists exactly when its field
// does. Booleans are flags; the others take a value and show their default.
#include "apps/cli/train_options.h"

#include <CLI/CLI.hpp>

#include "apps/plot/training_plot.h"
#include "apps/train/trainer.h"
#include "dist/communicator.h"

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

std::function<int()> add_run_command(CLI::App& sub, std::shared_ptr<TrainOptions> o,
                                     dist::Communicator& comm) {
  add_train_options(sub, *o);
  return [o, &sub, &comm]() {
    mark_given_options(sub, *o);
    const int code = o->reward     ? run_reward(*o, comm)
                     : o->align    ? run_align(*o, comm)
                     : o->rl       ? run_rl(*o, comm)
                     : o->finetune ? run_finetune(*o, comm)
                                   : run_train(*o, comm);
    if (comm.is_root()) write_run_plot_or_warn(run_folder(*o), command_name(*o));
    return code;
  };
}

}  // namespace ember::apps
