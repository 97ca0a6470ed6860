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

// `ember ARGS` (ARGS already shell-quoted) with stdout and stderr in DIR; prefix, when given,
// runs first in the same shell (e.g. "ulimit -f 64;"; ARGS then holds no single quote), then
// ember replaces the shell.
inline CliRun run_cli(const TempDir& dir, const std::string& args, const std::string& prefix = "") {
  const std::string ember = std::string(EMBER_BINARY) + " " + args;
  const std::string command = prefix.empty() ? ember : "bash -c '" + prefix + " exec " + ember + "'";
  const std::string cmd =
      command + " > " + (dir / "stdout") + " 2> " + (dir / "stderr") + " < /dev/null";
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(dir / "stdout");
  r.err = read_text(dir / "stderr");
  return r;
}

// `ember ARGS` with its output collected in a folder of its own.
inline CliRun run_ember(const std::string& args) {
  const TempDir dir("cli_run");
  return run_cli(dir, args);
}

}  // namespace ember::testing
