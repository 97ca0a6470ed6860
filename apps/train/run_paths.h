// The paths a run stores for --resume (--data, --val-data, --tokenizer; a fine-tune's base):
// absolute and lexically normal, so that a resume from any working directory finds them; and
// whether two names (one perhaps relative, as runs stored them before) name the same file.
#pragma once
#include <string>

namespace ember::apps {

// "" stays ""; else absolute against the working directory and lexically normal (a glob's
// pattern characters are kept as they are).
std::string absolute_path(const std::string& path);
// a and b name the same file or pattern: the same absolute path, or one existing file under two
// names (links).
bool same_path(const std::string& a, const std::string& b);

}  // namespace ember::apps
