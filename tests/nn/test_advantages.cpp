// RL's advantages (docs/model.md#advantages) against values worked by hand or by an independent
// python3 float64 computation (statistics.stdev / statistics.variance, never this code): GRPO's
// group advantages (an all-equal group gives exactly 0), PPO's per-token rewards, GAE on a
// 3-token completion, whitening over a step split in micro-batches, and the one-line errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "nn/alignment/advantages.h"
#include "float64_values.h"

using namespace ember;
using namespace ember::nn;

namespace {

using ember::testing::f64;
using ember::testing::values;

}  // namespace

TEST_CASE("grpo_advantages: by group, unbiased std + 1e-4, an all-equal group 0",
          "[alignment][rl]") {
  // Prompt 0: rewards 1, 2, 4: mean 7/3, deviations -4/3, -1/3, 5/3, unbiased variance
  // (16 + 1 + 25) / 9 / 2 = 7/3, std sqrt(7/3) = 1.5275252316519468. python3:
  // [(x - 7/3) / (statistics.stdev([1, 2, 4]) + 1e-4) for x in (1, 2, 4)].
  // Prompt 1: all 0.5: every advantage exactly 0.
  const Tensor a = grpo_advantages(f64({1, 2, 4, 0.5, 0.5, 0.5}, {6}), 3);
  REQUIRE(a.shape() == Shape({6}));
  REQUIRE(a.dtype() == DType::Float64);
  const std::vector<double> got = values(a);
  const double want[3] = {-0.8728144218274599, -0.21820360545686507, 1.0910180272843246};
  for (int i = 0; i < 3; ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-14));
  for (int i = 3; i < 6; ++i) CHECK(got[i] == 0.0);
  // G = 2: rewards 3, -1: mean 1, std sqrt(8) = 2.8284271247461903; A = +-2 / (std + 1e-4).
  const std::vector<double> two = values(grpo_advantages(f64({3, -1}, {2}), 2));
  CHECK(two[0] == Approx(0.7070817820703996).epsilon(1e-14));
  CHECK(two[1] == Approx(-0.7070817820703996).epsilon(1e-14));
}

TEST_CASE("grpo_advantages refuses G < 2, a partial group and non-finite rewards",
          "[alignment][rl]") {
  CHECK_THROWS_WITH(grpo_advantages(f64({1, 2}, {2}), 1),
                    Catch::StartsWith("grpo_advantages: the group size must be >= 2"));
  CHECK_THROWS_WITH(grpo_advantages(f64({1, 2, 3, 4, 5}, {5}), 2),
                    Catch::Contains("rewards must be [N G]") && Catch::Contains("[5]"));
  CHECK_THROWS_WITH(grpo_advantages(f64({1, 2, 3, 4}, {2, 2}), 2),
                    Catch::Contains("rewards must be [N G]"));
  CHECK_THROWS_WITH(grpo_advantages(f64({1, std::nan("")}, {2}), 2),
                    Catch::Contains("reward 1 is nan") && Catch::Contains("finite"));
}

TEST_CASE("ppo_token_rewards: -kl (logp_old - ref) per token, the score on the last",
          "[alignment][rl]") {
  // kl = 0.1. Row 0 completes at t = 1..3: -0.1 (-1.0 + 0.8) = 0.02, -0.1 (-0.5 + 0.8) = -0.03,
  // -0.1 (-2.0 + 2.1) = -0.01, plus the score 1.0: 0.99. Row 1 at t = 0, 1: 0 and
  // -0.1 (-1.2 + 1.0) = 0.02, plus -0.5: -0.48. Off the mask 0 (whatever is stored there).
  const Tensor mask = f64({0, 1, 1, 1, 1, 1, 0, 0}, {2, 4});
  const Tensor old = f64({9, -1.0, -0.5, -2.0, -0.3, -1.2, 9, 9}, {2, 4});
  const Tensor ref = f64({-9, -0.8, -0.8, -2.1, -0.3, -1.0, -9, 5}, {2, 4});
  const std::vector<double> r =
      values(ppo_token_rewards(f64({1.0, -0.5}, {2}), old, ref, mask, 0.1));
  const double want[8] = {0, 0.02, -0.03, 0.99, 0, -0.48, 0, 0};
  for (int i = 0; i < 8; ++i) CHECK(r[i] == Approx(want[i]).margin(1e-15));
  const Tensor empty_row = f64({0, 1, 1, 1, 0, 0, 0, 0}, {2, 4});
  CHECK_THROWS_WITH(ppo_token_rewards(f64({1.0, -0.5}, {2}), old, ref, empty_row, 0.1),
                    Catch::Contains("row 1 has no completion token"));
  CHECK_THROWS_WITH(ppo_token_rewards(f64({1.0}, {1}), old, ref, mask, 0.1),
                    Catch::Contains("scores must be [2]"));
  CHECK_THROWS_WITH(ppo_token_rewards(f64({1.0, -0.5}, {2}), old.reshape({4, 2}), ref, mask, 0.1),
                    Catch::Contains("logp_old must be [2, 4]"));
}

TEST_CASE("gae on a 3-token completion, gamma 1, lambda 0.95, returns A + V_old",
          "[alignment][rl]") {
  // Row 0 completes at t = 1..3 with r = -0.02, 0.03, 0.99 and V_old = 0.4, 0.7, 0.2 (V after the
  // last token 0). By hand: A3 = 0.99 - 0.2 = 0.79; A2 = 0.03 + 0.2 - 0.7 + 0.95 * 0.79 = 0.2805;
  // A1 = -0.02 + 0.7 - 0.4 + 0.95 * 0.2805 = 0.546475. Returns 0.946475, 0.9805, 0.99.
  // Row 1's one token at t = 0: A = r - V = 0.5 - 0.25 = 0.25 (nothing after it is read).
  const Tensor mask = f64({0, 1, 1, 1, 1, 0, 0, 0}, {2, 4});
  const Tensor r = f64({7, -0.02, 0.03, 0.99, 0.5, 3, 3, 3}, {2, 4});
  const Tensor v = f64({7, 0.4, 0.7, 0.2, 0.25, 3, 3, 3}, {2, 4});
  const Gae g = gae(r, v, mask);
  const std::vector<double> a = values(g.advantages), ret = values(g.returns);
  const double want_a[8] = {0, 0.546475, 0.2805, 0.79, 0.25, 0, 0, 0};
  const double want_r[8] = {0, 0.946475, 0.9805, 0.99, 0.5, 0, 0, 0};
  for (int i = 0; i < 8; ++i) {
    CHECK(a[i] == Approx(want_a[i]).margin(1e-15));
    CHECK(ret[i] == Approx(want_r[i]).margin(1e-15));
  }
  // gamma 0.5, lambda 1 on row 0: A3 = 0.79; A2 = 0.03 + 0.1 - 0.7 + 0.5 * 0.79 = -0.175;
  // A1 = -0.02 + 0.35 - 0.4 + 0.5 * -0.175 = -0.1575.
  const std::vector<double> h = values(gae(r, v, mask, 0.5, 1.0).advantages);
  CHECK(h[1] == Approx(-0.1575).margin(1e-15));
  CHECK(h[2] == Approx(-0.175).margin(1e-15));
  CHECK(h[3] == Approx(0.79).margin(1e-15));
  CHECK_THROWS_WITH(gae(r, v, f64({0, 1, 0.5, 1, 1, 0, 0, 0}, {2, 4})),
                    Catch::Contains("gae: the completion-token mask holds 0.5 at [0, 2]"));
}

TEST_CASE("whiten over the step's completion tokens, summed over micro-batches",
          "[alignment][rl]") {
  // The step's tokens 0.5, -1, 2, 0.25, 3 (two micro-batches): mean 0.95, unbiased variance 2.45
  // (python3 statistics.variance); (x - 0.95) / sqrt(2.45 + 1e-8).
  const Tensor x1 = f64({0.5, -1.0, 8, 2.0}, {2, 2}), m1 = f64({1, 1, 0, 1}, {2, 2});
  const Tensor x2 = f64({0.25, 3.0, -4}, {1, 3}), m2 = f64({1, 1, 0}, {1, 3});
  MomentSums step = moment_sums(x1, m1);
  CHECK(step.n == 3);
  step += moment_sums(x2, m2);
  CHECK(step.n == 5);
  CHECK(step.mean() == Approx(0.95).epsilon(1e-15));
  CHECK(step.unbiased_var() == Approx(2.45).epsilon(1e-14));
  const std::vector<double> w1 = values(whiten(x1, m1, step)), w2 = values(whiten(x2, m2, step));
  CHECK(w1[0] == Approx(-0.28749445366324955).epsilon(1e-13));
  CHECK(w1[1] == Approx(-1.2458092992074148).epsilon(1e-13));
  CHECK(w1[2] == 0.0);
  CHECK(w1[3] == Approx(0.6708203918809157).epsilon(1e-13));
  CHECK(w2[0] == Approx(-0.44721359458727705).epsilon(1e-13));
  CHECK(w2[1] == Approx(1.3096969555770257).epsilon(1e-13));
  CHECK(w2[2] == 0.0);
  // One token has no unbiased variance.
  CHECK_THROWS_WITH(whiten(x1, m1, moment_sums(f64({1, 2}, {1, 2}), f64({0, 1}, {1, 2}))),
                    Catch::Contains("whitening needs at least 2 completion tokens"));
}
