// Per-token log-probabilities at a temperature (docs/model.md#log-probabilities-at-a-temperature):
// against a plain float64 loop at tau = 0.7 and 1, equal at tau = 1 to sequence_logprobs' row
// sums, float32 logits near the float64 loop, float64 gradchecks and the one-line errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/alignment/completion_logprobs.h"
#include "nn/alignment/sequence_logprobs.h"

using namespace ember;
using namespace ember::nn;

namespace {

constexpr int64_t B = 2, T = 4, V = 5;

// Row 0 scores t = 1, 2; row 1 scores t = 0, 1, 3. Unscored targets hold ids out of range.
Tensor targets() {
  return Tensor::from_vector<int64_t>({-1, 3, 0, 99, 2, 4, -7, 1}, {B, T});
}
Tensor scored() {
  return Tensor::from_vector<float>({0, 1, 1, 0, 1, 1, 0, 1}, {B, T});
}

Tensor scaled(const Tensor& t, double s) {
  return (Variable(t) * s).data();
}

// log softmax(z / tau)[y] by a plain loop in double: z[y] / tau - log sum_i exp(z[i] / tau).
double loop_logprob(const Tensor& logits, int64_t b, int64_t t, int64_t y, double tau) {
  double s = 0;
  for (int64_t i = 0; i < V; ++i) s += std::exp(logits.at({b, t, i}) / tau);
  return logits.at({b, t, y}) / tau - std::log(s);
}

}  // namespace

TEST_CASE("completion_logprobs against a float64 loop at two temperatures", "[alignment][rl]") {
  const Variable logits(scaled(Tensor::randn({B, T, V}, 71, 0, DType::Float64), 3.0), true);
  const auto ys = targets().to_vector<int64_t>();
  const auto ws = scored().to_vector<float>();
  for (double tau : {0.7, 1.0}) {
    INFO("temperature " << tau);
    const Variable lp = completion_logprobs(logits, targets(), scored(), tau);
    REQUIRE(lp.shape() == Shape({B, T}));
    REQUIRE(lp.dtype() == DType::Float64);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < T; ++t) {
        const double want =
            ws[b * T + t] == 0 ? 0 : loop_logprob(logits.data(), b, t, ys[b * T + t], tau);
        CHECK(lp.data().at({b, t}) == Approx(want).epsilon(1e-13).margin(1e-15));
      }
    }
  }
  // tau = 0.7 differs from tau = 1 (the scaling is applied).
  CHECK(completion_logprobs(logits, targets(), scored(), 0.7).data().at({0, 1}) !=
        Approx(completion_logprobs(logits, targets(), scored(), 1.0).data().at({0, 1})));
  // At tau = 1 the row sums are sequence_logprobs'.
  const Variable rows = sum(completion_logprobs(logits, targets(), scored(), 1.0), {1});
  const SequenceLogprobs s = sequence_logprobs(logits, targets(), scored());
  for (int64_t b = 0; b < B; ++b)
    CHECK(rows.data().at({b}) == Approx(s.logp.data().at({b})).epsilon(1e-15));
}

TEST_CASE("completion_logprobs of float32 logits stays near the float64 loop", "[alignment][rl]") {
  const Tensor z64 = scaled(Tensor::randn({B, T, V}, 72, 0, DType::Float64), 2.0);
  const Variable lp =
      completion_logprobs(Variable(z64.to(DType::Float32)), targets(), scored(), 0.6);
  REQUIRE(lp.dtype() == DType::Float32);
  const auto ys = targets().to_vector<int64_t>();
  const auto ws = scored().to_vector<float>();
  for (int64_t i = 0; i < B * T; ++i) {
    if (ws[i] == 0) continue;
    const double want =
        loop_logprob(z64.to(DType::Float32).to(DType::Float64), i / T, i % T, ys[i], 0.6);
    CHECK(lp.data().to(DType::Float64).at({i / T, i % T}) == Approx(want).epsilon(1e-5));
  }
}

TEST_CASE("completion_logprobs: float64 gradcheck at tau = 0.7 and 1", "[alignment][rl]") {
  const Variable logits(Tensor::randn({B, T, V}, 73, 0, DType::Float64), true);
  const Variable g(Tensor::randn({B, T}, 74, 0, DType::Float64));
  for (double tau : {0.7, 1.0}) {
    INFO("temperature " << tau);
    const GradcheckResult r = gradcheck(
        [&](const std::vector<Variable>& v) {
          return sum(completion_logprobs(v[0], targets(), scored(), tau) * g);
        },
        {logits});
    INFO(r.message);
    CHECK(r.ok);
  }
}

TEST_CASE("completion_logprobs refuses bad inputs in one line", "[alignment][rl]") {
  const Variable logits(Tensor::randn({B, T, V}, 75, 0, DType::Float64));
  for (double tau : {0.0, -1.0, std::nan("")}) {
    CHECK_THROWS_WITH(completion_logprobs(logits, targets(), scored(), tau),
                      Catch::Contains("temperature must be > 0"));
  }
  const Tensor two = Tensor::from_vector<float>({0, 1, 2, 0, 1, 1, 0, 1}, {B, T});
  CHECK_THROWS_WITH(completion_logprobs(logits, targets(), two, 1.0),
                    Catch::Contains("expected 0 or 1"));
  CHECK_THROWS_WITH(completion_logprobs(logits, targets(), scored().reshape({T, B}), 1.0),
                    Catch::Contains("must both be [B, T]"));
  CHECK_THROWS_WITH(completion_logprobs(reshape(logits, {B * T, V}), targets(), scored(), 1.0),
                    Catch::Contains("logits must be [B, T, V]"));
}
