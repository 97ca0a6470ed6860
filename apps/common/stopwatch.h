// Stopwatch and best_seconds: the one steady-clock timing shared by the commands
// (`ember bench`'s steps, the matmul and FMA peaks ember train's MFU divides by)
// and the bench/ programs. Stopwatch: seconds since it started; lap() returns them and
// starts again. best_seconds: the fastest of repeated calls, after warm-ups.
#pragma once
#include <algorithm>
#include <chrono>

namespace ember::apps {

class Stopwatch {
 public:
  Stopwatch() : start_(Clock::now()) {}
  // Seconds since the start (construction, restart or the last lap).
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  // Seconds since the start, starting again from now.
  double lap() {
    const Clock::time_point now = Clock::now();
    const double s = std::chrono::duration<double>(now - start_).count();
    start_ = now;
    return s;
  }
  void restart() { start_ = Clock::now(); }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
};

// How best_seconds repeats: `warmup` untimed calls, then at least `min` timed
// calls, more while their total is under budget_seconds, at most `max`.
struct Repeats {
  int warmup = 0;
  int min = 1;
  int max = 1;
  double budget_seconds = 0;
};

// Seconds of the fastest timed call of fn.
template <class Fn>
double best_seconds(const Repeats& r, Fn&& fn) {
  for (int i = 0; i < r.warmup; ++i) fn();
  double best = 1e30, total = 0;
  for (int rep = 0; rep < r.max && (rep < r.min || total < r.budget_seconds); ++rep) {
    const Stopwatch watch;
    fn();
    const double s = watch.seconds();
    best = std::min(best, s);
    total += s;
  }
  return best;
}

}  // namespace ember::apps
