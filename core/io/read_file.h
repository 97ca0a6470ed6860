// read_file: the whole content of a file, the one way ember reads a file at
// once (configs, tokenizers, corpora, metrics, prompts). A missing, unreadable
// or folder path is one Error line naming the file, what it was to be and why;
// so is one longer than the caller's bound (an endless stream such as /dev/zero
// given as a prompt or a config would otherwise be read until memory runs out).
#pragma once
#include <cstdint>
#include <limits>
#include <string>

namespace ember {

// The bytes of the file at `path`. `what` names the file's role for the
// message, e.g. "model config file". Errors:
//   "PATH: is a folder, not the WHAT"
//   "PATH: cannot open the WHAT: <reason>"   (missing, no permission, ...)
//   "PATH: cannot read the WHAT: <reason>"   (an I/O error part-way)
//   "PATH: the WHAT is larger than N MiB (...)"  (more than max_bytes; reading stops there)
std::string read_file(const std::string& path, const std::string& what,
                      uint64_t max_bytes = std::numeric_limits<uint64_t>::max());

// Bounds for files that are small by nature; a file past them is not what was meant.
constexpr uint64_t kMaxConfigFileBytes = uint64_t{64} << 20;     // JSON configs, indexes, prompts
constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{1} << 30;  // tokenizer.json, GPT-2 files
constexpr uint64_t kMaxTextFileBytes = uint64_t{4} << 30;       // task files, texts to score

}  // namespace ember
