// core/profiler: exclusive attribution of nested scopes, claims, phases,
// nothing recorded when off or on another thread, reset; and the autograd
// engine charging a node's backward to the family its forward ran under.
// Timings use busy loops on the steady clock (they last at least their
// length) and are compared with the test's own clock around the same regions,
// so a loaded machine that stretches a region stretches both.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "autograd/ops.h"
#include "core/profiler.h"

using namespace ember;
using prof::Family;
using prof::Phase;

namespace {

void busy_ms(double ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(ms);
  while (std::chrono::steady_clock::now() < end) {
  }
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double ms_of(const prof::Snapshot& s, Phase p, Family f) {
  return 1e3 * s.seconds[static_cast<int>(p)][static_cast<int>(f)];
}

// Leaves the profiler off and zeroed for the next test.
struct ProfilerSession {
  ProfilerSession() {
    prof::enable();
    prof::reset();
  }
  ~ProfilerSession() {
    prof::enable(false);
    prof::reset();
  }
};

}  // namespace

TEST_CASE("profiler: a nested scope's time is not its parent's", "[profiler]") {
  ProfilerSession session;
  double outer_ms = 0, inner_ms = 0;
  {
    const auto t0 = std::chrono::steady_clock::now();
    {
      EMBER_PROFILE_PHASE(Phase::Forward);
      EMBER_PROFILE_SCOPE(Family::Matmul);
      busy_ms(10);
      const auto t1 = std::chrono::steady_clock::now();
      {
        EMBER_PROFILE_SCOPE(Family::Norm);
        busy_ms(60);
      }
      inner_ms = ms_since(t1);
      busy_ms(10);
    }
    outer_ms = ms_since(t0);
  }
  const prof::Snapshot s = prof::snapshot();
  const double matmul = ms_of(s, Phase::Forward, Family::Matmul), norm = ms_of(s, Phase::Forward, Family::Norm);
  CHECK(matmul >= 20.0);
  CHECK(norm >= 60.0);
  CHECK(norm <= inner_ms);
  // Exclusive: the outer scope holds its own 20 ms, not the inner 60 (the margin is far below 60).
  CHECK(matmul == Approx(outer_ms - inner_ms).margin(15.0));
  CHECK(matmul + norm <= outer_ms);
  CHECK(s.calls[static_cast<int>(Phase::Forward)][static_cast<int>(Family::Matmul)] == 1);
  CHECK(s.calls[static_cast<int>(Phase::Forward)][static_cast<int>(Family::Norm)] == 1);
  CHECK(s.phase_calls[static_cast<int>(Phase::Forward)] == 1);
  // The families split the phase exactly; nothing was charged to another phase's families.
  CHECK(s.phase_seconds(Phase::Forward) == Approx(s.total_seconds()).epsilon(1e-12));
  CHECK(s.family_seconds(Family::Matmul) + s.family_seconds(Family::Norm) + s.family_seconds(Family::Other) ==
        Approx(s.phase_seconds(Phase::Forward)).epsilon(1e-12));
  CHECK(s.phase_seconds(Phase::Backward) == 0.0);
}

TEST_CASE("profiler: a claim absorbs the scopes nested in it", "[profiler]") {
  ProfilerSession session;
  {
    EMBER_PROFILE_PHASE(Phase::Backward);
    EMBER_PROFILE_CLAIM(Family::MoeDispatch);
    CHECK(prof::current_family() == Family::MoeDispatch);
    EMBER_PROFILE_SCOPE(Family::Elementwise);
    CHECK(prof::current_family() == Family::MoeDispatch);
    busy_ms(15);
  }
  const prof::Snapshot s = prof::snapshot();
  CHECK(ms_of(s, Phase::Backward, Family::MoeDispatch) >= 15.0);
  CHECK(ms_of(s, Phase::Backward, Family::Elementwise) == 0.0);
  CHECK(s.family_calls(Family::MoeDispatch) == 1);
  CHECK(s.family_calls(Family::Elementwise) == 0);
  CHECK(prof::current_family() == Family::Other);
}

TEST_CASE("profiler: phases nest, time outside phases stays out of the split", "[profiler]") {
  ProfilerSession session;
  busy_ms(10);  // outside any phase
  double outer_ms = 0, inner_ms = 0;
  {
    const auto t0 = std::chrono::steady_clock::now();
    {
      EMBER_PROFILE_PHASE(Phase::Optimizer);
      busy_ms(10);
      const auto t1 = std::chrono::steady_clock::now();
      {
        EMBER_PROFILE_PHASE(Phase::CommWait);
        EMBER_PROFILE_SCOPE(Family::Comm);
        busy_ms(40);
      }
      inner_ms = ms_since(t1);
    }
    outer_ms = ms_since(t0);
  }
  prof::end_step();
  const prof::Snapshot s = prof::snapshot();
  CHECK(s.steps == 1);
  CHECK(s.phase_seconds(Phase::Outside) * 1e3 >= 10.0);
  CHECK(s.phase_seconds(Phase::Optimizer) * 1e3 >= 10.0);
  // The nested phase's 40 ms are not the optimizer's (the margin is far below 40).
  CHECK(s.phase_seconds(Phase::Optimizer) * 1e3 == Approx(outer_ms - inner_ms).margin(12.0));
  CHECK(ms_of(s, Phase::CommWait, Family::Comm) >= 40.0);
  CHECK(ms_of(s, Phase::CommWait, Family::Comm) <= inner_ms);
  CHECK(s.total_seconds() == Approx(s.phase_seconds(Phase::Optimizer) + s.phase_seconds(Phase::CommWait)));
  CHECK(s.total_seconds(true) > s.total_seconds());
}

TEST_CASE("profiler: off records nothing, reset zeroes", "[profiler]") {
  prof::enable(false);
  prof::reset();
  {
    EMBER_PROFILE_PHASE(Phase::Forward);
    EMBER_PROFILE_SCOPE(Family::Matmul);
    busy_ms(5);
  }
  prof::Snapshot s = prof::snapshot();
  CHECK(s.total_seconds(true) == 0.0);
  CHECK(s.family_calls(Family::Matmul, true) == 0);
  CHECK(prof::current_family() == Family::Other);

  ProfilerSession session;
  {
    EMBER_PROFILE_PHASE(Phase::Forward);
    EMBER_PROFILE_SCOPE(Family::Matmul);
    busy_ms(5);
  }
  prof::end_step();
  CHECK(prof::snapshot().family_calls(Family::Matmul) == 1);
  prof::reset();
  s = prof::snapshot();
  CHECK(s.steps == 0);
  CHECK(s.family_calls(Family::Matmul) == 0);
  CHECK(s.total_seconds() == 0.0);
}

TEST_CASE("profiler: only the thread that enabled it records", "[profiler]") {
  ProfilerSession session;
  std::thread other([] {
    EMBER_PROFILE_PHASE(Phase::Forward);
    EMBER_PROFILE_SCOPE(Family::Attention);
    busy_ms(5);
  });
  other.join();
  const prof::Snapshot s = prof::snapshot();
  CHECK(s.family_calls(Family::Attention, true) == 0);
  CHECK(s.phase_calls[static_cast<int>(Phase::Forward)] == 0);
}

TEST_CASE("profiler: backward nodes are charged to their forward op's family", "[profiler]") {
  ProfilerSession session;
  const Variable a(Tensor::randn({64, 64}, 1), true), b(Tensor::randn({64, 64}, 2), true);
  Variable loss;
  {
    EMBER_PROFILE_PHASE(Phase::Forward);
    loss = sum(matmul(a, b));  // one matmul node, one sum node
  }
  {
    EMBER_PROFILE_PHASE(Phase::Backward);
    loss.backward();
  }
  const prof::Snapshot s = prof::snapshot();
  const int fwd = static_cast<int>(Phase::Forward), bwd = static_cast<int>(Phase::Backward);
  CHECK(s.calls[fwd][static_cast<int>(Family::Matmul)] == 1);
  CHECK(s.calls[bwd][static_cast<int>(Family::Matmul)] == 1);
  CHECK(s.calls[fwd][static_cast<int>(Family::Elementwise)] == 1);  // sum
  CHECK(s.calls[bwd][static_cast<int>(Family::Elementwise)] >= 1);  // sum's node, accumulation into a, b
  CHECK(s.seconds[bwd][static_cast<int>(Family::Matmul)] > 0.0);
  REQUIRE(a.grad().defined());
}
