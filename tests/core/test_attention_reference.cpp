// The reference attention kernel (core/kernels/attention/reference.h) against
// computations independent of it: closed forms of tiny cases worked by hand
// (causal, sliding window, softcap), central finite differences of
// L = sum(out * dout) for the backward (GQA, window, softcap, S > T), GQA as
// MHA over repeated kv heads, and float32 against float64.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/kernels/attention/reference.h"
#include "float64_values.h"

using namespace ember;
using kernels::AttentionParams;

namespace {

using ember::testing::f64;
using ember::testing::values;

// L = sum(out * dout): its gradients are what the backward computes for dout.
double loss(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout, const AttentionParams& p) {
  const auto out = values(kernels::attention_reference_forward(q, k, v, p).out), g = values(dout);
  double l = 0;
  for (size_t i = 0; i < out.size(); ++i) l += out[i] * g[i];
  return l;
}

// Central differences of L in every element of inputs[which].
std::vector<double> numeric_grad(std::vector<Tensor> inputs, int which, const Tensor& dout,
                                 const AttentionParams& p) {
  std::vector<double> x = values(inputs[which]), grad(x.size());
  const Shape shape = inputs[which].shape();
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    inputs[which] = f64(x, shape);
    const double up = loss(inputs[0], inputs[1], inputs[2], dout, p);
    x[i] = saved - h;
    inputs[which] = f64(x, shape);
    const double down = loss(inputs[0], inputs[1], inputs[2], dout, p);
    x[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

}  // namespace

TEST_CASE("attention reference: a causal case by hand", "[attention]") {
  // B 1, T = S = 2, one head, D 1, scale 1. Row 0 sees key 0 only; row 1 sees both.
  const Tensor q = f64({1, 2}, {1, 2, 1, 1}), k = f64({0.5, -1}, {1, 2, 1, 1}), v = f64({3, 5}, {1, 2, 1, 1});
  const Tensor dout = f64({0.5, 2}, {1, 2, 1, 1});
  const AttentionParams p{1.0, 0, 0.0};
  // Row 1's scores: 2 * 0.5 = 1 and 2 * -1 = -2.
  const double z = std::exp(1.0) + std::exp(-2.0), p0 = std::exp(1.0) / z, p1 = std::exp(-2.0) / z;
  const double out1 = 3 * p0 + 5 * p1;
  const kernels::AttentionResult f = kernels::attention_reference_forward(q, k, v, p);
  CHECK(values(f.out)[0] == Approx(3).epsilon(1e-14));
  CHECK(values(f.out)[1] == Approx(out1).epsilon(1e-14));
  CHECK(values(f.lse)[0] == Approx(0.5).epsilon(1e-14));
  CHECK(values(f.lse)[1] == Approx(std::log(z)).epsilon(1e-14));
  // dS of row 1: P_s (dout_1 v_s - dout_1 out_1); row 0's is 0 (one key: P = 1, dP = delta).
  const double ds0 = p0 * (2 * 3 - 2 * out1), ds1 = p1 * (2 * 5 - 2 * out1);
  const kernels::AttentionGrads g = kernels::attention_reference_backward(q, k, v, dout, p);
  const std::vector<double> dq = values(g.dq), dk = values(g.dk), dv = values(g.dv);
  CHECK(dq[0] == Approx(0).margin(1e-14));
  CHECK(dq[1] == Approx(ds0 * 0.5 + ds1 * -1).epsilon(1e-13));
  CHECK(dk[0] == Approx(ds0 * 2).epsilon(1e-13));
  CHECK(dk[1] == Approx(ds1 * 2).epsilon(1e-13));
  CHECK(dv[0] == Approx(0.5 + 2 * p0).epsilon(1e-14));
  CHECK(dv[1] == Approx(2 * p1).epsilon(1e-14));
}

TEST_CASE("attention reference: window and softcap by hand", "[attention]") {
  // T 2 queries over S 3 keys (positions 1, 2), window 2, softcap 1, scale 0.5, D 1.
  const Tensor q = f64({2, -1}, {1, 2, 1, 1}), k = f64({1, 3, -2}, {1, 3, 1, 1}), v = f64({7, 1, 4}, {1, 3, 1, 1});
  const AttentionParams p{0.5, 2, 1.0};
  const kernels::AttentionResult f = kernels::attention_reference_forward(q, k, v, p);
  auto score = [](double qd, double kd) { return std::tanh(0.5 * qd * kd); };  // c tanh(s / c), c = 1
  // Row 0 (position 1) sees keys 0, 1; row 1 (position 2) sees keys 1, 2 (key 0 is out of the window).
  const double a0 = std::exp(score(2, 1)), a1 = std::exp(score(2, 3));
  const double b1 = std::exp(score(-1, 3)), b2 = std::exp(score(-1, -2));
  CHECK(values(f.out)[0] == Approx((7 * a0 + 1 * a1) / (a0 + a1)).epsilon(1e-14));
  CHECK(values(f.out)[1] == Approx((1 * b1 + 4 * b2) / (b1 + b2)).epsilon(1e-14));
  CHECK(values(f.lse)[0] == Approx(std::log(a0 + a1)).epsilon(1e-14));
  CHECK(values(f.lse)[1] == Approx(std::log(b1 + b2)).epsilon(1e-14));
}

TEST_CASE("attention reference: the backward is the forward's derivative", "[attention]") {
  // GQA (4 query heads over 2 kv heads), S > T, window and softcap; B 2.
  const std::vector<Tensor> in = {Tensor::randn({2, 3, 4, 3}, 1, 0, DType::Float64),
                                  Tensor::randn({2, 5, 2, 3}, 2, 0, DType::Float64),
                                  Tensor::randn({2, 5, 2, 3}, 3, 0, DType::Float64)};
  const Tensor dout = Tensor::randn({2, 3, 4, 3}, 4, 0, DType::Float64);
  for (const AttentionParams p : {AttentionParams{0.6, 0, 0.0}, AttentionParams{0.9, 3, 1.7}}) {
    INFO("window " << p.window << " softcap " << p.softcap);
    const kernels::AttentionGrads g = kernels::attention_reference_backward(in[0], in[1], in[2], dout, p);
    const Tensor* analytic[3] = {&g.dq, &g.dk, &g.dv};
    for (int which = 0; which < 3; ++which) {
      const std::vector<double> want = numeric_grad(in, which, dout, p), got = values(*analytic[which]);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("input " << which << " element " << i);
        CHECK(got[i] == Approx(want[i]).margin(1e-8));
      }
    }
  }
}

TEST_CASE("attention reference: GQA is MHA over repeated kv heads", "[attention]") {
  const int64_t B = 2, T = 4, S = 6, Hq = 4, Hkv = 2, D = 3;
  const Tensor q = Tensor::randn({B, T, Hq, D}, 5, 0, DType::Float64);
  const Tensor k = Tensor::randn({B, S, Hkv, D}, 6, 0, DType::Float64);
  const Tensor v = Tensor::randn({B, S, Hkv, D}, 7, 0, DType::Float64);
  const Tensor dout = Tensor::randn({B, T, Hq, D}, 8, 0, DType::Float64);
  // Query head h reads kv head h / 2: repeat each kv head twice.
  auto repeat = [&](const Tensor& t) {
    const std::vector<double> x = values(t);
    std::vector<double> r(B * S * Hq * D);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t h = 0; h < Hq; ++h)
          for (int64_t d = 0; d < D; ++d) r[((b * S + s) * Hq + h) * D + d] = x[((b * S + s) * Hkv + h / 2) * D + d];
    return f64(r, {B, S, Hq, D});
  };
  const AttentionParams p{0.7, 3, 0.0};
  const Tensor km = repeat(k), vm = repeat(v);
  CHECK(values(kernels::attention_reference_forward(q, k, v, p).out) ==
        values(kernels::attention_reference_forward(q, km, vm, p).out));
  const kernels::AttentionGrads g = kernels::attention_reference_backward(q, k, v, dout, p);
  const kernels::AttentionGrads m = kernels::attention_reference_backward(q, km, vm, dout, p);
  CHECK(values(g.dq) == values(m.dq));
  // A shared kv head's gradient is the sum over its two query heads.
  const std::vector<double> dk = values(g.dk), dv = values(g.dv), mdk = values(m.dk), mdv = values(m.dv);
  for (int64_t i = 0; i < B * S * Hkv; ++i)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t mi = (i / Hkv * Hq + i % Hkv * 2) * D + d;
      CHECK(dk[i * D + d] == Approx(mdk[mi] + mdk[mi + D]).epsilon(1e-14));
      CHECK(dv[i * D + d] == Approx(mdv[mi] + mdv[mi + D]).epsilon(1e-14));
    }
}

TEST_CASE("attention reference: float32 agrees with float64", "[attention]") {
  const Tensor q = Tensor::randn({1, 9, 2, 8}, 9), k = Tensor::randn({1, 12, 1, 8}, 10);
  const Tensor v = Tensor::randn({1, 12, 1, 8}, 11), dout = Tensor::randn({1, 9, 2, 8}, 12);
  const AttentionParams p{0.35, 5, 2.0};
  auto to64 = [](const Tensor& t) { return t.to(DType::Float64); };
  const kernels::AttentionResult f32 = kernels::attention_reference_forward(q, k, v, p);
  const kernels::AttentionResult f64r = kernels::attention_reference_forward(to64(q), to64(k), to64(v), p);
  const kernels::AttentionGrads g32 = kernels::attention_reference_backward(q, k, v, dout, p);
  const kernels::AttentionGrads g64 = kernels::attention_reference_backward(to64(q), to64(k), to64(v), to64(dout), p);
  CHECK(f32.out.dtype() == DType::Float32);
  const std::pair<const Tensor*, const Tensor*> pairs[] = {
      {&f32.out, &f64r.out}, {&f32.lse, &f64r.lse}, {&g32.dq, &g64.dq}, {&g32.dk, &g64.dk}, {&g32.dv, &g64.dv}};
  for (const auto& [lo, hi] : pairs) {
    const std::vector<double> a = values(*lo), b = values(*hi);
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(2e-5));
  }
}
