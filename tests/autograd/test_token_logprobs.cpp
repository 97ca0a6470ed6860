// token_logprobs (docs/model.md#log-probabilities-of-a-side): values against a plain loop in
// double, float64 gradchecks with 0/1 and general weights, weight-0 rows untouched (their
// targets unread), extreme logits; and the stable log_sigmoid and log1mexp at large |x|.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/kernels/elementwise.h"

using namespace ember;

namespace {

constexpr int64_t kN = 6, kV = 9;

Tensor targets() {
  std::vector<int64_t> y(kN);
  for (int64_t n = 0; n < kN; ++n) y[n] = (n * 4 + 2) % kV;
  return Tensor::from_vector<int64_t>(y);
}

// Rows 1 and 4 are not scored.
Tensor mask() { return Tensor::from_vector<float>({1, 0, 1, 1, 0, 1}); }

// w_n (x[n, y_n] - logsumexp(x_n)), written out plainly in double.
std::vector<double> reference(const Tensor& x, const Tensor& y, const Tensor& w) {
  const auto ws = w.to(DType::Float64).to_vector<double>();
  const auto ys = y.to(DType::Int64).to_vector<int64_t>();
  std::vector<double> out(x.size(0), 0.0);
  for (int64_t n = 0; n < x.size(0); ++n) {
    if (ws[n] == 0) continue;
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t i = 0; i < x.size(1); ++i) m = std::max(m, x.at({n, i}));
    for (int64_t i = 0; i < x.size(1); ++i) s += std::exp(x.at({n, i}) - m);
    out[n] = ws[n] * (x.at({n, ys[n]}) - m - std::log(s));
  }
  return out;
}

}  // namespace

TEST_CASE("token_logprobs matches a plain loop", "[fused][token_logprobs]") {
  const Tensor y = targets(), w = mask();
  for (DType dt : {DType::Float64, DType::Float32}) {
    const Tensor x = kernels::mul_scalar(Tensor::randn({kN, kV}, 60, 0, dt), 3.0);
    const auto want = reference(x, y, w);
    const auto got = token_logprobs(Variable(x), y, w).data().to(DType::Float64).to_vector<double>();
    REQUIRE(got.size() == want.size());
    const double tol = dt == DType::Float64 ? 1e-13 : 1e-5;
    for (size_t n = 0; n < got.size(); ++n) {
      INFO("row " << n << " dtype " << dtype_name(dt));
      CHECK(got[n] == Approx(want[n]).margin(tol).epsilon(tol));
    }
    CHECK(got[1] == 0.0);
    CHECK(got[4] == 0.0);
  }
}

TEST_CASE("token_logprobs passes gradcheck", "[fused][token_logprobs]") {
  Variable x(Tensor::randn({kN, kV}, 61, 0, DType::Float64), true);
  const Tensor y = targets();
  // A weighted sum of the outputs, so each row's gradient is scaled differently.
  const Variable g(Tensor::randn({kN}, 62, 0, DType::Float64));
  for (const Tensor& w : {mask(), Tensor::from_vector<double>({0.5, 2, 0, 1, -1.5, 1})}) {
    const GradcheckResult r = gradcheck(
        [&](const std::vector<Variable>& v) { return sum(token_logprobs(v[0], y, w) * g); }, {x});
    INFO(r.message);
    REQUIRE(r.ok);
  }
  // Unscored rows get exactly zero gradient.
  sum(token_logprobs(x, y, mask())).backward();
  for (int64_t row : {1, 4})
    for (int64_t i = 0; i < kV; ++i) CHECK(x.grad().at({row, i}) == 0.0);
}

TEST_CASE("token_logprobs: unscored targets are not read, scored ones are checked",
          "[fused][token_logprobs]") {
  const Variable x(Tensor::randn({kN, kV}, 63, 0, DType::Float64));
  std::vector<int64_t> bad = targets().to_vector<int64_t>();
  bad[1] = -100;
  bad[4] = kV + 5;
  CHECK_NOTHROW(token_logprobs(x, Tensor::from_vector<int64_t>(bad), mask()));
  bad[0] = kV;
  CHECK_THROWS_WITH(token_logprobs(x, Tensor::from_vector<int64_t>(bad), mask()),
                    Catch::Contains("target 9") && Catch::Contains("row 0"));
  CHECK_THROWS_WITH(token_logprobs(x, targets(), Tensor::ones({kN + 1})),
                    Catch::Contains("weight"));
  CHECK_THROWS_WITH(token_logprobs(x, targets().narrow(0, 0, 3), mask()),
                    Catch::Contains("targets of shape"));
}

TEST_CASE("token_logprobs of extreme logits stays finite and exact", "[fused][token_logprobs]") {
  // Row 0: the target holds the largest logit; row 1: the smallest; row 2: a tie at 1e4.
  const std::vector<double> rows = {1e4, -1e4, 0, 1e4, -1e4, 0, 1e4, 1e4, -1e4};
  const Tensor y = Tensor::from_vector<int64_t>({0, 1, 1});
  const Tensor w = Tensor::ones({3});
  for (DType dt : {DType::Float64, DType::Float32}) {
    Variable x(Tensor::from_vector<double>(rows, {3, 3}).to(dt), true);
    const Variable lp = token_logprobs(x, y, w);
    const auto v = lp.data().to(DType::Float64).to_vector<double>();
    INFO("dtype " << dtype_name(dt));
    CHECK(v[0] == Approx(0.0).margin(1e-6));
    CHECK(v[1] == Approx(-2e4).epsilon(1e-6));
    CHECK(v[2] == Approx(-std::log(2.0)).epsilon(1e-5));
    sum(lp).backward();
    const auto gx = x.grad().to(DType::Float64).to_vector<double>();
    for (double g : gx) REQUIRE(std::isfinite(g));
    // float32: the saved logsumexp (about 1e4) is within half an ulp, 5e-4.
    const double tol = dt == DType::Float64 ? 1e-12 : 1e-3;
    CHECK(gx[3] == Approx(-1.0).margin(tol));  // row 1: -softmax at its max
    CHECK(gx[4] == Approx(1.0).margin(tol));   // row 1: 1 - softmax at its target
    CHECK(gx[7] == Approx(0.5).margin(tol));   // row 2: 1 - 1/2
  }
}

TEST_CASE("log_sigmoid and log1mexp are stable for large |x|", "[autograd][token_logprobs]") {
  Variable x(Tensor::from_vector<double>({-1000, -40, 0, 40, 1000}), true);
  const auto ls = log_sigmoid(x).data().to_vector<double>();
  CHECK(ls[0] == -1000.0);
  CHECK(ls[1] == Approx(-40 - std::log1p(std::exp(-40.0))).epsilon(1e-15));
  CHECK(ls[2] == Approx(-std::log(2.0)).epsilon(1e-15));
  CHECK(ls[3] == Approx(-std::exp(-40.0)).epsilon(1e-12));  // -4.2e-18, not 0
  CHECK(ls[4] == 0.0);
  sum(log_sigmoid(x)).backward();
  const auto g = x.grad().to_vector<double>();
  CHECK(g[0] == 1.0);
  CHECK(g[2] == 0.5);
  CHECK(g[3] == Approx(std::exp(-40.0)).epsilon(1e-12));
  CHECK(g[4] == 0.0);

  Variable z(Tensor::from_vector<double>({-1e-6, -0.5, -50, -800}), true);
  const auto lm = log1mexp(z).data().to_vector<double>();
  const long double e6 = -std::expm1(-1e-6L);  // 1 - e^(-1e-6), long double
  CHECK(lm[0] == Approx(static_cast<double>(std::log(e6))).epsilon(1e-14));
  CHECK(lm[1] == Approx(std::log(1 - std::exp(-0.5))).epsilon(1e-14));
  CHECK(lm[2] == Approx(-std::exp(-50.0)).epsilon(1e-12));  // -1.9e-22, not 0
  CHECK(lm[3] == 0.0);
  sum(log1mexp(z)).backward();
  const auto gz = z.grad().to_vector<double>();
  for (double v : gz) REQUIRE(std::isfinite(v));
  CHECK(gz[0] == Approx(-1 / std::expm1(1e-6)).epsilon(1e-12));  // about -1e6
  CHECK(gz[2] == Approx(-std::exp(-50.0)).epsilon(1e-12));
}
