// The one check `ember export` (both formats) and `ember import` run before any work:
// an output never replaces what is there. A file output must not exist; a folder output
// (a Hugging Face or PEFT folder) must not exist or be an empty folder, so an export
// never overwrites model.safetensors, config.json or tokenizer.json of another model.
#pragma once
#include <string>

namespace ember::apps {

enum class OutputKind { File, Folder };

// Throws an Error naming `option`, `path` and what to do unless path is free for `command`'s
// output of `kind` (command: "export" or "import", named in the message).
void require_new_output(const std::string& command, const std::string& option, const std::string& path,
                        OutputKind kind);

// Creates the output folder `path` (and its parents); an Error naming `option`, `path` and the
// system's reason when it cannot (e.g. a parent is a file).
void create_output_folder(const std::string& option, const std::string& path);

}  // namespace ember::apps
