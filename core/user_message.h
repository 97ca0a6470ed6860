// The one line `ember` prints for an exception that escaped a command: an
// ember::Error as it is; the standard library's own exceptions (out of memory,
// a size too large, a filesystem failure) and JSON library errors as a sentence
// naming what failed, never the library's raw text.
#pragma once
#include <exception>
#include <string>

namespace ember::apps {

// command: the subcommand that ran ("eval"), for "while running `ember eval`".
std::string user_message(const std::exception& e, const std::string& command);

}  // namespace ember::apps
