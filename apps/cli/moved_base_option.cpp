// --base of the commands that read a checkpoint (see moved_base_option.h).
#include "apps/cli/moved_base_option.h"

#include <CLI/CLI.hpp>

namespace ember::apps {

void add_moved_base_option(CLI::App& sub, std::string& moved_base) {
  sub.add_option("--base", moved_base,
                 "a fine-tune checkpoint's base moved since the fine-tune: its new path (checked "
                 "by the sha256 the checkpoint records)")
      ->check(CLI::ExistingFile);
}

}  // namespace ember::apps
