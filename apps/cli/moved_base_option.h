// The --base option of the commands that read a checkpoint (generate, chat, serve, eval,
// evaluate, export): a LoRA fine-tune checkpoint names its base by absolute path; when that
// file moved, --base gives its new path (nn::model_from_checkpoint checks it by the sha256 the
// checkpoint records). One registration, so that every command says the same.
#pragma once
#include <string>

namespace CLI {
class App;
}

namespace ember::apps {

void add_moved_base_option(CLI::App& sub, std::string& moved_base);

}  // namespace ember::apps
