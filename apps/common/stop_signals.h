// SIGINT and SIGTERM, taken on one thread of their own. A handler that runs on a
// computing thread can break it: oneDNN 2.6's AVX-512 sgemm aborts the process
// ("corrupted size vs. prev_size") when a signal frame lands on its thread's stack
// mid-kernel, which turned a SIGTERM during a training step into a crash instead of
// a checkpoint. So `ember` blocks both signals before it makes any thread (every
// later thread inherits the mask) and one thread takes them with sigwait: while a
// StopSignalScope lives, the signal's number is stored into its flag (the training
// loop and `ember serve` poll theirs); otherwise the process ends by the signal, as
// by default.
#pragma once
#include <atomic>

namespace ember::apps {

// Called once at the start of main, before any other thread exists.
void start_stop_signal_thread();

// In a forked child (which has no signal thread): the default action again.
void unblock_stop_signals();

// While it lives, SIGINT and SIGTERM store their number into `flag` (the latest scope
// wins). Without the signal thread (a program other than `ember` calling the library),
// a plain handler stores it instead, on whichever thread the signal lands.
class StopSignalScope {
 public:
  explicit StopSignalScope(std::atomic<int>& flag);
  ~StopSignalScope();
  StopSignalScope(const StopSignalScope&) = delete;
  StopSignalScope& operator=(const StopSignalScope&) = delete;

 private:
  std::atomic<int>* previous_;
};

}  // namespace ember::apps
