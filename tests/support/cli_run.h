// Runs the ember binary under test (EMBER_BINARY, defined per test target) as
// a shell command and collects its exit code and output, kept in a TempDir; or
// with stdout on a pseudo-terminal, to check what a terminal is sent.
#pragma once
#include <pty.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
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

// `ember ARGS` with stdout on a pseudo-terminal in raw mode (isatty(stdout) is true and the
// bytes arrive unchanged: no "\n" -> "\r\n"), stdin from `input`, stderr in DIR.
inline CliRun run_cli_on_terminal(const TempDir& dir, const std::string& args, const std::string& input = "") {
  dir.write("stdin", input);
  const std::string cmd = "exec " + std::string(EMBER_BINARY) + " " + args + " 2> " + (dir / "stderr") + " < " +
                          (dir / "stdin");
  int master = -1, slave = -1;
  CliRun r;
  if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) return r;
  termios raw{};
  tcgetattr(slave, &raw);
  cfmakeraw(&raw);
  tcsetattr(slave, TCSANOW, &raw);
  const pid_t pid = fork();
  if (pid < 0) {
    close(master);
    close(slave);
    return r;
  }
  if (pid == 0) {
    close(master);
    dup2(slave, STDOUT_FILENO);
    close(slave);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(slave);  // the child's end only: read() ends (EIO) once the child closes it
  char buffer[4096];
  while (true) {
    const ssize_t n = read(master, buffer, sizeof buffer);
    if (n > 0) {
      r.out.append(buffer, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(master);
  int status = 0;
  waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.err = read_text(dir / "stderr");
  return r;
}

// `ember ARGS` with its output collected in a folder of its own.
inline CliRun run_ember(const std::string& args) {
  const TempDir dir("cli_run");
  return run_cli(dir, args);
}

}  // namespace ember::testing
