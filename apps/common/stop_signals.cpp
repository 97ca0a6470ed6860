// The signal thread of apps/common/stop_signals.h.
#include "apps/common/stop_signals.h"

#include <pthread.h>
#include <signal.h>

#include <csignal>
#include <thread>

namespace ember::apps {
namespace {

std::atomic<std::atomic<int>*> g_flag{nullptr};
std::atomic<bool> g_thread_running{false};

sigset_t stop_signals() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  return s;
}

// The fallback handler (no signal thread): async-signal-safe, a lock-free store.
extern "C" void store_stop_signal(int sig) {
  if (std::atomic<int>* f = g_flag.load()) f->store(sig);
}

void take_signals() {
  const sigset_t signals = stop_signals();
  while (true) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (std::atomic<int>* f = g_flag.load()) {
      f->store(sig);
      continue;
    }
    // Nobody stops gracefully: end the process by the signal (its default action).
    std::signal(sig, SIG_DFL);
    pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
    raise(sig);
  }
}

}  // namespace

void start_stop_signal_thread() {
  if (g_thread_running.exchange(true)) return;
  const sigset_t signals = stop_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread(take_signals).detach();
}

void unblock_stop_signals() {
  const sigset_t signals = stop_signals();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
}

StopSignalScope::StopSignalScope(std::atomic<int>& flag) : previous_(g_flag.exchange(&flag)) {
  if (!g_thread_running.load()) {
    std::signal(SIGINT, store_stop_signal);
    std::signal(SIGTERM, store_stop_signal);
  }
}

StopSignalScope::~StopSignalScope() {
  g_flag.store(previous_);
  if (!g_thread_running.load() && previous_ == nullptr) {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  }
}

}  // namespace ember::apps
