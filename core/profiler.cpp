// The profiler's state machine (see profiler.h). One stack of open scopes;
// at every scope entry and exit the time since the previous one is charged to
// the (phase, family) pair that was current, which makes the attribution
// exclusive with one clock read per transition.
#include "core/profiler.h"

#include <cassert>
#include <chrono>
#include <thread>
#include <vector>

namespace ember::prof {

namespace detail {
std::atomic<bool> g_on{false};
}

namespace {

using Clock = std::chrono::steady_clock;

struct Frame {
  bool is_phase;
  bool claim;
  uint8_t previous;  // the family or phase current before this scope opened
};

struct State {
  std::thread::id owner;
  std::vector<Frame> stack;
  Family family = Family::Other;
  Phase phase = Phase::Outside;
  int claim_depth = 0;
  Clock::time_point last = Clock::now();
  Snapshot counters;

  bool on_owner_thread() const { return std::this_thread::get_id() == owner; }
  void charge() {
    const Clock::time_point now = Clock::now();
    counters.seconds[static_cast<int>(phase)][static_cast<int>(family)] +=
        std::chrono::duration<double>(now - last).count();
    last = now;
  }
};

State& state() {
  static State s;
  return s;
}

}  // namespace

const char* family_name(Family f) {
  static const char* const names[kFamilies] = {"matmul",       "attention", "norm", "elementwise",
                                               "loss",         "embedding", "moe_dispatch",
                                               "optimizer",    "comm",      "data", "other"};
  return names[static_cast<int>(f)];
}

const char* phase_name(Phase p) {
  static const char* const names[kPhases] = {"data",      "forward",   "backward",   "clip",
                                             "optimizer", "comm_wait", "checkpoint", "outside"};
  return names[static_cast<int>(p)];
}

double Snapshot::phase_seconds(Phase p) const {
  double s = 0;
  for (int f = 0; f < kFamilies; ++f) s += seconds[static_cast<int>(p)][f];
  return s;
}

double Snapshot::family_seconds(Family f, bool include_outside) const {
  double s = 0;
  for (int p = 0; p < kPhases; ++p) {
    if (include_outside || p != static_cast<int>(Phase::Outside)) s += seconds[p][static_cast<int>(f)];
  }
  return s;
}

int64_t Snapshot::family_calls(Family f, bool include_outside) const {
  int64_t n = 0;
  for (int p = 0; p < kPhases; ++p) {
    if (include_outside || p != static_cast<int>(Phase::Outside)) n += calls[p][static_cast<int>(f)];
  }
  return n;
}

double Snapshot::total_seconds(bool include_outside) const {
  double s = 0;
  for (int f = 0; f < kFamilies; ++f) s += family_seconds(static_cast<Family>(f), include_outside);
  return s;
}

void enable(bool on) {
  State& s = state();
  if (on) {
    s.owner = std::this_thread::get_id();
    s.last = Clock::now();
  } else if (detail::g_on.load() && s.on_owner_thread()) {
    s.charge();
  }
  detail::g_on.store(on);
}

bool enabled() { return detail::g_on.load(); }

void reset() {
  State& s = state();
  s.counters = Snapshot{};
  s.last = Clock::now();
}

void end_step() { state().counters.steps++; }

Snapshot snapshot() {
  State& s = state();
  if (detail::g_on.load() && s.on_owner_thread()) s.charge();
  return s.counters;
}

Family current_family() {
  const State& s = state();
  return detail::g_on.load(std::memory_order_relaxed) && s.on_owner_thread() ? s.family : Family::Other;
}

namespace detail {

bool enter_family(Family f, bool claim) {
  State& s = state();
  if (!s.on_owner_thread() || s.claim_depth > 0) return false;
  s.charge();
  s.stack.push_back({false, claim, static_cast<uint8_t>(s.family)});
  s.family = f;
  s.claim_depth += claim;
  s.counters.calls[static_cast<int>(s.phase)][static_cast<int>(f)]++;
  return true;
}

void exit_family() {
  State& s = state();
  s.charge();
  assert(!s.stack.empty() && !s.stack.back().is_phase);
  const Frame frame = s.stack.back();
  s.stack.pop_back();
  s.family = static_cast<Family>(frame.previous);
  s.claim_depth -= frame.claim;
}

bool enter_phase(Phase p) {
  State& s = state();
  if (!s.on_owner_thread()) return false;
  s.charge();
  s.stack.push_back({true, false, static_cast<uint8_t>(s.phase)});
  s.phase = p;
  s.counters.phase_calls[static_cast<int>(p)]++;
  return true;
}

void exit_phase() {
  State& s = state();
  s.charge();
  assert(!s.stack.empty() && s.stack.back().is_phase);
  const Frame frame = s.stack.back();
  s.stack.pop_back();
  s.phase = static_cast<Phase>(frame.previous);
}

}  // namespace detail

}  // namespace ember::prof
