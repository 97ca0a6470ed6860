// A built-in profiler: where the time of a training step goes, by phase of the
// step and by op family. Off by default; then a scope costs one predictable
// branch. On, a scope reads the steady clock twice. Attribution is exclusive:
// time is charged to the innermost open family scope (a nested scope's time is
// not its parent's), and to the innermost open phase, so the family split sums
// to the phase totals. A claim is a family scope that absorbs the scopes nested
// in it (a composite, or a recorded backward node). Only the thread that
// called enable() records; scopes sit outside OpenMP parallel regions. Apart
// from that split, channels count collective traffic (calls, bytes, seconds)
// per phase.
//
// core knows no family or phase but its two defaults: each layer registers the
// names it owns, once, as ids (namespace-scope constants of that layer):
//   const prof::Family kMatmulFamily = prof::register_family("matmul", 100);
//   EMBER_PROFILE_SCOPE(kMatmulFamily);   // first line of an op
//   EMBER_PROFILE_CLAIM(kMoeFamily);      // absorbs the scopes nested in it
//   EMBER_PROFILE_PHASE(kForwardPhase);   // in the training loop
//   prof::add_traffic(kTensorParallelChannel, bytes, seconds);  // after a collective
// The rank orders the report (ascending, then by name), so it does not depend
// on the order static initialisers run in: the layers rank by their place in
// the stack (autograd 100s, nn 200s, optim 300s, dist 400s, apps 500s) and
// core's "other" and "outside" come last.
#pragma once
#include <atomic>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ember::prof {

inline constexpr int kMaxFamilies = 32;
inline constexpr int kMaxPhases = 16;
inline constexpr int kMaxChannels = 8;

// A registered op family / phase of a step: an index into the counters.
struct Family {
  uint8_t id = 0;
  friend bool operator==(Family, Family) = default;
};
struct Phase {
  uint8_t id = 0;
  friend bool operator==(Phase, Phase) = default;
};
// A channel of collective traffic (a layer's collectives of one kind, e.g. the tensor-parallel
// all-reduces): their calls, payload bytes and seconds, counted per phase apart from the
// exclusive time split (that time is also in the families' split, wherever the call ran).
struct Channel {
  uint8_t id = 0;
  friend bool operator==(Channel, Channel) = default;
};
struct Traffic {
  int64_t calls = 0;
  int64_t bytes = 0;
  double seconds = 0;
};
// "other": whatever no family scope claims (views, copies, bookkeeping).
inline constexpr Family kOtherFamily{0};
// "outside": time while no phase scope is open (between steps, logging, evaluation).
inline constexpr Phase kOutsidePhase{0};

// Registers a name (again: the id it already has) with its place in the report.
Family register_family(std::string_view name, int report_rank);
Phase register_phase(std::string_view name, int report_rank);
Channel register_channel(std::string_view name, int report_rank);
const char* family_name(Family f);  // "matmul", "moe_dispatch", ...
const char* phase_name(Phase p);    // "forward", "comm_wait", ...
const char* channel_name(Channel c);  // "tp_all_reduce", ...
// Every registered family / phase, in report order (the defaults last).
std::vector<Family> families();
std::vector<Phase> phases();
std::vector<Channel> channels();  // channel 0, "other", last

// What was recorded since the last reset(): seconds and scope entries per
// (phase, family), phase scope entries, and steps counted by end_step().
struct Snapshot {
  double seconds[kMaxPhases][kMaxFamilies] = {};
  int64_t calls[kMaxPhases][kMaxFamilies] = {};
  int64_t phase_calls[kMaxPhases] = {};
  Traffic traffic[kMaxPhases][kMaxChannels] = {};
  int64_t steps = 0;
  double seconds_in(Phase p, Family f) const { return seconds[p.id][f.id]; }
  int64_t calls_in(Phase p, Family f) const { return calls[p.id][f.id]; }
  int64_t calls_of(Phase p) const { return phase_calls[p.id]; }
  double phase_seconds(Phase p) const;
  double family_seconds(Family f, bool include_outside = false) const;
  int64_t family_calls(Family f, bool include_outside = false) const;
  double total_seconds(bool include_outside = false) const;  // sum over the phases
  const Traffic& traffic_in(Phase p, Channel c) const { return traffic[p.id][c.id]; }
  Traffic channel_traffic(Channel c, bool include_outside = false) const;  // over the phases
};

// Starts (or stops) recording; the calling thread becomes the one that records.
void enable(bool on = true);
bool enabled();
// Zeroes every counter (open scopes stay open and keep counting from now).
void reset();
// Counts one step (the averages of a report are per step).
void end_step();
// The counters up to now.
Snapshot snapshot();
// Counts one collective call of channel c that moved `bytes` (its payload) in `seconds`,
// charged to the current phase; only while recording, on the recording thread.
void add_traffic(Channel c, int64_t bytes, double seconds);
// The family time is charged to right now ("other" when off): recorded
// backward nodes take it as their family.
Family current_family();

namespace detail {
extern std::atomic<bool> g_on;
bool enter_family(Family f, bool claim);
void exit_family();
bool enter_phase(Phase p);
void exit_phase();
}  // namespace detail

// The id is read only when recording (by reference: a layer's constant is not
// loaded while the profiler is off).
class Scope {
 public:
  explicit Scope(const Family& f, bool claim = false) {
    if (detail::g_on.load(std::memory_order_relaxed)) [[unlikely]] armed_ = detail::enter_family(f, claim);
  }
  ~Scope() {
    if (armed_) [[unlikely]] detail::exit_family();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool armed_ = false;
};

class PhaseScope {
 public:
  explicit PhaseScope(const Phase& p) {
    if (detail::g_on.load(std::memory_order_relaxed)) [[unlikely]] armed_ = detail::enter_phase(p);
  }
  ~PhaseScope() {
    if (armed_) [[unlikely]] detail::exit_phase();
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  bool armed_ = false;
};

}  // namespace ember::prof

#define EMBER_PROF_CAT2(a, b) a##b
#define EMBER_PROF_CAT(a, b) EMBER_PROF_CAT2(a, b)
#define EMBER_PROFILE_SCOPE(family) ::ember::prof::Scope EMBER_PROF_CAT(ember_prof_, __LINE__)(family)
#define EMBER_PROFILE_CLAIM(family) \
  ::ember::prof::Scope EMBER_PROF_CAT(ember_prof_, __LINE__)(family, /*claim=*/true)
#define EMBER_PROFILE_PHASE(phase) ::ember::prof::PhaseScope EMBER_PROF_CAT(ember_prof_, __LINE__)(phase)
