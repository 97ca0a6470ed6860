// Differentiable ops beyond the gradcheck table: forward values against
// values computed here by hand, gradients at the points gradcheck avoids
// (ties, zeros, clamp bounds), and the errors bad shapes raise.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"

using namespace ember;

namespace {

Variable leaf(const std::vector<double>& values, const Shape& shape) {
  return Variable(Tensor::from_vector<double>(values, shape), true);
}

std::vector<double> values(const Variable& v) {
  return v.data().to_vector<double>();
}

void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).margin(1e-12));
  }
}

}  // namespace

TEST_CASE("forward values match values computed independently", "[autograd][ops]") {
  SECTION("broadcast add and mul") {
    Variable a = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
    Variable b = leaf({10, 20, 30}, {3});
    CHECK(values(a + b) == std::vector<double>{11, 22, 33, 14, 25, 36});
    CHECK(values(a * b) == std::vector<double>{10, 40, 90, 40, 100, 180});
    CHECK((a * b).shape() == Shape{2, 3});
  }
  SECTION("matmul with transpose flags") {
    const std::vector<double> av = {1, 2, 3, 4, 5, 6}, bv = {7, 8, 9, 10, 11, 12};
    std::vector<double> want(4, 0.0);  // [2,3] x [3,2]
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j)
        for (int k = 0; k < 3; ++k) want[i * 2 + j] += av[i * 3 + k] * bv[k * 2 + j];
    CHECK(values(matmul(leaf(av, {2, 3}), leaf(bv, {3, 2}))) == want);
    // The same product from A stored transposed ([3,2]) and B stored transposed ([2,3]).
    std::vector<double> at(6), bt(6);
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 3; ++k) at[k * 2 + i] = av[i * 3 + k], bt[i * 3 + k] = bv[k * 2 + i];
    check_close(values(matmul(leaf(at, {3, 2}), leaf(bt, {2, 3}), true, true)), want);
  }
  SECTION("softmax, log_softmax and logsumexp of one row") {
    const std::vector<double> x = {0.5, -1.0, 2.0};
    double z = 0;
    for (double v : x) z += std::exp(v);
    std::vector<double> p, lp;
    for (double v : x) p.push_back(std::exp(v) / z), lp.push_back(v - std::log(z));
    check_close(values(softmax(leaf(x, {1, 3}))), p);
    check_close(values(log_softmax(leaf(x, {1, 3}))), lp);
    check_close(values(logsumexp(leaf(x, {1, 3}), {-1})), {std::log(z)});
  }
  SECTION("reductions with dims and keepdim") {
    Variable a = leaf({1, 5, 3, 4, 2, 6}, {2, 3});
    CHECK(values(sum(a, {1})) == std::vector<double>{9, 12});
    CHECK(sum(a, {0}, true).shape() == Shape{1, 3});
    CHECK(values(mean(a)) == std::vector<double>{3.5});
    CHECK(values(amax(a, {-1})) == std::vector<double>{5, 6});
  }
  SECTION("embedding, gather and topk") {
    Variable w = leaf({0, 1, 10, 11, 20, 21}, {3, 2});
    Variable e = embedding(w, Tensor::from_vector<int64_t>({2, 0, 2}, {1, 3}));
    CHECK(e.shape() == Shape{1, 3, 2});
    CHECK(values(e) == std::vector<double>{20, 21, 0, 1, 20, 21});
    Variable a = leaf({3, 1, 4, 1, 5, 9}, {1, 6});
    auto [top, idx] = topk(a, 3);
    CHECK(values(top) == std::vector<double>{9, 5, 4});
    CHECK(idx.to_vector<int64_t>() == std::vector<int64_t>{5, 4, 2});
    CHECK(values(gather(a, 1, Tensor::from_vector<int64_t>({2, 2, 0}, {1, 3}))) ==
          std::vector<double>{4, 4, 3});
  }
  SECTION("cat, stack and split") {
    Variable a = leaf({1, 2}, {2, 1}), b = leaf({3, 4, 5, 6}, {2, 2});
    CHECK(values(cat({a, b}, 1)) == std::vector<double>{1, 3, 4, 2, 5, 6});
    CHECK(stack({a, a}, 0).shape() == Shape{2, 2, 1});
    auto pieces = split(b, 1, 1);
    REQUIRE(pieces.size() == 2);
    CHECK(values(pieces[1]) == std::vector<double>{4, 6});
  }
}

TEST_CASE("gradients at ties, zeros and bounds", "[autograd][ops]") {
  SECTION("maximum and minimum split ties evenly") {
    Variable a = leaf({1, 2, 5}, {3}), b = leaf({1, 3, 4}, {3});
    sum(maximum(a, b)).backward();
    CHECK(a.grad().to_vector<double>() == std::vector<double>{0.5, 0, 1});
    CHECK(b.grad().to_vector<double>() == std::vector<double>{0.5, 1, 0});
    a.zero_grad();
    b.zero_grad();
    sum(minimum(a, b)).backward();
    CHECK(a.grad().to_vector<double>() == std::vector<double>{0.5, 1, 0});
    CHECK(b.grad().to_vector<double>() == std::vector<double>{0.5, 0, 1});
  }
  SECTION("amax splits ties evenly") {
    Variable a = leaf({1, 3, 3, 2, 0, 2}, {2, 3});
    sum(amax(a, {1})).backward();
    CHECK(a.grad().to_vector<double>() == std::vector<double>{0, 0.5, 0.5, 0.5, 0, 0.5});
  }
  SECTION("relu and abs have gradient 0 at 0") {
    Variable a = leaf({-1, 0, 2}, {3});
    sum(relu(a) + abs(a)).backward();
    CHECK(a.grad().to_vector<double>() == std::vector<double>{-1, 0, 2});
  }
  SECTION("clamp passes the gradient strictly inside only") {
    Variable a = leaf({-2, -1, 0, 1, 2}, {5});
    sum(clamp(a, -1, 1)).backward();
    CHECK(a.grad().to_vector<double>() == std::vector<double>{0, 0, 1, 0, 0});
  }
  SECTION("a 2-D operand shared by a batch gets the batch-summed gradient") {
    Variable a = Variable(Tensor::ones({3, 2, 4}, DType::Float64), true);
    Variable b = Variable(Tensor::ones({4, 5}, DType::Float64), true);
    sum(matmul(a, b)).backward();
    CHECK(b.grad().shape() == Shape{4, 5});
    CHECK(b.grad().to_vector<double>() == std::vector<double>(20, 6.0));  // 3 batches x 2 rows
    CHECK(a.grad().to_vector<double>() == std::vector<double>(24, 5.0));
  }
}

TEST_CASE("ops report bad shapes with an ember::Error", "[autograd][ops]") {
  Variable a = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Variable b = leaf({1, 2, 3, 4}, {4});
  CHECK_THROWS_AS(add(a, b), Error);
  CHECK_THROWS_WITH(add(a, b), Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  CHECK_THROWS_WITH(matmul(a, a), Catch::Contains("[2, 3]"));
  CHECK_THROWS_AS(embedding(b, Tensor::from_vector<int64_t>({0})), Error);
}

TEST_CASE("saved index tensors edited in place are caught at backward", "[autograd][ops]") {
  Variable w = leaf({1, 2, 3, 4}, {2, 2});
  Tensor ids = Tensor::from_vector<int64_t>({1, 0});
  Variable y = sum(embedding(w, ids));
  ids.set({0}, 0);
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("modified in place"));
}

TEST_CASE("only the inputs that need a gradient get one", "[autograd][ops]") {
  Variable a = leaf({1, 2}, {2});
  Variable c = Variable(Tensor::from_vector<double>({3, 4}), false);
  Variable y = sum(a * c + a / c);
  y.backward();
  check_close(a.grad().to_vector<double>(), {3 + 1.0 / 3, 4 + 1.0 / 4});
  CHECK_FALSE(c.grad().defined());
}
