// PPO's value head (docs/model.md#value-head): value.weight [1, d_model] with no bias, w . h at
// every position against a plain loop, drawn as the score head from the same generator, a copy
// (not a view) of a score head's weight, a float64 gradcheck, and the one-line errors.
#include <catch2/catch.hpp>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/alignment/reward_model.h"
#include "nn/alignment/value_head.h"

using namespace ember;
using namespace ember::nn;

TEST_CASE("ValueHead reads w . h at every position", "[alignment][rl]") {
  constexpr int64_t B = 2, T = 3, C = 4;
  Generator gen(11);
  ValueHead head(C, gen, DType::Float64);
  const auto params = head.named_parameters();
  REQUIRE(params.size() == 1);
  CHECK(params[0].first == "value.weight");
  CHECK(params[0].second.shape() == Shape({1, C}));
  const Variable h(Tensor::randn({B, T, C}, 12, 0, DType::Float64));
  const Variable v = head.forward(h);
  REQUIRE(v.shape() == Shape({B, T}));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      double want = 0;
      for (int64_t c = 0; c < C; ++c)
        want += head.weight().data().at({0, c}) * h.data().at({b, t, c});
      CHECK(v.data().at({b, t}) == Approx(want).epsilon(1e-14));
    }
  }
}

TEST_CASE("ValueHead is drawn like ScoreHead and copies a score head's weight", "[alignment][rl]") {
  Generator g1(5), g2(5);
  const ValueHead drawn(8, g1);
  const ScoreHead score(8, g2);
  CHECK(drawn.weight().data().to_vector<float>() == score.weight().data().to_vector<float>());
  const ValueHead copied(score);
  CHECK(copied.named_parameters()[0].first == "value.weight");
  CHECK(copied.weight().requires_grad());
  CHECK(copied.weight().data().to_vector<float>() == score.weight().data().to_vector<float>());
  // A copy: training the value head leaves the reward model's head as it was.
  copied.weight().data().fill_(0.5);
  CHECK(score.weight().data().at({0, 0}) != 0.5);
}

TEST_CASE("ValueHead: float64 gradcheck and one-line errors", "[alignment][rl]") {
  Generator gen(13);
  const ValueHead head(3, gen, DType::Float64);
  const Variable h(Tensor::randn({2, 4, 3}, 14, 0, DType::Float64), true);
  const Variable g(Tensor::randn({2, 4}, 15, 0, DType::Float64));
  const GradcheckResult r =
      gradcheck([&](const std::vector<Variable>& v) { return sum(head.forward(v[0]) * g); },
                {h, head.weight()});
  INFO(r.message);
  CHECK(r.ok);
  CHECK_THROWS_WITH(head.forward(Variable(Tensor::zeros({2, 4, 5}, DType::Float64))),
                    Catch::Contains("ValueHead: hidden states must be [B, T, 3]"));
  CHECK_THROWS_WITH(ValueHead(Tensor::zeros({2, 3})),
                    Catch::Contains("must be [1, d_model], got [2, 3]"));
}
