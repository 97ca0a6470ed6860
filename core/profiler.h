// A built-in profiler: where the time of a training step goes, by phase of the
// step (data, forward, backward, ...) and by op family (matmul, attention, ...).
// Off by default; then a scope costs one predictable branch. On, a scope reads
// the steady clock twice. Attribution is exclusive: time is charged to the
// innermost open family scope (a nested scope's time is not its parent's), and
// to the innermost open phase, so the family split sums to the phase totals.
// A claim is a family scope that absorbs the scopes nested in it (a composite
// such as the MoE dispatch, or a recorded backward node). Only the thread that
// called enable() records; scopes sit outside OpenMP parallel regions.
//
//   EMBER_PROFILE_PHASE(ember::prof::Phase::Forward);     // in the trainer
//   EMBER_PROFILE_SCOPE(ember::prof::Family::Matmul);     // first line of an op
//   EMBER_PROFILE_CLAIM(ember::prof::Family::MoeDispatch); // absorbs nested ops
//
// Families: matmul (the matmul op), attention (the fused attention op and
// RoPE), norm (RMSNorm, LayerNorm), elementwise (unary, binary, reductions,
// softmax, dropout, where; gradient accumulation in the engine), loss (fused
// cross-entropy with z-loss), embedding (token and position lookups), moe
// dispatch (routing, top-k, gather/scatter of tokens per expert, aux losses),
// optimizer (AdamW, clipping), comm (MPI calls and waits), data (batches),
// other (views, joins, copies, engine bookkeeping: whatever no scope claims).
#pragma once
#include <atomic>
#include <cstdint>

namespace ember::prof {

enum class Family : uint8_t {
  Matmul, Attention, Norm, Elementwise, Loss, Embedding, MoeDispatch, Optimizer, Comm, Data, Other
};
// Outside: time while no phase scope is open (between steps, logging, evaluation).
enum class Phase : uint8_t { Data, Forward, Backward, Clip, Optimizer, CommWait, Checkpoint, Outside };
inline constexpr int kFamilies = 11;
inline constexpr int kPhases = 8;

const char* family_name(Family f);  // "matmul", "moe_dispatch", ...
const char* phase_name(Phase p);    // "forward", "comm_wait", ...

// What was recorded since the last reset(): seconds and scope entries per
// (phase, family), phase scope entries, and steps counted by end_step().
struct Snapshot {
  double seconds[kPhases][kFamilies] = {};
  int64_t calls[kPhases][kFamilies] = {};
  int64_t phase_calls[kPhases] = {};
  int64_t steps = 0;
  double phase_seconds(Phase p) const;
  double family_seconds(Family f, bool include_outside = false) const;
  int64_t family_calls(Family f, bool include_outside = false) const;
  double total_seconds(bool include_outside = false) const;  // sum over the phases
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
// The family time is charged to right now (Other when off): recorded
// backward nodes take it as their family.
Family current_family();

namespace detail {
extern std::atomic<bool> g_on;
bool enter_family(Family f, bool claim);
void exit_family();
bool enter_phase(Phase p);
void exit_phase();
}  // namespace detail

class Scope {
 public:
  explicit Scope(Family f, bool claim = false) {
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
  explicit PhaseScope(Phase p) {
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
