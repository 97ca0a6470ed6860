// RL's losses (docs/model.md#rl-from-a-reward) against values worked by hand or by an independent
// python3 float64 computation (never this code): k3, GRPO's clipping on both sides for positive
// and negative advantages with its gradient, the k3 term, an all-equal group (A = 0: the gradient
// is kl dk3 only), the metrics and the normaliser, PPO's value clipping and its policy part
// without k3, float64 gradchecks of both losses, the options and the one-line errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/alignment/advantages.h"
#include "nn/alignment/rl_loss.h"
#include "float64_values.h"

using namespace ember;
using namespace ember::nn;

namespace {

using ember::testing::f64;
using ember::testing::values;
std::map<std::string, double> as_map(const std::vector<std::pair<std::string, double>>& v) {
  return {v.begin(), v.end()};
}

// Two completions of a step. Row 0 (A = +2) completes at t = 0..2, row 1 (A = -2) at t = 1..3;
// rho = exp(logp - logp_old) is 1.5, 0.5, 1.1 on row 0 and 1.5, 0.5, 0.9 on row 1. Off the
// mask, padding that must not be read: logp 50 and NaN, logp_old inf and -1e4 (exp of its
// difference with logp would overflow), ref NaN.
PolicyTokens clip_case() {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> old = {-1.0, -2.0, -0.5, inf, -1e4, -1.0, -3.0, -0.7};
  const std::vector<double> rho = {1.5, 0.5, 1.1, 1, 1, 1.5, 0.5, 0.9};
  std::vector<double> logp(8);
  for (int i = 0; i < 8; ++i) logp[i] = old[i] + std::log(rho[i]);
  logp[3] = 50;
  logp[4] = std::nan("");
  PolicyTokens p;
  p.logp = Variable(f64(logp, {2, 4}), true);
  p.logp_old = f64(old, {2, 4});
  p.ref = f64({-1.2, -1.5, -0.5, std::nan(""), 3, -0.8, -2.9, -1.0}, {2, 4});
  p.mask = f64({1, 1, 1, 0, 0, 1, 1, 1}, {2, 4});
  return p;
}

RlOptions grpo_options(double kl) {
  RlOptions o;
  o.kl = kl;
  return o;
}

}  // namespace

TEST_CASE("k3 = exp(ref - logp) - (ref - logp) - 1", "[alignment][rl]") {
  // python3: math.exp(-0.5) + 0.5 - 1 = 0.10653065971263342; math.exp(1) - 1 - 1 =
  // 0.7182818284590451; 0 where logp = ref.
  const std::vector<double> k =
      values(k3(Variable(f64({-1.0, -2.0, -0.3}, {3})), f64({-1.5, -1.0, -0.3}, {3})).data());
  CHECK(k[0] == Approx(0.10653065971263342).epsilon(1e-14));
  CHECK(k[1] == Approx(0.7182818284590451).epsilon(1e-14));
  CHECK(k[2] == 0.0);
}

TEST_CASE("grpo_loss clips on both sides for positive and negative advantages", "[alignment][rl]") {
  PolicyTokens p = clip_case();
  const Tensor adv = f64({2, -2}, {2});
  const RlLossResult r = grpo_loss(p, adv, grpo_options(0), 10);
  // By hand, -min(rho A, clip(rho, 0.8, 1.2) A): A = +2: rho 1.5 -> min(3, 2.4), clipped, -2.4;
  // 0.5 -> min(1, 1.6) = 1, -1; 1.1 -> -2.2. A = -2: 1.5 -> min(-3, -2.4) = -3, +3; 0.5 ->
  // min(-1, -1.6), clipped, +1.6; 0.9 -> +1.8. Sum 0.8 over norm 10.
  CHECK(r.loss.item() == Approx(0.08).epsilon(1e-14));
  CHECK(r.sums.loss == Approx(0.8).epsilon(1e-14));
  CHECK(r.sums.tokens == 6);
  CHECK(r.sums.clipped == 2);
  // kl metric: logp_old - ref = 0.2, -0.5, 0, -0.2, -0.1, 0.3: sum -0.3.
  CHECK(r.sums.kl == Approx(-0.3).epsilon(1e-14));
  r.loss.backward();
  // d/dlogp: -A rho where unclipped, 0 where clipped and off the mask, over norm 10.
  const double want[8] = {0, -0.1, -0.22, 0, 0, 0.3, 0, 0.18};
  const std::vector<double> g = values(p.logp.grad());
  for (int i = 0; i < 8; ++i) CHECK(g[i] == Approx(want[i]).margin(1e-15));
}

TEST_CASE("grpo_loss adds kl k3 per token", "[alignment][rl]") {
  PolicyTokens p = clip_case();
  const RlLossResult r = grpo_loss(p, f64({2, -2}, {2}), grpo_options(0.04), 6);
  // python3 float64 over the six tokens of clip_case: sum of -min(...) + 0.04 k3 =
  // 0.8685872467876217; the gradient (before / 6) 0.01816717991792048, -1.09189770165601,
  // -2.1963636363636367 | 3.0074292597823953, -0.04841367344605182, 1.8070747457474792.
  CHECK(r.loss.item() == Approx(0.8685872467876217 / 6).epsilon(1e-14));
  r.loss.backward();
  const double want[8] = {0.01816717991792048, -1.09189770165601,    -2.1963636363636367, 0, 0,
                          3.0074292597823953,  -0.04841367344605182, 1.8070747457474792};
  const std::vector<double> g = values(p.logp.grad());
  for (int i = 0; i < 8; ++i) CHECK(g[i] == Approx(want[i] / 6).epsilon(1e-13).margin(1e-16));
  const auto m = as_map(r.sums.means());
  CHECK(m.size() == 3);
  CHECK(m.at("loss") == Approx(0.8685872467876217 / 6).epsilon(1e-14));
  CHECK(m.at("kl") == Approx(-0.05).epsilon(1e-14));
  CHECK(m.at("clip_fraction") == Approx(2.0 / 6).epsilon(1e-15));
}

TEST_CASE("grpo_loss: an all-equal group has no policy gradient, only kl dk3", "[alignment][rl]") {
  const Tensor adv = grpo_advantages(f64({0.7, 0.7, 0.7, 0.7}, {4}), 4);
  REQUIRE(values(adv) == std::vector<double>{0, 0, 0, 0});
  PolicyTokens p;
  p.logp = Variable(f64({-1.0, -0.2, -3.0, -0.5, -2.0, -1.5, -0.1, -0.9}, {4, 2}), true);
  p.logp_old = f64({-1.4, -0.1, -2.0, -0.5, -2.5, -1.0, -0.3, -0.9}, {4, 2});
  p.ref = f64({-0.9, -0.6, -2.8, -0.5, -2.2, -1.1, -0.4, -1.3}, {4, 2});
  p.mask = f64({1, 1, 1, 1, 1, 1, 1, 1}, {4, 2});
  grpo_loss(p, adv, grpo_options(0), 8).loss.backward();
  for (double g : values(p.logp.grad())) CHECK(g == 0.0);  // exactly: A = 0
  p.logp.zero_grad();
  grpo_loss(p, adv, grpo_options(0.04), 8).loss.backward();
  // dk3/dlogp = 1 - exp(ref - logp); the gradient is 0.04 (1 - exp(ref - logp)) / 8.
  const std::vector<double> lp = values(p.logp.data()), ref = values(p.ref),
                            g = values(p.logp.grad());
  for (int i = 0; i < 8; ++i)
    CHECK(g[i] == Approx(0.04 * (1 - std::exp(ref[i] - lp[i])) / 8).epsilon(1e-14).margin(1e-18));
  // Bit for bit the gradient of the k3 term alone: the surrogate adds exactly nothing.
  const Variable lone(p.logp.data(), true);
  (sum(k3(lone, p.ref) * 0.04 * Variable(p.mask)) / 8.0).backward();
  CHECK(values(lone.grad()) == g);
}

TEST_CASE("grpo_loss: micro-batches over the step's token count add up to the step",
          "[alignment][rl]") {
  const PolicyTokens p = clip_case();
  const RlLossResult whole = grpo_loss(p, f64({2, -2}, {2}), grpo_options(0.04), 6);
  RlMetrics sums;
  double loss = 0;
  for (int64_t b = 0; b < 2; ++b) {
    PolicyTokens h;
    h.logp = Variable(p.logp.data().narrow(0, b, 1).contiguous(), true);
    h.logp_old = p.logp_old.narrow(0, b, 1).contiguous();
    h.ref = p.ref.narrow(0, b, 1).contiguous();
    h.mask = p.mask.narrow(0, b, 1).contiguous();
    const RlLossResult part = grpo_loss(h, f64({b == 0 ? 2.0 : -2.0}, {1}), grpo_options(0.04), 6);
    loss += part.loss.item();
    sums += part.sums;
  }
  CHECK(loss == Approx(whole.loss.item()).epsilon(1e-14));
  CHECK(sums.tokens == 6);
  CHECK(sums.clipped == 2);
  CHECK(sums.loss == Approx(whole.sums.loss).epsilon(1e-14));
}

TEST_CASE("grpo_loss: float64 gradcheck over clipped and unclipped tokens", "[alignment][rl]") {
  // rho = exp(+-0.4, +-0.05, ...) on both sides of [0.8, 1.2], far from its ends.
  const std::vector<double> d = {0.4, -0.05, -0.4, 0.1, 0.3, -0.3, 0.0, 0.05, -0.6};
  std::vector<double> old(9), logp(9);
  for (int i = 0; i < 9; ++i) {
    old[i] = -0.5 - 0.3 * i;
    logp[i] = old[i] + d[i];
  }
  PolicyTokens p;
  p.logp_old = f64(old, {3, 3});
  p.ref = f64({-0.8, -0.4, -1.6, -1.0, -1.5, -2.0, -2.2, -2.5, -3.1}, {3, 3});
  p.mask = f64({1, 1, 1, 1, 1, 0, 1, 1, 1}, {3, 3});
  const Tensor adv = f64({1.3, -0.7, 0.4}, {3});
  const GradcheckResult r = gradcheck(
      [&](const std::vector<Variable>& v) {
        PolicyTokens q = p;
        q.logp = v[0];
        return grpo_loss(q, adv, grpo_options(0.04), 7).loss;
      },
      {Variable(f64(logp, {3, 3}), true)});
  INFO(r.message);
  CHECK(r.ok);
}

namespace {

// Two completions: rho = 1 everywhere (logp = logp_old), per-token advantages 0.5, -1, 2 | 1,
// -0.5 (row 1's t = 2 off the mask). Values: row 0 V_old 0.5, R 1.0, V 0.9, 0.6, 0.1;
// row 1 V_old 0.5, R 0.0, V 0.1, 1.0 (off the mask V 7 and R NaN, not read).
struct PpoCase {
  PolicyTokens p;
  Tensor adv;
  ValueTokens v;
};

PpoCase ppo_case() {
  PpoCase c;
  const Tensor lp = f64({-1.0, -0.4, -2.0, -0.6, -1.1, 40}, {2, 3});
  c.p.logp = Variable(lp, true);
  c.p.logp_old = lp.clone();
  c.p.ref = f64({-3.0, -0.1, -0.5, -2.0, -0.2, 0}, {2, 3});  // far from logp: k3 would show
  c.p.mask = f64({1, 1, 1, 1, 1, 0}, {2, 3});
  c.adv = f64({0.5, -1, 2, 1, -0.5, 9}, {2, 3});
  c.v.values = Variable(f64({0.9, 0.6, 0.1, 0.1, 1.0, 7}, {2, 3}), true);
  c.v.values_old = f64({0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, {2, 3});
  c.v.returns = f64({1.0, 1.0, 1.0, 0.0, 0.0, std::nan("")}, {2, 3});
  return c;
}

}  // namespace

TEST_CASE("ppo_loss: value clipping on both sides, the policy part without k3", "[alignment][rl]") {
  PpoCase c = ppo_case();
  RlOptions o;
  o.algo = RlAlgo::Ppo;
  const RlLossResult r = ppo_loss(c.p, c.adv, c.v, o, 5);
  // By hand, max((V - R)^2, (clip(V, 0.3, 0.7) - R)^2): row 0 (R = 1): V 0.9 -> max(0.01, 0.09)
  // = 0.09 (clipped); 0.6 -> 0.16 (inside); 0.1 -> max(0.81, 0.49) = 0.81. Row 1 (R = 0): V 0.1
  // -> max(0.01, 0.09) = 0.09 (clipped); 1.0 -> max(1.0, 0.49) = 1.0. Value loss 0.5 * 2.15 =
  // 1.075. Policy: -(0.5 - 1 + 2 + 1 - 0.5) = -2 (rho = 1, kl not added). Loss (-2 + 0.1 *
  // 1.075) / 5 = -0.3785.
  CHECK(r.loss.item() == Approx(-0.3785).epsilon(1e-14));
  CHECK(r.sums.value_loss == Approx(1.075).epsilon(1e-14));
  CHECK(r.sums.clipped == 0);
  CHECK(r.sums.tokens == 5);
  const auto m = as_map(r.sums.means());
  CHECK(m.at("value_loss") == Approx(0.215).epsilon(1e-14));
  CHECK(m.at("loss") == Approx(-1.8925 / 5).epsilon(1e-14));
  r.loss.backward();
  // d/dlogp = -A (rho = 1) / 5; d/dV = 0.1 * 0.5 * 2 (V - R) on the unclipped branch, 0 on the
  // clipped one: 0, -0.04, -0.09 | 0, 0.1, then / 5.
  const double want_lp[6] = {-0.1, 0.2, -0.4, -0.2, 0.1, 0};
  const double want_v[6] = {0, -0.008, -0.018, 0, 0.02, 0};
  const std::vector<double> glp = values(c.p.logp.grad()), gv = values(c.v.values.grad());
  for (int i = 0; i < 6; ++i) {
    CHECK(glp[i] == Approx(want_lp[i]).margin(1e-15));
    CHECK(gv[i] == Approx(want_v[i]).margin(1e-15));
  }
}

TEST_CASE("ppo_loss: float64 gradcheck of the policy and value parts", "[alignment][rl]") {
  PpoCase c = ppo_case();
  // Move the policy off rho = 1: rho = exp(0.35), exp(-0.1), exp(-0.45), exp(0.3), exp(0.05).
  const std::vector<double> d = {0.35, -0.1, -0.45, 0.3, 0.05, 0};
  std::vector<double> lp = values(c.p.logp_old);
  for (int i = 0; i < 6; ++i) lp[i] += d[i];
  RlOptions o;
  o.algo = RlAlgo::Ppo;
  o.vf_coef = 0.7;
  const GradcheckResult r = gradcheck(
      [&](const std::vector<Variable>& v) {
        PpoCase q = c;
        q.p.logp = v[0];
        q.v.values = v[1];
        return ppo_loss(q.p, q.adv, q.v, o, 5).loss;
      },
      {Variable(f64(lp, {2, 3}), true), Variable(c.v.values.data().clone(), true)});
  INFO(r.message);
  CHECK(r.ok);
}

TEST_CASE("rl options and losses refuse bad inputs in one line", "[alignment][rl]") {
  CHECK(parse_rl_algo("grpo") == RlAlgo::Grpo);
  CHECK(parse_rl_algo("ppo") == RlAlgo::Ppo);
  CHECK(std::string(rl_algo_name(RlAlgo::Ppo)) == "ppo");
  CHECK_THROWS_WITH(parse_rl_algo("reinforce"),
                    Catch::StartsWith("--algo") && Catch::Contains("\"reinforce\""));
  RlOptions o;
  CHECK_NOTHROW(check_rl_options(o));
  for (double eps : {0.0, 1.0, -0.1, std::nan("")}) {
    o.clip_ratio = eps;
    CHECK_THROWS_WITH(check_rl_options(o), Catch::StartsWith("--clip-ratio must be in (0, 1)"));
  }
  o = RlOptions();
  o.kl = -0.01;
  CHECK_THROWS_WITH(check_rl_options(o), Catch::StartsWith("--kl must be >= 0"));
  o = RlOptions();
  o.vf_coef = -1;
  CHECK_THROWS_WITH(check_rl_options(o), Catch::StartsWith("--vf-coef must be >= 0"));

  const PolicyTokens p = clip_case();
  CHECK_THROWS_WITH(grpo_loss(p, f64({2, -2, 1}, {3}), RlOptions(), 6),
                    Catch::Contains("grpo_loss: advantages must be [2], got [3]"));
  CHECK_THROWS_WITH(grpo_loss(p, f64({2, -2}, {2}), RlOptions(), 0),
                    Catch::Contains("must be > 0"));
  PolicyTokens bad = p;
  bad.ref = p.ref.reshape({4, 2});
  CHECK_THROWS_WITH(grpo_loss(bad, f64({2, -2}, {2}), RlOptions(), 6),
                    Catch::Contains("grpo_loss: ref must be [2, 4], got [4, 2]"));
  bad = p;
  bad.mask = f64({1, 1, 1, 0, 0, 1, 1, 3}, {2, 4});
  CHECK_THROWS_WITH(grpo_loss(bad, f64({2, -2}, {2}), RlOptions(), 6),
                    Catch::Contains("mask holds 3 at [1, 3]; expected 0 or 1"));
  PpoCase c = ppo_case();
  c.v.values = Variable(f64({1, 2, 3}, {1, 3}));
  CHECK_THROWS_WITH(ppo_loss(c.p, c.adv, c.v, RlOptions(), 5),
                    Catch::Contains("ppo_loss: values must be [2, 3]"));
  c = ppo_case();
  CHECK_THROWS_WITH(ppo_loss(c.p, f64({1, 2}, {2}), c.v, RlOptions(), 5),
                    Catch::Contains("ppo_loss: advantages must be [2, 3], got [2]"));
}
