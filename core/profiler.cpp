// The profiler's state machine (see profiler.h). One stack of open scopes;
// at every scope entry and exit the time since the previous one is charged to
// the (phase, family) pair that was current, which makes the attribution
// exclusive with one clock read per transition; the channels' traffic, counted
// apart. And the registries of the family, phase and channel names the layers
// hand in.
#include "core/profiler.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <limits>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

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
  Family family = kOtherFamily;
  Phase phase = kOutsidePhase;
  int claim_depth = 0;
  Clock::time_point last = Clock::now();
  Snapshot counters;

  bool on_owner_thread() const { return std::this_thread::get_id() == owner; }
  void charge() {
    const Clock::time_point now = Clock::now();
    counters.seconds[phase.id][family.id] +=
        std::chrono::duration<double>(now - last).count();
    last = now;
  }
};

State& state() {
  static State s;
  return s;
}

// The registered names of one kind (families or phases), index = id.
template <int kMax>
struct Registry {
  std::string names[kMax];
  int ranks[kMax] = {};
  int count = 0;
  std::mutex mutex;

  explicit Registry(const char* default_name) : count(1) {
    names[0] = default_name;
    ranks[0] = std::numeric_limits<int>::max();  // the default comes last
  }
  uint8_t add(std::string_view name, int rank, const char* kind) {
    const std::lock_guard<std::mutex> lock(mutex);
    for (int i = 0; i < count; ++i) {
      if (names[i] == name) {
        EMBER_CHECK(ranks[i] == rank, "profiler: the ", kind, " \"", name, "\" is registered with ranks ",
                    ranks[i], " and ", rank);
        return static_cast<uint8_t>(i);
      }
    }
    EMBER_CHECK(count < kMax, "profiler: more than ", kMax, " ", kind, "s registered (\"", name, "\")");
    names[count] = std::string(name);
    ranks[count] = rank;
    return static_cast<uint8_t>(count++);
  }
  std::vector<uint8_t> in_report_order() {
    const std::lock_guard<std::mutex> lock(mutex);
    std::vector<uint8_t> ids(count);
    std::iota(ids.begin(), ids.end(), uint8_t{0});
    std::sort(ids.begin(), ids.end(), [&](uint8_t a, uint8_t b) {
      return ranks[a] != ranks[b] ? ranks[a] < ranks[b] : names[a] < names[b];
    });
    return ids;
  }
};

// Function-local statics: registered from other layers' static initialisers.
Registry<kMaxFamilies>& family_registry() {
  static Registry<kMaxFamilies> r("other");
  return r;
}
Registry<kMaxPhases>& phase_registry() {
  static Registry<kMaxPhases> r("outside");
  return r;
}
Registry<kMaxChannels>& channel_registry() {
  static Registry<kMaxChannels> r("other");
  return r;
}

}  // namespace

Family register_family(std::string_view name, int report_rank) {
  return Family{family_registry().add(name, report_rank, "family")};
}

Phase register_phase(std::string_view name, int report_rank) {
  return Phase{phase_registry().add(name, report_rank, "phase")};
}

Channel register_channel(std::string_view name, int report_rank) {
  return Channel{channel_registry().add(name, report_rank, "channel")};
}

const char* family_name(Family f) { return family_registry().names[f.id].c_str(); }

const char* phase_name(Phase p) { return phase_registry().names[p.id].c_str(); }

const char* channel_name(Channel c) { return channel_registry().names[c.id].c_str(); }

std::vector<Family> families() {
  std::vector<Family> out;
  for (const uint8_t id : family_registry().in_report_order()) out.push_back(Family{id});
  return out;
}

std::vector<Phase> phases() {
  std::vector<Phase> out;
  for (const uint8_t id : phase_registry().in_report_order()) out.push_back(Phase{id});
  return out;
}

std::vector<Channel> channels() {
  std::vector<Channel> out;
  for (const uint8_t id : channel_registry().in_report_order()) out.push_back(Channel{id});
  return out;
}

double Snapshot::phase_seconds(Phase p) const {
  double s = 0;
  for (int f = 0; f < kMaxFamilies; ++f) s += seconds[p.id][f];
  return s;
}

double Snapshot::family_seconds(Family f, bool include_outside) const {
  double s = 0;
  for (int p = 0; p < kMaxPhases; ++p) {
    if (include_outside || p != kOutsidePhase.id) s += seconds[p][f.id];
  }
  return s;
}

int64_t Snapshot::family_calls(Family f, bool include_outside) const {
  int64_t n = 0;
  for (int p = 0; p < kMaxPhases; ++p) {
    if (include_outside || p != kOutsidePhase.id) n += calls[p][f.id];
  }
  return n;
}

double Snapshot::total_seconds(bool include_outside) const {
  double s = 0;
  for (int f = 0; f < kMaxFamilies; ++f) s += family_seconds(Family{static_cast<uint8_t>(f)}, include_outside);
  return s;
}

Traffic Snapshot::channel_traffic(Channel c, bool include_outside) const {
  Traffic sum;
  for (int p = 0; p < kMaxPhases; ++p) {
    if (!include_outside && p == kOutsidePhase.id) continue;
    sum.calls += traffic[p][c.id].calls;
    sum.bytes += traffic[p][c.id].bytes;
    sum.seconds += traffic[p][c.id].seconds;
  }
  return sum;
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

void add_traffic(Channel c, int64_t bytes, double seconds) {
  State& s = state();
  if (!detail::g_on.load(std::memory_order_relaxed) || !s.on_owner_thread()) return;
  Traffic& t = s.counters.traffic[s.phase.id][c.id];
  t.calls++;
  t.bytes += bytes;
  t.seconds += seconds;
}

Family current_family() {
  const State& s = state();
  return detail::g_on.load(std::memory_order_relaxed) && s.on_owner_thread() ? s.family : kOtherFamily;
}

namespace detail {

bool enter_family(Family f, bool claim) {
  State& s = state();
  if (!s.on_owner_thread() || s.claim_depth > 0) return false;
  s.charge();
  s.stack.push_back({false, claim, s.family.id});
  s.family = f;
  s.claim_depth += claim;
  s.counters.calls[s.phase.id][f.id]++;
  return true;
}

void exit_family() {
  State& s = state();
  s.charge();
  assert(!s.stack.empty() && !s.stack.back().is_phase);
  const Frame frame = s.stack.back();
  s.stack.pop_back();
  s.family = Family{frame.previous};
  s.claim_depth -= frame.claim;
}

bool enter_phase(Phase p) {
  State& s = state();
  if (!s.on_owner_thread()) return false;
  s.charge();
  s.stack.push_back({true, false, s.phase.id});
  s.phase = p;
  s.counters.phase_calls[p.id]++;
  return true;
}

void exit_phase() {
  State& s = state();
  s.charge();
  assert(!s.stack.empty() && s.stack.back().is_phase);
  const Frame frame = s.stack.back();
  s.stack.pop_back();
  s.phase = Phase{frame.previous};
}

}  // namespace detail

}  // namespace ember::prof
