// `ember train | head`: SIGPIPE is ignored, and once stdout's reader is gone
// stdout is pointed at /dev/null, so training goes on silently to its end
// (checkpoints as usual) after one note on stderr.
#pragma once

namespace ember::apps {

// Ignores SIGPIPE for the process (a write to a closed pipe then fails with EPIPE).
void ignore_sigpipe();
// Flushes stdout; when that (or an earlier write) failed, sends stdout to
// /dev/null from now on and says so once on stderr.
void continue_if_stdout_closed();

}  // namespace ember::apps
