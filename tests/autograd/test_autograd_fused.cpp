// The fused transformer ops (rms_norm, layer_norm, rope, attention,
// cross_entropy, dropout): forward against plain reference loops written
// here, and float64 gradchecks of every input.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "autograd/gradcheck.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"

using namespace ember;

static Variable randv(const Shape& s, uint64_t seed, DType dt = DType::Float64, bool grad = true) {
  return Variable(Tensor::randn(s, seed, 0, dt), grad);
}

static void require_close(const Tensor& got, const std::vector<double>& want, double tol) {
  const auto g = got.to_vector<double>();
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i);
    REQUIRE(g[i] == Approx(want[i]).margin(tol));
  }
}

static void require_gradcheck(const GradcheckFn& fn, const std::vector<Variable>& in) {
  const GradcheckResult r = gradcheck(fn, in);
  INFO(r.message);
  REQUIRE(r.ok);
}

TEST_CASE("rms_norm matches the formula and its gradients", "[fused]") {
  Variable x = randv({3, 7}, 1), w = randv({7}, 2);
  const double eps = 1e-5;
  const Tensor y = rms_norm(x, w, eps).data();
  std::vector<double> want;
  for (int64_t n = 0; n < 3; ++n) {
    double ss = 0;
    for (int64_t c = 0; c < 7; ++c) ss += x.data().at({n, c}) * x.data().at({n, c});
    const double r = 1 / std::sqrt(ss / 7 + eps);
    for (int64_t c = 0; c < 7; ++c) want.push_back(x.data().at({n, c}) * r * w.data().at({c}));
  }
  require_close(y, want, 1e-12);
  require_gradcheck([](const std::vector<Variable>& v) { return rms_norm(v[0], v[1], 1e-5); }, {x, w});
  // Non-contiguous input, 3-D.
  Variable xt = randv({5, 2, 4}, 3);
  Variable w4 = randv({2}, 4);
  require_gradcheck([](const std::vector<Variable>& v) { return rms_norm(transpose(v[0], 1, 2), v[1], 1e-5); },
                    {xt, w4});
}

TEST_CASE("layer_norm matches PyTorch's formula and its gradients", "[fused]") {
  Variable x = randv({4, 6}, 5), w = randv({6}, 6), b = randv({6}, 7);
  const Tensor y = layer_norm(x, w, b, 1e-5).data();
  std::vector<double> want;
  for (int64_t n = 0; n < 4; ++n) {
    double s = 0, v = 0;
    for (int64_t c = 0; c < 6; ++c) s += x.data().at({n, c});
    const double mu = s / 6;
    for (int64_t c = 0; c < 6; ++c) v += std::pow(x.data().at({n, c}) - mu, 2);
    const double r = 1 / std::sqrt(v / 6 + 1e-5);
    for (int64_t c = 0; c < 6; ++c) {
      want.push_back((x.data().at({n, c}) - mu) * r * w.data().at({c}) + b.data().at({c}));
    }
  }
  require_close(y, want, 1e-12);
  require_gradcheck([](const std::vector<Variable>& v) { return layer_norm(v[0], v[1], v[2], 1e-5); },
                    {x, w, b});
  require_gradcheck([](const std::vector<Variable>& v) { return layer_norm(v[0], v[1], Variable(), 1e-5); },
                    {x, w});
}

TEST_CASE("rope rotates pairs (i, i + D/2) by p * theta^(-2i/D)", "[fused]") {
  const int64_t T = 5, D = 6, h = 3;
  Tensor cos = Tensor::empty({8, h}, DType::Float64), sin = Tensor::empty({8, h}, DType::Float64);
  for (int64_t p = 0; p < 8; ++p) {
    for (int64_t i = 0; i < h; ++i) {
      const double a = p * std::pow(10000.0, -2.0 * i / D);
      cos.set({p, i}, std::cos(a));
      sin.set({p, i}, std::sin(a));
    }
  }
  Variable x = randv({2, T, 2, D}, 8);
  const int64_t pos0 = 2;
  const Tensor y = rope(x, cos, sin, pos0).data();
  std::vector<double> want;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t hd = 0; hd < 2; ++hd)
        for (int64_t i = 0; i < D; ++i) {
          const int64_t j = i % h;
          const double a = (pos0 + t) * std::pow(10000.0, -2.0 * j / D);
          const double x1 = x.data().at({b, t, hd, j}), x2 = x.data().at({b, t, hd, j + h});
          want.push_back(i < h ? x1 * std::cos(a) - x2 * std::sin(a) : x2 * std::cos(a) + x1 * std::sin(a));
        }
  require_close(y, want, 1e-12);
  require_gradcheck([&](const std::vector<Variable>& v) { return rope(v[0], cos, sin, pos0); }, {x});
  CHECK_THROWS_WITH(rope(x, cos, sin, 4), Catch::Contains("max_seq_len"));
}

// Reference attention: materialised scores, mask, softmax, weights . v.
static std::vector<double> reference_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                               double scale, int64_t window, double cap) {
  const int64_t B = q.size(0), T = q.size(1), Hq = q.size(2), D = q.size(3);
  const int64_t S = k.size(1), Hkv = k.size(2);
  std::vector<double> out(static_cast<size_t>(B * T * Hq * D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / (Hq / Hkv);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t pos = S - T + t;
        std::vector<double> s(S, -std::numeric_limits<double>::infinity());
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < S; ++j) {
          const bool visible = j <= pos && (window == 0 || pos - j < window);
          if (!visible) continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q.at({b, t, h, d}) * k.at({b, j, g, d});
          dot *= scale;
          if (cap > 0) dot = cap * std::tanh(dot / cap);
          s[j] = dot;
          m = std::max(m, dot);
        }
        double z = 0;
        for (int64_t j = 0; j < S; ++j) z += std::exp(s[j] - m);
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < S; ++j) acc += std::exp(s[j] - m) / z * v.at({b, j, g, d});
          out[((b * T + t) * Hq + h) * D + d] = acc;
        }
      }
    }
  return out;
}

TEST_CASE("attention matches a materialised reference, and its gradients", "[fused]") {
  struct Case {
    int64_t Hq, Hkv, T, S, window;
    double cap;
  };
  for (const Case c : {Case{2, 2, 5, 5, 0, 0}, Case{4, 2, 6, 6, 0, 0}, Case{3, 1, 4, 4, 0, 0},
                       Case{2, 1, 7, 7, 3, 0}, Case{2, 2, 5, 5, 0, 0.7}, Case{2, 1, 3, 6, 2, 1.5}}) {
    INFO("Hq " << c.Hq << " Hkv " << c.Hkv << " T " << c.T << " S " << c.S << " window " << c.window
               << " cap " << c.cap);
    Variable q = randv({2, c.T, c.Hq, 4}, 10), k = randv({2, c.S, c.Hkv, 4}, 11),
             v = randv({2, c.S, c.Hkv, 4}, 12);
    const double scale = 0.5;
    const Tensor y = attention(q, k, v, scale, c.window, c.cap).data();
    require_close(y, reference_attention(q.data(), k.data(), v.data(), scale, c.window, c.cap), 1e-12);
    const int64_t window = c.window;
    const double cap = c.cap;
    require_gradcheck([=](const std::vector<Variable>& in) {
      return attention(in[0], in[1], in[2], scale, window, cap);
    }, {q, k, v});
  }
}

TEST_CASE("attention in float32 agrees with float64", "[fused]") {
  Variable q = randv({2, 33, 4, 16}, 20), k = randv({2, 33, 2, 16}, 21), v = randv({2, 33, 2, 16}, 22);
  const Tensor y64 = attention(q, k, v, 0.25).data();
  const Tensor y32 = attention(Variable(q.data().to(DType::Float32)), Variable(k.data().to(DType::Float32)),
                               Variable(v.data().to(DType::Float32)), 0.25).data();
  require_close(y32, y64.to_vector<double>(), 1e-5);
}

TEST_CASE("cross_entropy with z-loss: values and gradients", "[fused]") {
  Variable logits = randv({5, 7}, 30);
  const Tensor targets = Tensor::from_vector<int64_t>({0, 6, 3, 3, 1});
  const double coef = 0.3;
  CrossEntropyResult r = cross_entropy(logits, targets, coef);
  double ce = 0, z = 0;
  for (int64_t n = 0; n < 5; ++n) {
    double m = -1e300;
    for (int64_t i = 0; i < 7; ++i) m = std::max(m, logits.data().at({n, i}));
    double s = 0;
    for (int64_t i = 0; i < 7; ++i) s += std::exp(logits.data().at({n, i}) - m);
    const double lse = m + std::log(s);
    ce += lse - logits.data().at({n, static_cast<int64_t>(targets.at({n}))});
    z += lse * lse;
  }
  CHECK(r.ce == Approx(ce / 5).epsilon(1e-12));
  CHECK(r.z == Approx(z / 5).epsilon(1e-12));
  CHECK(r.loss.item() == Approx(ce / 5 + coef * z / 5).epsilon(1e-12));
  require_gradcheck([&](const std::vector<Variable>& v) { return cross_entropy(v[0], targets, coef).loss; },
                    {logits});
  CHECK_THROWS_WITH(cross_entropy(logits, Tensor::from_vector<int64_t>({0, 7, 0, 0, 0})),
                    Catch::Contains("target 7"));
}

TEST_CASE("dropout keeps 1 - p of the elements, scaled, and is reproducible", "[fused]") {
  Variable x(Tensor::ones({1000}, DType::Float64), true);
  const Tensor y = dropout(x, 0.25, 5, 0).data();
  int kept = 0;
  for (double v : y.to_vector<double>()) {
    if (v != 0) {
      ++kept;
      CHECK(v == Approx(1 / 0.75));
    }
  }
  CHECK(kept > 700);
  CHECK(kept < 800);
  CHECK(dropout(x, 0.25, 5, 0).data().to_vector<double>() == y.to_vector<double>());
  CHECK(dropout(x, 0.25, 5, 1000).data().to_vector<double>() != y.to_vector<double>());
  require_gradcheck([](const std::vector<Variable>& v) { return dropout(v[0], 0.5, 9, 0); },
                    {randv({3, 4}, 31)});
}
