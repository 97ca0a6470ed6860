// The weighted cross_entropy (docs/model.md#loss-of-a-step): value against a plain
// loop, float64 gradchecks with a 0/1 mask and padding rows, micro-batch accumulation
// equal to the whole batch, the all-zero mask and the normaliser's check.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"

using namespace ember;

namespace {

constexpr int64_t kRows = 4, kT = 5, kV = 7;

// Rows of trained lengths 5, 2, 0 (all padding) and 3, with the last positions padding.
Tensor make_mask() {
  const int lengths[kRows] = {5, 2, 0, 3};
  std::vector<float> m(kRows * kT, 0.f);
  for (int64_t b = 0; b < kRows; ++b)
    for (int64_t t = 0; t < lengths[b]; ++t) m[b * kT + t] = 1.f;
  return Tensor::from_vector<float>(m, {kRows, kT});
}

Tensor make_targets() {
  std::vector<int64_t> y(kRows * kT);
  for (int64_t i = 0; i < kRows * kT; ++i) y[i] = (i * 3 + 1) % kV;
  return Tensor::from_vector<int64_t>(y);
}

// sum_n w_n (lse_n - x[n, y_n] + coef lse_n^2) / norm, written out plainly.
double reference_loss(const Tensor& x, const Tensor& y, const Tensor& w, double norm, double coef) {
  const auto ws = w.to_vector<double>();
  double sum = 0;
  for (int64_t n = 0; n < x.size(0); ++n) {
    if (ws[n] == 0) continue;
    double m = -1e300, s = 0;
    for (int64_t i = 0; i < x.size(1); ++i) m = std::max(m, x.at({n, i}));
    for (int64_t i = 0; i < x.size(1); ++i) s += std::exp(x.at({n, i}) - m);
    const double lse = m + std::log(s);
    sum += ws[n] * (lse - x.at({n, static_cast<int64_t>(y.at({n}))}) + coef * lse * lse);
  }
  return sum / norm;
}

Tensor gradient_of(const Tensor& logits, const Tensor& y, const Tensor& w, double norm,
                   double coef) {
  Variable x(logits, true);
  cross_entropy(x, y, w, norm, coef).loss.backward();
  return x.grad();
}

}  // namespace

TEST_CASE("masked cross_entropy matches a plain loop", "[fused][masked]") {
  const Tensor x = Tensor::randn({kRows * kT, kV}, 40, 0, DType::Float64);
  const Tensor y = make_targets(), w = make_mask();
  const double coef = 0.3, norm = 17;  // norm need not be this batch's count (10)
  const CrossEntropyResult r = cross_entropy(Variable(x), y, w, norm, coef);
  CHECK(r.loss.item() == Approx(reference_loss(x, y, w, norm, coef)).epsilon(1e-12));
  CHECK(r.ce == Approx(reference_loss(x, y, w, norm, 0)).epsilon(1e-12));
  CHECK(r.ce + coef * r.z == Approx(r.loss.item()).epsilon(1e-12));
  // With all weights 1 and norm = N it is the plain mean form.
  const Tensor ones = Tensor::ones({kRows * kT}, DType::Float32);
  const CrossEntropyResult mean = cross_entropy(Variable(x), y, coef);
  CHECK(cross_entropy(Variable(x), y, ones, kRows * kT, coef).loss.item() ==
        Approx(mean.loss.item()).epsilon(1e-12));
}

TEST_CASE("masked cross_entropy passes gradcheck", "[fused][masked]") {
  Variable x(Tensor::randn({kRows * kT, kV}, 41, 0, DType::Float64), true);
  const Tensor y = make_targets(), w = make_mask();
  for (double coef : {0.0, 0.3}) {
    const GradcheckResult r = gradcheck(
        [&](const std::vector<Variable>& v) { return cross_entropy(v[0], y, w, 10, coef).loss; },
        {x});
    INFO(r.message);
    REQUIRE(r.ok);
  }
  // Padding rows get exactly zero gradient.
  const Tensor g = gradient_of(x.data(), y, w, 10, 0.3);
  for (int64_t t = 0; t < kT; ++t)
    for (int64_t i = 0; i < kV; ++i) CHECK(g.at({2 * kT + t, i}) == 0.0);
}

TEST_CASE("two micro-batches with the step's norm sum to the whole batch's gradient",
          "[fused][masked]") {
  const Tensor x = Tensor::randn({kRows * kT, kV}, 42, 0, DType::Float64);
  const Tensor y = make_targets(), w = make_mask().reshape({kRows * kT});
  const double coef = 0.2, norm = 10;  // trained tokens of the four rows: 5 + 2 + 0 + 3
  const Tensor whole = gradient_of(x, y, w, norm, coef);
  const int64_t half = 2 * kT;
  const auto part = [&](int64_t from) {
    return gradient_of(x.slice(0, from, from + half).contiguous(),
                       y.slice(0, from, from + half).contiguous(),
                       w.slice(0, from, from + half).contiguous(), norm, coef);
  };
  const auto g0 = part(0).to_vector<double>(), g1 = part(half).to_vector<double>();
  const auto gw = whole.to_vector<double>();
  REQUIRE(gw.size() == g0.size() + g1.size());
  for (size_t i = 0; i < gw.size(); ++i) {
    const double got = i < g0.size() ? g0[i] : g1[i - g0.size()];
    INFO("element " << i);
    REQUIRE(std::abs(got - gw[i]) <= 1e-12);
  }
  const double l0 =
      reference_loss(x.slice(0, 0, half), y.slice(0, 0, half), w.slice(0, 0, half), norm, coef);
  const double l1 = reference_loss(x.slice(0, half, 2 * half), y.slice(0, half, 2 * half),
                                   w.slice(0, half, 2 * half), norm, coef);
  CHECK(l0 + l1 == Approx(cross_entropy(Variable(x), y, w, norm, coef).loss.item()).epsilon(1e-12));
}

TEST_CASE("masked cross_entropy: all-zero mask and the normaliser's check", "[fused][masked]") {
  Variable x(Tensor::randn({kRows * kT, kV}, 43, 0, DType::Float64), true);
  const Tensor y = make_targets();
  const Tensor zero = Tensor::zeros({kRows, kT}, DType::Float32);
  const CrossEntropyResult r = cross_entropy(x, y, zero, 10, 0.3);
  CHECK(r.loss.item() == 0.0);
  CHECK(r.ce == 0.0);
  CHECK(r.z == 0.0);
  r.loss.backward();
  for (double g : x.grad().to_vector<double>()) REQUIRE(g == 0.0);
  CHECK(cross_entropy(Variable(x.data()), y, zero, 0, 0.3).loss.item() == 0.0);
  for (double norm : {0.0, -3.0})
    CHECK_THROWS_AS(cross_entropy(x, y, make_mask(), norm, 0.3), Error);
  CHECK_THROWS_WITH(cross_entropy(x, y, make_mask(), 0, 0.3), Catch::Contains("normaliser"));
  CHECK_THROWS_WITH(cross_entropy(x, y, Tensor::ones({3}), 1), Catch::Contains("weight"));
  // Padding rows' targets are not read; a trained row's target is still checked.
  std::vector<int64_t> bad = y.to_vector<int64_t>();
  bad[2 * kT] = -100;
  CHECK_NOTHROW(cross_entropy(x, Tensor::from_vector<int64_t>(bad), make_mask(), 10));
  bad[0] = kV;
  CHECK_THROWS_WITH(cross_entropy(x, Tensor::from_vector<int64_t>(bad), make_mask(), 10),
                    Catch::Contains("target 7"));
}
