// Runs the ember binary under test (EMBER_BINARY, defined per test target) as
// a shell command and collects its exit code and output, kept in a TempDir.
#pragma once
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "temp_dir.h"

namespace ember::testing {

struct CliRun {
  int code = -1;  // the exit code, or 128 + the signal that ended it
  std::string out, err;
};

// `ember ARGS` (ARGS already shell-quoted); prefix, when given, runs first in the same shell
// (e.g. "ulimit -f 64;"), then ember replaces the shell.
inline CliRun run_cli(const TempDir& dir, const std::string& args, const std::string& prefix = "") {
  const std::string cmd = "bash -c '" + prefix + " exec " + EMBER_BINARY + " " + args + "' > " +
                          (dir / "stdout") + " 2> " + (dir / "stderr") + " < /dev/null";
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(dir / "stdout");
  r.err = read_text(dir / "stderr");
  return r;
}

}  // namespace ember::testing
