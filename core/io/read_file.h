// read_file: the whole content of a file, the one way ember reads a file at
// once (configs, tokenizers, corpora, metrics, prompts). A missing, unreadable
// or folder path is one Error line naming the file, what it was to be and why.
#pragma once
#include <string>

namespace ember {

// The bytes of the file at `path`. `what` names the file's role for the
// message, e.g. "model config file". Errors:
//   "PATH: is a folder, not the WHAT"
//   "PATH: cannot open the WHAT: <reason>"   (missing, no permission, ...)
//   "PATH: cannot read the WHAT: <reason>"   (an I/O error part-way)
std::string read_file(const std::string& path, const std::string& what);

}  // namespace ember
