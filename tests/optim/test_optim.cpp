// AdamW, SGD, schedules and clipping against values computed by PyTorch and
// by hand in tests/fixtures/make_optim_expected.py (the numbers are pasted here),
// and AdamW with parameters that skip steps against a float64 torch loop.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "core/kernels/bf16.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "optim/sgd.h"

using namespace ember;
using namespace ember::optim;

static void check_values(const Tensor& t, const std::vector<double>& want, double rel) {
  const auto got = t.to_vector<double>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).epsilon(rel).margin(1e-15));
  }
}

TEST_CASE("AdamW matches torch.optim.AdamW over three steps", "[optim]") {
  for (DType dt : {DType::Float64, DType::Float32}) {
    Variable w(Tensor::from_vector<double>({0.5, -1.0, 2.0, 0.0, 0.25, -0.75}, {2, 3}).to(dt), true);
    Variable b(Tensor::from_vector<double>({0.1, -0.2, 0.3}).to(dt), true);
    auto groups = decay_groups({{"w", w}, {"b", b}}, 0.1);
    REQUIRE(groups[0].params.size() == 1);  // w decays, b does not
    AdamW opt(groups, {0.9, 0.95, 1e-8});
    const std::vector<std::vector<double>> gw = {{0.3, -0.1, 0.2, 1.0, 0.0, -0.5},
                                                 {-0.2, 0.4, 0.1, 0.5, 0.5, 0.5},
                                                 {0.0, 0.0, 1.0, -1.0, 2.0, 0.1}};
    const std::vector<std::vector<double>> gb = {{0.05, -0.5, 1.5}, {0.2, 0.2, -0.2}, {-1.0, 0.0, 0.3}};
    const std::vector<double> lrs = {0.01, 0.005, 0.02};
    for (int s = 0; s < 3; ++s) {
      w.set_grad(Tensor::from_vector<double>(gw[s], {2, 3}).to(dt));
      b.set_grad(Tensor::from_vector<double>(gb[s]).to(dt));
      opt.step(lrs[s]);
    }
    const double rel = dt == DType::Float64 ? 1e-12 : 1e-5;
    check_values(w.data(), {0.4852778605142308, -0.997956211748993, 1.9630834921245899,
                            -0.016877420203031502, 0.23062351988463217, -0.7402928116656651}, rel);
    check_values(b.data(), {0.09515253832180849, -0.18279387845310258, 0.2758104059293088}, rel);
    check_values(opt.exp_avg_sq(0, 0), {0.005961250000000005, 0.008051250000000008, 0.05228000000000005,
                                        0.1070000000000001, 0.2118750000000002, 0.02365625000000002}, rel);
    CHECK(opt.steps() == 3);
  }
}

TEST_CASE("AdamW state round-trips through state_dict", "[optim]") {
  Variable w(Tensor::ones({2, 2}, DType::Float64), true);
  AdamW a(decay_groups({{"w", w}}, 0.1));
  w.set_grad(Tensor::full({2, 2}, 0.5, DType::Float64));
  a.step(0.1);
  Variable w2(w.data().clone(), true);
  AdamW b(decay_groups({{"w", w2}}, 0.1));
  b.load_state_dict(a.state_dict(), a.steps());
  w.set_grad(Tensor::full({2, 2}, -0.25, DType::Float64));
  w2.set_grad(Tensor::full({2, 2}, -0.25, DType::Float64));
  a.step(0.1);
  b.step(0.1);
  CHECK(w.data().to_vector<double>() == w2.data().to_vector<double>());
  auto bad = a.state_dict();
  bad.erase("w/exp_avg");
  CHECK_THROWS_WITH(b.load_state_dict(bad, 1), Catch::Contains("w/exp_avg"));
}

namespace {

// torch.optim.AdamW as its documentation states the algorithm, in float64,
// for one parameter: a step without a gradient (grad None) is skipped whole,
// weight decay included, and does not advance the parameter's own step;
// otherwise step += 1 and
//   p -= lr wd p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= lr (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps).
struct TorchAdamWParam {
  std::vector<double> p, m, v;
  double wd;
  int64_t step = 0;
  TorchAdamWParam(std::vector<double> init, double weight_decay)
      : p(std::move(init)), m(p.size(), 0.0), v(p.size(), 0.0), wd(weight_decay) {}
  void update(const std::vector<double>* g, double lr, double b1, double b2, double eps) {
    if (!g) return;
    ++step;
    const double bc1 = 1 - std::pow(b1, double(step)), bc2 = 1 - std::pow(b2, double(step));
    for (size_t k = 0; k < p.size(); ++k) {
      p[k] -= lr * wd * p[k];
      m[k] = b1 * m[k] + (1 - b1) * (*g)[k];
      v[k] = b2 * v[k] + (1 - b2) * (*g)[k] * (*g)[k];
      p[k] -= lr * (m[k] / bc1) / (std::sqrt(v[k] / bc2) + eps);
    }
  }
};

}  // namespace

TEST_CASE("AdamW counts steps per parameter and skips one without a gradient, as torch",
          "[optim]") {
  // w: a gradient every step; e (decayed, like a MoE expert's weight): none
  // in steps 0 and 3; b (not decayed): none in steps 2 and 3.
  const std::vector<std::vector<int>> has = {{1, 1, 1, 1, 1, 1}, {0, 1, 1, 0, 1, 1},
                                             {1, 1, 0, 0, 1, 1}};
  const std::vector<double> init_w = {0.5, -1.0, 2.0, 0.25}, init_e = {0.3, -0.6, 0.9, -1.2},
                            init_b = {0.1, -0.2, 0.3};
  for (DType dt : {DType::Float64, DType::Float32}) {
    INFO(dtype_name(dt));
    Variable w(Tensor::from_vector(init_w, {2, 2}).to(dt), true);
    Variable e(Tensor::from_vector(init_e, {2, 2}).to(dt), true);
    Variable b(Tensor::from_vector(init_b).to(dt), true);
    const std::vector<Variable> params = {w, e, b};
    AdamW opt(decay_groups({{"w", w}, {"e", e}, {"b", b}}, 0.1), {0.9, 0.95, 1e-8});
    std::vector<TorchAdamWParam> ref = {{init_w, 0.1}, {init_e, 0.1}, {init_b, 0.0}};
    for (int s = 0; s < 6; ++s) {
      const double lr = 0.01 * (1 + s % 3);
      std::vector<std::vector<double>> before;
      for (size_t k = 0; k < params.size(); ++k) {
        before.push_back(params[k].data().to_vector<double>());
        std::vector<double> g(before[k].size());
        for (size_t j = 0; j < g.size(); ++j) g[j] = std::sin(1.0 + 3.0 * s + 0.7 * j + 5.0 * k);
        const Shape shape = params[k].shape();
        Variable p = params[k];
        if (has[k][s]) {
          p.set_grad(Tensor::from_vector(g, shape).to(dt));
        } else {
          p.zero_grad();
        }
        ref[k].update(has[k][s] ? &g : nullptr, lr, 0.9, 0.95, 1e-8);
      }
      opt.step(lr);
      for (size_t k = 0; k < params.size(); ++k) {
        INFO("step " << s << " parameter " << k);
        // No gradient: untouched, weight decay included.
        if (!has[k][s]) CHECK(params[k].data().to_vector<double>() == before[k]);
      }
    }
    const double rel = dt == DType::Float64 ? 1e-12 : 1e-5;
    check_values(w.data(), ref[0].p, rel);
    check_values(e.data(), ref[1].p, rel);
    check_values(b.data(), ref[2].p, rel);
    check_values(opt.exp_avg(0, 1), ref[1].m, rel);
    CHECK(opt.steps() == 6);
    CHECK(opt.param_steps() == std::map<std::string, int64_t>{{"w", 6}, {"e", 4}, {"b", 4}});
  }
}

TEST_CASE("SGD with Nesterov momentum matches torch.optim.SGD", "[optim]") {
  Variable p(Tensor::from_vector<double>({1.0, -2.0}), true);
  ParamGroup g;
  g.params = {p};
  g.names = {"p"};
  g.weight_decay = 0.01;
  SGD opt({g}, {0.9, true});
  for (auto grad : {std::vector<double>{0.5, 0.5}, std::vector<double>{-1.0, 0.25}}) {
    p.set_grad(Tensor::from_vector<double>(grad));
    opt.step(0.1);
  }
  check_values(p.data(), {1.05007411, -2.17360672}, 1e-8);
}

TEST_CASE("clip_grad_norm returns the pre-clip norm and scales like PyTorch", "[optim]") {
  Variable a(Tensor::zeros({3}, DType::Float64), true), c(Tensor::zeros({2}, DType::Float64), true);
  a.set_grad(Tensor::from_vector<double>({3.0, 0.0, 4.0}));
  c.set_grad(Tensor::from_vector<double>({12.0, 0.0}));
  CHECK(clip_grad_norm({a, c}, 1.0) == 13.0);
  check_values(a.grad(), {0.23076921301775288, 0.0, 0.3076922840236705}, 1e-12);
  check_values(c.grad(), {0.9230768520710115, 0.0}, 1e-12);
  // Below the threshold nothing changes; max_norm 0 only measures.
  CHECK(clip_grad_norm({a, c}, 5.0) == Approx(1.0).epsilon(1e-6));
  CHECK(clip_grad_norm({a, c}, 0) == Approx(1.0).epsilon(1e-6));
  check_values(c.grad(), {0.9230768520710115, 0.0}, 1e-12);
}

TEST_CASE("schedules are pure functions of the step", "[optim]") {
  Schedule cos{"cosine", 1e-3, 1e-4, 10, 100, 0};
  const std::vector<int64_t> steps = {0, 4, 9, 10, 37, 99, 100, 150};
  const std::vector<double> want = {0.0001, 0.0005, 0.001, 0.001, 0.000814503363531613,
                                    0.00010027412784140692, 0.0001, 0.0001};
  for (size_t i = 0; i < steps.size(); ++i) {
    INFO("step " << steps[i]);
    CHECK(lr_at(cos, steps[i]) == Approx(want[i]).epsilon(1e-12));
  }
  // Hand-computed: warmup 2 then constant / linear / wsd over total 10.
  CHECK(lr_at({"constant", 1.0, 0.0, 2, 10, 0}, 0) == 0.5);
  CHECK(lr_at({"constant", 1.0, 0.0, 2, 10, 0}, 7) == 1.0);
  CHECK(lr_at({"linear", 1.0, 0.2, 2, 10, 0}, 2) == 1.0);
  CHECK(lr_at({"linear", 1.0, 0.2, 2, 10, 0}, 6) == Approx(0.6));
  CHECK(lr_at({"linear", 1.0, 0.2, 2, 10, 0}, 10) == Approx(0.2));
  CHECK(lr_at({"wsd", 1.0, 0.0, 2, 10, 4}, 5) == 1.0);
  CHECK(lr_at({"wsd", 1.0, 0.0, 2, 10, 4}, 6) == 1.0);
  CHECK(lr_at({"wsd", 1.0, 0.0, 2, 10, 4}, 8) == Approx(0.5));
  CHECK(lr_at({"wsd", 1.0, 0.0, 2, 10, 4}, 10) == Approx(0.0));
  CHECK_THROWS_WITH(lr_at({"step", 1.0, 0.0, 0, 10, 0}, 3), Catch::Contains("step"));
}

TEST_CASE("clipping fused into the update (grad_scale) equals clipping the gradients first", "[optim]") {
  // Two copies of the same parameters and gradients: one clipped in place by
  // clip_grad_norm then stepped, one stepped with grad_scale = clip_coefficient.
  // float64: the same products in the same order, so the results are equal;
  // tensors of different sizes exercise the split of the one OpenMP region.
  auto make = [](uint64_t seed, int64_t n) {
    Variable v(Tensor::randn({n}, seed, 0, DType::Float64), true);
    v.set_grad(Tensor::randn({n}, seed + 100, 0, DType::Float64, 0.0, 3.0));
    return v;
  };
  for (auto kind : {"adamw", "sgd"}) {
    std::vector<Variable> a, b;
    for (int64_t i = 0; i < 4; ++i) {
      const int64_t n = i == 2 ? 70001 : 5 + 3 * i;
      a.push_back(make(10 + i, n));
      b.push_back(make(10 + i, n));
    }
    const double max_norm = 2.0;
    const double norm = grad_norm(b);
    const double coef = clip_coefficient(norm, max_norm);
    CHECK(clip_grad_norm(a, max_norm) == Approx(norm).epsilon(1e-12));
    REQUIRE(coef < 1.0);
    CHECK(clip_coefficient(norm, 0.0) == 1.0);
    CHECK(clip_coefficient(0.5, max_norm) == 1.0);
    std::unique_ptr<Optimizer> oa, ob;
    if (std::string(kind) == "adamw") {
      oa = std::make_unique<AdamW>(std::vector<ParamGroup>{{a, {}, 1.0, 0.1}});
      ob = std::make_unique<AdamW>(std::vector<ParamGroup>{{b, {}, 1.0, 0.1}});
    } else {
      oa = std::make_unique<SGD>(std::vector<ParamGroup>{{a, {}, 1.0, 0.1}}, SGDOptions{0.9, false});
      ob = std::make_unique<SGD>(std::vector<ParamGroup>{{b, {}, 1.0, 0.1}}, SGDOptions{0.9, false});
    }
    oa->step(0.01);
    ob->step(0.01, coef);
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(kind << " tensor " << i);
      CHECK(a[i].data().to_vector<double>() == b[i].data().to_vector<double>());
    }
  }
}

// The bits of a bfloat16 tensor.
static std::vector<uint16_t> bf16_bits(const Tensor& t) {
  const auto* p = static_cast<const uint16_t*>(t.raw_data());
  return {p, p + t.numel()};
}

TEST_CASE("AdamW under bf16 training refreshes the weights' bfloat16 copies in its update", "[optim][bf16]") {
  // w is read by a bf16 matmul, b by nothing bf16: after the step, w's copy is published and equals
  // to_bfloat16 of the updated w bit for bit; the next region reads it instead of converting.
  Variable w(Tensor::randn({16, 24}, 3), true), b(Tensor::randn({24}, 4), true);
  const Variable x(Tensor::randn({5, 16}, 5));
  AdamW opt(decay_groups({{"w", w}, {"b", b}}, 0.1), {0.9, 0.95, 1e-8});
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    {
      AutocastGuard bf16(DType::BFloat16);
      sum(matmul(x, w) + b).backward();
    }
    CHECK(autocast_rounded(w.data()));
    CHECK_FALSE(autocast_rounded(b.data()));
    // The plain float32 update of w (adamw_update_span, no copy) on copies of its state.
    Tensor p = w.data().clone(), m = opt.exp_avg(0, 0).clone(), v = opt.exp_avg_sq(0, 0).clone();
    adamw_update_span<float>(p.data<float>(), w.grad().data<float>(), m.data<float>(), v.data<float>(), p.numel(),
                             1e-2, 0.1, opt.options(), step + 1);
    opt.step(1e-2);
    CHECK(w.data().to_vector<float>() == p.to_vector<float>());  // the copy changes no float32 bit
    CHECK(opt.exp_avg(0, 0).to_vector<float>() == m.to_vector<float>());
    Tensor copy;
    {
      AutocastGuard bf16(DType::BFloat16);
      copy = autocast_to_bfloat16(w);
    }
    CHECK(bf16_bits(copy) == bf16_bits(kernels::to_bfloat16(w.data())));
    // Another region (the per-region cache dropped) gets the same published buffer, while the first
    // result is still alive: nothing was converted.
    AutocastGuard bf16(DType::BFloat16);
    CHECK(autocast_to_bfloat16(w).raw_data() == copy.raw_data());
  }
  // A parameter written after the step (its version bumps) is converted afresh, not served stale.
  w.data().fill_(0.5);
  AutocastGuard bf16(DType::BFloat16);
  CHECK(bf16_bits(autocast_to_bfloat16(w)) == bf16_bits(kernels::to_bfloat16(w.data())));
}

TEST_CASE("AdamW in float32 training keeps no bfloat16 copies", "[optim][bf16]") {
  Variable w(Tensor::randn({8, 8}, 6), true);
  const Variable x(Tensor::randn({3, 8}, 7));
  AdamW opt({{{w}, {}, 1.0, 0.0}});
  sum(matmul(x, w)).backward();
  CHECK_FALSE(autocast_rounded(w.data()));
  opt.step(1e-2);
  AutocastGuard bf16(DType::BFloat16);
  // Nothing published: a fresh conversion (cached by this region from now on).
  CHECK(bf16_bits(autocast_to_bfloat16(w)) == bf16_bits(kernels::to_bfloat16(w.data())));
}
