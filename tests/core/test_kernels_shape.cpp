// cat / stack / split / split_sizes against element-wise reference loops:
// any dim (negative too), non-contiguous inputs, empty pieces, split views
// sharing storage, and errors naming the shapes.
#include <catch2/catch.hpp>

#include "core/kernels/shape_ops.h"

using namespace ember;
using Catch::Contains;

namespace {
Tensor uniform(const Shape& shape, DType dt, uint64_t seed) {
  return Tensor::rand(shape, seed, 0, dt, -1, 1);
}
}  // namespace

TEMPLATE_TEST_CASE("cat joins along any dim", "[shape]", float, double) {
  const DType dt = dtype_of<TestType>();
  const Tensor a = uniform({2, 3, 4}, dt, 1);
  const Tensor b =
      uniform({4, 5, 2}, dt, 2).permute({2, 0, 1}).narrow(2, 1, 4);  // [2, 4, 4] strided
  const Tensor e = Tensor::empty({2, 0, 4}, dt);
  const Tensor c = kernels::cat({a, e, b}, 1);
  REQUIRE(c.shape() == Shape{2, 7, 4});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 7; ++j)
      for (int64_t k = 0; k < 4; ++k)
        CHECK(c.at({i, j, k}) == (j < 3 ? a.at({i, j, k}) : b.at({i, j - 3, k})));
  const Tensor d = kernels::cat({a, a.narrow(2, 0, 1)}, -1);
  REQUIRE(d.shape() == Shape{2, 3, 5});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      for (int64_t k = 0; k < 4; ++k) CHECK(d.at({i, j, k}) == a.at({i, j, k}));
      CHECK(d.at({i, j, 4}) == a.at({i, j, 0}));
    }
  const Tensor ints = kernels::cat({Tensor::arange(0, 3), Tensor::arange(7, 9)}, 0);
  CHECK(ints.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 7, 8});
}

TEMPLATE_TEST_CASE("stack joins along a new dim", "[shape]", float, double) {
  const DType dt = dtype_of<TestType>();
  const Tensor a = uniform({3, 4}, dt, 3), b = uniform({4, 3}, dt, 4).transpose(0, 1);
  for (int64_t dim : {0, 1, 2, -1}) {
    CAPTURE(dim);
    const Tensor s = kernels::stack({a, b, a}, dim);
    const int64_t nd = dim < 0 ? dim + 3 : dim;
    Shape want = {3, 4};
    want.insert(want.begin() + nd, 3);
    REQUIRE(s.shape() == want);
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 4; ++j) {
          std::vector<int64_t> p = {i, j};
          p.insert(p.begin() + nd, t);
          CHECK(s.at(p) == (t == 1 ? b : a).at({i, j}));
        }
  }
}

TEST_CASE("split and split_sizes return views", "[shape]") {
  const Tensor a = Tensor::arange(0, 30, 1, DType::Float32).reshape({3, 10});
  const auto parts = kernels::split(a, 4, 1);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].shape() == Shape{3, 4});
  CHECK(parts[2].shape() == Shape{3, 2});
  CHECK(parts[2].at({1, 1}) == 19.0);
  CHECK(parts[1].shares_storage(a));
  parts[1].set({0, 0}, -5);
  CHECK(a.at({0, 4}) == -5.0);
  const auto rows = kernels::split(a, 1, 0);
  REQUIRE(rows.size() == 3);
  CHECK(rows[2].shape() == Shape{1, 10});
  const auto pieces = kernels::split_sizes(a, {3, 0, 7}, -1);
  REQUIRE(pieces.size() == 3);
  CHECK(pieces[1].shape() == Shape{3, 0});
  CHECK(pieces[2].at({2, 0}) == 23.0);
  // Round trip: cat(split(x)) == x
  CHECK(kernels::cat(kernels::split(a, 3, 1), 1).to_vector<float>() == a.to_vector<float>());
}

TEST_CASE("shape ops reject mismatched inputs naming the shapes", "[shape]") {
  const Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({2, 4});
  REQUIRE_THROWS_WITH(kernels::cat({a, b}, 0), Contains("[2, 4]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(kernels::cat({a, Tensor::zeros({2, 3}, DType::Float64)}, 0),
                      Contains("float64") && Contains("float32"));
  REQUIRE_THROWS_WITH(kernels::cat({a}, 2), Contains("dim 2") && Contains("[2, 3]"));
  REQUIRE_THROWS_AS(kernels::cat({}, 0), Error);
  REQUIRE_THROWS_WITH(kernels::stack({a, b}, 0), Contains("[2, 4]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(kernels::split(a, 0, 1), Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(kernels::split_sizes(a, {1, 1}, 1),
                      Contains("[1, 1]") && Contains("[2, 3]") && Contains("sum to 2"));
  REQUIRE_THROWS_WITH(kernels::split_sizes(a, {4, -1}, 1), Contains("negative"));
}
