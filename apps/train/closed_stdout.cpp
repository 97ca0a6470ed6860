// Closed stdout during `ember train` (see closed_stdout.h).
#include "apps/train/closed_stdout.h"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>

namespace ember::apps {

void ignore_sigpipe() { std::signal(SIGPIPE, SIG_IGN); }

void continue_if_stdout_closed() {
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return;
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    ::close(null);
  }
  std::clearerr(stdout);
  std::fprintf(stderr, "ember train: stdout is closed; training continues without output to its end "
                       "and writes checkpoints as usual\n");
}

}  // namespace ember::apps
