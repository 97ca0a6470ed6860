// Integer options of every subcommand read as plain decimal numbers within
// their type's range. CLI11 2.1 alone reads "010" as octal 8, turns 2^63 into
// 2^63 - 1 and -1 into 2^64 - 1 for an unsigned option, silently; here each
// such value is a usage error (exit 2) naming the option.
#pragma once
#include <CLI/CLI.hpp>

namespace ember::apps {

// Adds the check to every INT and UINT option of `app` and its subcommands
// (after they are all added).
void check_integer_options(CLI::App& app);

}  // namespace ember::apps
