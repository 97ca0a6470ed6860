// core/profiler: exclusive attribution of nested scopes, claims, phases,
// nothing recorded when off or on another thread, reset; the registries of
// names (the layers' families and phases in the report's order); and the
// autograd engine charging a node's backward to the family its forward ran under;
// channels of collective traffic counted per phase, and the report's rows of them.
// Timings use busy loops on the steady clock (they last at least their
// length) and are compared with the test's own clock around the same regions,
// so a loaded machine that stretches a region stretches both.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "apps/train/profile_report.h"
#include "apps/train/step_phases.h"
#include "autograd/ops.h"
#include "autograd/profile_families.h"
#include "core/profiler.h"
#include "dist/communicator.h"
#include "nn/moe.h"
#include "optim/optimizer.h"

using namespace ember;
using namespace ember::apps;
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
  return 1e3 * s.seconds_in(p, f);
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
      EMBER_PROFILE_PHASE(kForwardPhase);
      EMBER_PROFILE_SCOPE(kMatmulFamily);
      busy_ms(10);
      const auto t1 = std::chrono::steady_clock::now();
      {
        EMBER_PROFILE_SCOPE(kNormFamily);
        busy_ms(60);
      }
      inner_ms = ms_since(t1);
      busy_ms(10);
    }
    outer_ms = ms_since(t0);
  }
  const prof::Snapshot s = prof::snapshot();
  const double matmul = ms_of(s, kForwardPhase, kMatmulFamily), norm = ms_of(s, kForwardPhase, kNormFamily);
  CHECK(matmul >= 20.0);
  CHECK(norm >= 60.0);
  CHECK(norm <= inner_ms);
  // Exclusive: the outer scope holds its own 20 ms, not the inner 60 (the margin is far below 60).
  CHECK(matmul == Approx(outer_ms - inner_ms).margin(15.0));
  CHECK(matmul + norm <= outer_ms);
  CHECK(s.calls_in(kForwardPhase, kMatmulFamily) == 1);
  CHECK(s.calls_in(kForwardPhase, kNormFamily) == 1);
  CHECK(s.calls_of(kForwardPhase) == 1);
  // The families split the phase exactly; nothing was charged to another phase's families.
  CHECK(s.phase_seconds(kForwardPhase) == Approx(s.total_seconds()).epsilon(1e-12));
  CHECK(s.family_seconds(kMatmulFamily) + s.family_seconds(kNormFamily) + s.family_seconds(prof::kOtherFamily) ==
        Approx(s.phase_seconds(kForwardPhase)).epsilon(1e-12));
  CHECK(s.phase_seconds(kBackwardPhase) == 0.0);
}

TEST_CASE("profiler: a claim absorbs the scopes nested in it", "[profiler]") {
  ProfilerSession session;
  {
    EMBER_PROFILE_PHASE(kBackwardPhase);
    EMBER_PROFILE_CLAIM(nn::kMoeDispatchFamily);
    CHECK(prof::current_family() == nn::kMoeDispatchFamily);
    EMBER_PROFILE_SCOPE(kElementwiseFamily);
    CHECK(prof::current_family() == nn::kMoeDispatchFamily);
    busy_ms(15);
  }
  const prof::Snapshot s = prof::snapshot();
  CHECK(ms_of(s, kBackwardPhase, nn::kMoeDispatchFamily) >= 15.0);
  CHECK(ms_of(s, kBackwardPhase, kElementwiseFamily) == 0.0);
  CHECK(s.family_calls(nn::kMoeDispatchFamily) == 1);
  CHECK(s.family_calls(kElementwiseFamily) == 0);
  CHECK(prof::current_family() == prof::kOtherFamily);
}

TEST_CASE("profiler: phases nest, time outside phases stays out of the split", "[profiler]") {
  ProfilerSession session;
  busy_ms(10);  // outside any phase
  double outer_ms = 0, inner_ms = 0;
  {
    const auto t0 = std::chrono::steady_clock::now();
    {
      EMBER_PROFILE_PHASE(kOptimizerPhase);
      busy_ms(10);
      const auto t1 = std::chrono::steady_clock::now();
      {
        EMBER_PROFILE_PHASE(kCommWaitPhase);
        EMBER_PROFILE_SCOPE(dist::kCommFamily);
        busy_ms(40);
      }
      inner_ms = ms_since(t1);
    }
    outer_ms = ms_since(t0);
  }
  prof::end_step();
  const prof::Snapshot s = prof::snapshot();
  CHECK(s.steps == 1);
  CHECK(s.phase_seconds(prof::kOutsidePhase) * 1e3 >= 10.0);
  CHECK(s.phase_seconds(kOptimizerPhase) * 1e3 >= 10.0);
  // The nested phase's 40 ms are not the optimizer's (the margin is far below 40).
  CHECK(s.phase_seconds(kOptimizerPhase) * 1e3 == Approx(outer_ms - inner_ms).margin(12.0));
  CHECK(ms_of(s, kCommWaitPhase, dist::kCommFamily) >= 40.0);
  CHECK(ms_of(s, kCommWaitPhase, dist::kCommFamily) <= inner_ms);
  CHECK(s.total_seconds() == Approx(s.phase_seconds(kOptimizerPhase) + s.phase_seconds(kCommWaitPhase)));
  CHECK(s.total_seconds(true) > s.total_seconds());
}

TEST_CASE("profiler: off records nothing, reset zeroes", "[profiler]") {
  prof::enable(false);
  prof::reset();
  {
    EMBER_PROFILE_PHASE(kForwardPhase);
    EMBER_PROFILE_SCOPE(kMatmulFamily);
    busy_ms(5);
  }
  prof::Snapshot s = prof::snapshot();
  CHECK(s.total_seconds(true) == 0.0);
  CHECK(s.family_calls(kMatmulFamily, true) == 0);
  CHECK(prof::current_family() == prof::kOtherFamily);

  ProfilerSession session;
  {
    EMBER_PROFILE_PHASE(kForwardPhase);
    EMBER_PROFILE_SCOPE(kMatmulFamily);
    busy_ms(5);
  }
  prof::end_step();
  CHECK(prof::snapshot().family_calls(kMatmulFamily) == 1);
  prof::reset();
  s = prof::snapshot();
  CHECK(s.steps == 0);
  CHECK(s.family_calls(kMatmulFamily) == 0);
  CHECK(s.total_seconds() == 0.0);
}

TEST_CASE("profiler: only the thread that enabled it records", "[profiler]") {
  ProfilerSession session;
  std::thread other([] {
    EMBER_PROFILE_PHASE(kForwardPhase);
    EMBER_PROFILE_SCOPE(kAttentionFamily);
    busy_ms(5);
  });
  other.join();
  const prof::Snapshot s = prof::snapshot();
  CHECK(s.family_calls(kAttentionFamily, true) == 0);
  CHECK(s.calls_of(kForwardPhase) == 0);
}

TEST_CASE("profiler: backward nodes are charged to their forward op's family", "[profiler]") {
  ProfilerSession session;
  const Variable a(Tensor::randn({64, 64}, 1), true), b(Tensor::randn({64, 64}, 2), true);
  Variable loss;
  {
    EMBER_PROFILE_PHASE(kForwardPhase);
    loss = sum(matmul(a, b));  // one matmul node, one sum node
  }
  {
    EMBER_PROFILE_PHASE(kBackwardPhase);
    loss.backward();
  }
  const prof::Snapshot s = prof::snapshot();
  CHECK(s.calls_in(kForwardPhase, kMatmulFamily) == 1);
  CHECK(s.calls_in(kBackwardPhase, kMatmulFamily) == 1);
  CHECK(s.calls_in(kForwardPhase, kElementwiseFamily) == 1);  // sum
  CHECK(s.calls_in(kBackwardPhase, kElementwiseFamily) >= 1);  // sum's node, accumulation into a, b
  CHECK(s.seconds_in(kBackwardPhase, kMatmulFamily) > 0.0);
  REQUIRE(a.grad().defined());
}

TEST_CASE("profiler: a name registers once, the report orders by rank then name", "[profiler]") {
  const Family b = prof::register_family("test_b", 900), a = prof::register_family("test_a", 900);
  const Family first = prof::register_family("test_first", 50);
  CHECK(prof::register_family("test_b", 900) == b);
  CHECK_FALSE(a == b);
  CHECK(std::string(prof::family_name(a)) == "test_a");
  CHECK_THROWS_WITH(prof::register_family("test_a", 901),
                    "profiler: the family \"test_a\" is registered with ranks 900 and 901");
  const Phase p = prof::register_phase("test_phase", 900);
  CHECK(prof::register_phase("test_phase", 900) == p);
  CHECK(std::string(prof::phase_name(p)) == "test_phase");
  std::vector<Family> order;
  for (const Family f : prof::families()) {
    if (f == first || f == a || f == b || f == prof::kOtherFamily) order.push_back(f);
  }
  CHECK(order == std::vector<Family>{first, a, b, prof::kOtherFamily});
  CHECK(prof::phases().back() == prof::kOutsidePhase);
}

TEST_CASE("profiler: the layers' families and phases, in the report's order", "[profiler]") {
  // Names the layers' constants, so every layer's registration is linked in.
  const std::vector<Family> layers = {kMatmulFamily, nn::kMoeDispatchFamily, optim::kOptimizerFamily,
                                      dist::kCommFamily, kDataFamily};
  CHECK(layers.size() == 5);
  std::vector<std::string> families, phases;
  for (const Family f : prof::families()) {
    if (std::string(prof::family_name(f)).rfind("test_", 0) != 0) families.push_back(prof::family_name(f));
  }
  for (const Phase p : prof::phases()) {
    if (std::string(prof::phase_name(p)).rfind("test_", 0) != 0) phases.push_back(prof::phase_name(p));
  }
  CHECK(families == std::vector<std::string>{"matmul", "attention", "norm", "elementwise", "loss", "embedding",
                                             "moe_dispatch", "optimizer", "comm", "data", "other"});
  CHECK(phases == std::vector<std::string>{"data", "forward", "backward", "clip", "optimizer", "comm_wait",
                                           "checkpoint", "outside"});
}

TEST_CASE("profiler: a channel counts calls, bytes and seconds per phase, apart from the split",
          "[profiler]") {
  const prof::Channel c = prof::register_channel("test_channel", 900);
  CHECK(prof::register_channel("test_channel", 900) == c);
  CHECK(std::string(prof::channel_name(c)) == "test_channel");
  CHECK(prof::channels().back() == prof::Channel{});  // "other" last
  prof::add_traffic(c, 1000, 1.0);  // off: nothing
  ProfilerSession session;
  prof::add_traffic(c, 8, 0.5);  // outside phases
  {
    EMBER_PROFILE_PHASE(kForwardPhase);
    prof::add_traffic(c, 4096, 0.25);
    prof::add_traffic(c, 512, 0.125);
    std::thread([&] { prof::add_traffic(c, 7, 1.0); }).join();  // another thread: nothing
  }
  {
    EMBER_PROFILE_PHASE(kBackwardPhase);
    prof::add_traffic(c, 64, 0.0625);
  }
  prof::end_step();
  prof::end_step();
  const prof::Snapshot s = prof::snapshot();
  CHECK(s.traffic_in(kForwardPhase, c).calls == 2);
  CHECK(s.traffic_in(kForwardPhase, c).bytes == 4608);
  CHECK(s.traffic_in(kForwardPhase, c).seconds == 0.375);
  CHECK(s.traffic_in(kBackwardPhase, c).bytes == 64);
  CHECK(s.traffic_in(prof::kOutsidePhase, c).bytes == 8);
  CHECK(s.channel_traffic(c).calls == 3);
  CHECK(s.channel_traffic(c).bytes == 4672);
  CHECK(s.channel_traffic(c, true).bytes == 4680);
  CHECK(s.total_seconds(true) < 0.5);  // the traffic's seconds are not the time split's

  // The report: per step (2 steps), by phase and over the phases (outside left out).
  const nlohmann::json j = profile_json(s, 0, 0).at("traffic").at("test_channel");
  CHECK(j.at("calls") == 3);
  CHECK(j.at("bytes") == 4672);
  CHECK(j.at("bytes_per_step") == 2336.0);
  CHECK(j.at("ms_per_step") == 1e3 * 0.4375 / 2);
  CHECK(j.at("by_phase").size() == 2);
  CHECK(j.at("by_phase").at("forward").at("bytes_per_step") == 2304.0);
  CHECK(j.at("by_phase").at("backward").at("calls_per_step") == 0.5);
  const std::string table = profile_table(s, 0, 0);
  CHECK_THAT(table,
             Catch::Contains("test_channel   forward           1.0           2304     187.50"));
  CHECK_THAT(table,
             Catch::Contains("test_channel   (all)             1.5           2336     218.75"));
  prof::reset();
  CHECK(prof::snapshot().channel_traffic(c, true).calls == 0);
  CHECK(profile_json(prof::snapshot(), 0, 0).at("traffic").empty());
}
