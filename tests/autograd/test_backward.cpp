// The backward engine: diamonds, reuse, accumulation across backward calls,
// broadcast reduction, non-scalar roots, no_grad, freed graphs, in-place
// modification of saved tensors, detach, and post-accumulate hooks.
#include <algorithm>
#include <catch2/catch.hpp>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/kernels/elementwise.h"

using namespace ember;

static Variable leaf(std::vector<double> values, Shape shape) {
  return Variable(Tensor::from_vector<double>(values, shape), true);
}

TEST_CASE("a diamond graph sums both paths", "[engine]") {
  // y = (x*2) * (x+1); dy/dx = 2(x+1) + 2x = 4x + 2
  Variable x = leaf({1.5, -2.0}, {2});
  Variable a = x * 2.0;
  Variable b = x + 1.0;
  Variable y = sum(a * b);
  y.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{8.0, -6.0});
}

TEST_CASE("a tensor used twice in one op gets both contributions", "[engine]") {
  Variable x = leaf({3.0}, {1});
  Variable y = sum(x * x);  // 2x
  y.backward();
  CHECK(x.grad().item() == 6.0);
}

TEST_CASE("gradients accumulate over two backward calls until zero_grad", "[engine]") {
  Variable x = leaf({1.0, 2.0}, {2});
  sum(x * 3.0).backward();
  sum(x * x).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3.0 + 2.0, 3.0 + 4.0});
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
  sum(x).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1.0, 1.0});
}

TEST_CASE("broadcast gradients are reduced to each input's shape", "[engine]") {
  Variable a = Variable(Tensor::ones({3, 1, 2}, DType::Float64), true);
  Variable b = Variable(Tensor::ones({4, 2}, DType::Float64), true);
  sum(a * b).backward();
  CHECK(a.grad().shape() == Shape{3, 1, 2});
  CHECK(a.grad().to_vector<double>() == std::vector<double>(6, 4.0));
  CHECK(b.grad().shape() == Shape{4, 2});
  CHECK(b.grad().to_vector<double>() == std::vector<double>(8, 3.0));
}

TEST_CASE("a non-scalar root takes an explicit gradient", "[engine]") {
  Variable x = leaf({1.0, 2.0, 3.0}, {3});
  Variable y = x * x;
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("non-scalar"));
  y.backward(Tensor::from_vector<double>({1.0, 0.5, 0.0}));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2.0, 2.0, 0.0});
  Variable z = x * 2.0;
  CHECK_THROWS_WITH(z.backward(Tensor::zeros({2}, DType::Float64)), Catch::Contains("[2]"));
}

TEST_CASE("no_grad records nothing", "[engine]") {
  Variable x = leaf({1.0}, {1});
  {
    NoGradGuard guard;
    Variable y = x * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
  }
  Variable y = x * 2.0;
  CHECK(y.requires_grad());
  CHECK(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->name == "mul_scalar");
}

TEST_CASE("inputs that do not require grad get none and stop the graph", "[engine]") {
  Variable x = leaf({2.0}, {1});
  Variable c = Variable(Tensor::from_vector<double>({5.0}, {1}), false);
  Variable y = sum(x * c);
  y.backward();
  CHECK(x.grad().item() == 5.0);
  CHECK_FALSE(c.grad().defined());
  Variable d = (x * 3.0).detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.data().item() == 6.0);
}

TEST_CASE("the graph is freed after backward unless retained", "[engine]") {
  Variable x = leaf({2.0}, {1});
  Variable y = sum(exp(x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  CHECK(x.grad().item() == Approx(2 * std::exp(2.0)));
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("second time"));
}

TEST_CASE("modifying a saved tensor in place is caught at backward", "[engine]") {
  Variable x = leaf({1.0, 2.0}, {2});
  Variable y = exp(x);  // saves its output
  Variable z = sum(y);
  y.data().fill_(0.0);
  CHECK_THROWS_WITH(z.backward(), Catch::Contains("modified in place") && Catch::Contains("exp"));
}

TEST_CASE("post-accumulate hooks fire once the leaf gradient is final", "[engine]") {
  Variable w = leaf({1.0, 1.0}, {2});
  Variable u = leaf({2.0}, {1});
  std::vector<std::string> fired;
  double w_grad_at_hook = 0;
  w.register_post_accumulate_grad_hook([&](Variable& v) {
    fired.push_back("w");
    w_grad_at_hook = v.grad().at({0});
  });
  u.register_post_accumulate_grad_hook([&](Variable&) { fired.push_back("u"); });
  // w is used by two ops: the hook must see the sum of both contributions.
  Variable y = sum(w * 2.0) + sum(w * u);
  y.backward();
  REQUIRE(fired.size() == 2);
  CHECK(w_grad_at_hook == 4.0);
  CHECK(std::count(fired.begin(), fired.end(), "w") == 1);
}

TEST_CASE("a long chain backpropagates without recursion", "[engine]") {
  Variable x = leaf({1.0}, {1});
  Variable y = x;
  for (int i = 0; i < 100000; ++i) y = y * 1.0;
  sum(y).backward();
  CHECK(x.grad().item() == 1.0);
}

TEST_CASE("only leaves of float dtype can require grad", "[engine]") {
  CHECK_THROWS_WITH(Variable(Tensor::zeros({2}, DType::Int64), true), Catch::Contains("int64"));
  Variable x = leaf({1.0}, {1});
  Variable y = x * 2.0;
  CHECK_THROWS_AS(y.set_requires_grad(false), Error);
  CHECK_THROWS_AS(y.register_post_accumulate_grad_hook([](Variable&) {}), Error);
}

TEST_CASE("leaf gradients never alias each other or the graph", "[engine]") {
  // add passes its gradient through to both inputs: the engine adopts a
  // gradient buffer only when nothing else holds it, so a.grad and b.grad
  // must be separate buffers; the same for a chain that ends in one leaf.
  Variable a = leaf({1.0, 2.0}, {2}), b = leaf({3.0, 4.0}, {2});
  Variable s = sum(a + b);
  s.backward();
  REQUIRE_FALSE(a.grad().shares_storage(b.grad()));
  a.grad().fill_(5.0);
  CHECK(b.grad().to_vector<double>() == std::vector<double>{1.0, 1.0});
  // Adopted buffers accumulate in place on the next backward.
  Variable c = leaf({1.0, 2.0}, {2});
  sum(c * c).backward();
  sum(c * c).backward();
  CHECK(c.grad().to_vector<double>() == std::vector<double>{4.0, 8.0});
  CHECK(c.grad().storage().use_count() == 1);
}

TEST_CASE("a leaf adopts the gradient buffer its op's backward made (no copy of it)", "[engine]") {
  // An op whose backward returns a fresh tensor nobody else holds: the leaf's .grad
  // must be that very buffer (a parameter's gradient is not copied once a step).
  Variable w = leaf({1.0, 2.0, 3.0}, {3});
  const void* made = nullptr;
  Variable y = record("scale2", {w}, kernels::mul_scalar(w.data(), 2.0), [&made](const Tensor& g) -> Grads {
    Tensor d = kernels::mul_scalar(g, 2.0);
    made = d.data<double>();
    return {d};
  });
  sum(y).backward();
  CHECK(w.grad().data<double>() == made);
  CHECK(w.grad().to_vector<double>() == std::vector<double>{2.0, 2.0, 2.0});
  // Through an intermediate node as well: x -> scale2 -> scale2 -> w.
  Variable v = leaf({1.0}, {1});
  const void* inner = nullptr;
  auto scale2 = [](const Variable& in, const void** seen) {
    return record("scale2", {in}, kernels::mul_scalar(in.data(), 2.0), [seen](const Tensor& g) -> Grads {
      Tensor d = kernels::mul_scalar(g, 2.0);
      *seen = d.data<double>();
      return {d};
    });
  };
  const void* outer = nullptr;
  sum(scale2(scale2(v, &inner), &outer)).backward();
  CHECK(v.grad().data<double>() == inner);
  CHECK(v.grad().to_vector<double>() == std::vector<double>{4.0});
}
