// Runs the ember binary under test (EMBER_BINARY, defined per test target) as
// a shell command and collects its exit code and output, kept in a TempDir; or
// with stdout on a pseudo-terminal, to check what a terminal is sent.
#pragma once
#include <poll.h>
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
// The end of the output is a marker the shell prints after ember exits, read with the
// terminal's other end still open here: on a pty, read() may end (EIO) when the child closes
// its end before the kernel has passed the last bytes written to this side, losing them.
inline CliRun run_cli_on_terminal(const TempDir& dir, const std::string& args, const std::string& input = "") {
  dir.write("stdin", input);
  const std::string end_marker = "\001ember-cli-run-end\001";
  const std::string cmd = std::string(EMBER_BINARY) + " " + args + " 2> " + (dir / "stderr") + " < " +
                          (dir / "stdin") + "; status=$?; printf '\\001ember-cli-run-end\\001'; exit $status";
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
  // Read until the marker; should the shell die before printing it, stop once the child has
  // exited and a further second brings no bytes (the test then fails on its output, not hangs).
  int status = 0;
  bool exited = false;
  char buffer[4096];
  while (!r.out.ends_with(end_marker)) {
    pollfd ready{master, POLLIN, 0};
    const int n_ready = poll(&ready, 1, 1000);
    if (n_ready < 0 && errno == EINTR) continue;
    if (n_ready > 0) {
      const ssize_t n = read(master, buffer, sizeof buffer);
      if (n > 0) r.out.append(buffer, static_cast<size_t>(n));
      if (n > 0 || (n < 0 && errno == EINTR)) continue;
      break;
    }
    if (exited) break;
    exited = waitpid(pid, &status, WNOHANG) == pid;
  }
  if (r.out.ends_with(end_marker)) r.out.resize(r.out.size() - end_marker.size());
  close(slave);
  close(master);
  if (!exited) waitpid(pid, &status, 0);
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
