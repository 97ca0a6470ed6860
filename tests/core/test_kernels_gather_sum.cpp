// The weighted gather-sum of the MoE combine step (the op gather_weighted_sum,
// its kernel in autograd/ops/index.cpp) against plain loops written from its
// definition (out[n] = sum_s w[n, s] src[slots[n, s]] and the two gradients),
// on a shuffled slot table large enough to run in parallel, with rows no slot
// names; the same bits on 1 and 2 threads; one-line errors.
#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <random>
#include <vector>

#include "autograd/ops.h"

using namespace ember;
using Catch::Contains;

namespace {

struct Problem {
  int64_t N = 300, S = 3, R = 950, C = 70;  // R > N S: 50 rows nobody picks
  Tensor src, slots, weights, g;
};

Problem make_problem(DType dt) {
  Problem p;
  p.src = Tensor::rand({p.R, p.C}, 11, 0, dt, -1, 1);
  p.weights = Tensor::rand({p.N, p.S}, 12, 0, dt, 0, 1);
  p.g = Tensor::rand({p.N, p.C}, 13, 0, dt, -1, 1);
  std::vector<int64_t> rows(p.R);
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), std::mt19937_64(14));
  rows.resize(p.N * p.S);
  p.slots = Tensor::from_vector(rows, {p.N, p.S});
  return p;
}

}  // namespace

TEMPLATE_TEST_CASE("gather_weighted_sum and its gradients match loops", "[index]", float, double) {
  const DType dt = std::is_same_v<TestType, float> ? DType::Float32 : DType::Float64;
  const Problem p = make_problem(dt);
  const auto src = p.src.to_vector<double>(), w = p.weights.to_vector<double>(),
             g = p.g.to_vector<double>();
  const auto slot = p.slots.to_vector<int64_t>();
  std::vector<double> out(p.N * p.C, 0.0), dsrc(p.R * p.C, 0.0), dw(p.N * p.S, 0.0);
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t s = 0; s < p.S; ++s) {
      const int64_t r = slot[n * p.S + s];
      for (int64_t c = 0; c < p.C; ++c) {
        out[n * p.C + c] += w[n * p.S + s] * src[r * p.C + c];
        dsrc[r * p.C + c] = w[n * p.S + s] * g[n * p.C + c];
        dw[n * p.S + s] += g[n * p.C + c] * src[r * p.C + c];
      }
    }
  const double tol = dt == DType::Float32 ? 1e-5 : 1e-12;
  auto close = [&](const Tensor& t, const std::vector<double>& want) {
    const auto v = t.to_vector<double>();
    REQUIRE(v.size() == want.size());
    double worst = 0;
    for (size_t i = 0; i < v.size(); ++i) worst = std::max(worst, std::abs(v[i] - want[i]));
    return worst < tol;
  };
  const Variable src_v(p.src, true), w_v(p.weights, true);
  const Variable y = gather_weighted_sum(src_v, p.slots, w_v);
  CHECK(y.shape() == Shape{p.N, p.C});
  CHECK(close(y.data(), out));
  y.backward(p.g);
  CHECK(close(src_v.grad(), dsrc));  // zero on the 50 rows no slot names
  CHECK(close(w_v.grad(), dw));
  const Variable fixed_src(p.src, false), only_w(p.weights, true);
  gather_weighted_sum(fixed_src, p.slots, only_w).backward(p.g);
  CHECK_FALSE(fixed_src.grad().defined());
  CHECK(close(only_w.grad(), dw));
}

TEST_CASE("gather_weighted_sum gives the same bits on any thread count", "[index]") {
  const Problem p = make_problem(DType::Float32);
  // out, d_src, d_weights on the given thread count.
  auto run = [&](int threads) {
    const int old = omp_get_max_threads();
    omp_set_num_threads(threads);
    const Variable src(p.src, true), w(p.weights, true);
    const Variable y = gather_weighted_sum(src, p.slots, w);
    y.backward(p.g);
    omp_set_num_threads(old);
    return std::vector<std::vector<float>>{y.data().to_vector<float>(), src.grad().to_vector<float>(),
                                           w.grad().to_vector<float>()};
  };
  CHECK(run(1) == run(2));
}

TEST_CASE("gather_weighted_sum rejects bad slots in one line", "[index]") {
  const Variable src(Tensor::zeros({4, 2})), w(Tensor::ones({2, 2}));
  const auto slots = [](std::vector<int64_t> v) { return Tensor::from_vector(v, {2, 2}); };
  CHECK_THROWS_WITH(gather_weighted_sum(src, slots({0, 1, 2, 1}), w),
                    Contains("row 1 of src is named by two slots"));
  CHECK_THROWS_WITH(gather_weighted_sum(src, slots({0, 1, 2, 4}), w),
                    Contains("slot 4 is out of range") && Contains("4 rows"));
  CHECK_THROWS_WITH(gather_weighted_sum(src, slots({0, 1, 2, 3}), Variable(Tensor::ones({4}))),
                    Contains("weights [4] do not match slots [2, 2]"));
  CHECK_THROWS_WITH(gather_weighted_sum(src, slots({0, 1, 2, 3}).to(DType::Float32), w),
                    Contains("int64 or int32"));
}
