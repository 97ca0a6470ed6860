// gradcheck itself: it passes correct gradients and reports a wrong one with
// the input, element and both values.
#include <catch2/catch.hpp>

#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/kernels/elementwise.h"

using namespace ember;

// x^3 with a deliberately wrong derivative (2x^2 instead of 3x^2).
static Variable wrong_cube(const Variable& x) {
  Tensor y = kernels::mul(kernels::mul(x.data(), x.data()), x.data());
  return record("wrong_cube", {x}, y, [x = SavedTensor(x.data())](const Tensor& g) -> Grads {
    const Tensor& xv = x.get();
    return {kernels::mul_scalar(kernels::mul(g, kernels::mul(xv, xv)), 2.0)};
  });
}

TEST_CASE("gradcheck accepts correct gradients", "[gradcheck]") {
  Variable a(Tensor::randn({3, 4}, 1, 0, DType::Float64), true);
  Variable b(Tensor::randn({4}, 2, 0, DType::Float64), true);
  auto r = gradcheck([](const std::vector<Variable>& in) { return in[0] * in[1] + in[0]; }, {a, b});
  INFO(r.message);
  CHECK(r.ok);
}

TEST_CASE("gradcheck reports which input and element disagree", "[gradcheck]") {
  Variable x(Tensor::from_vector<double>({0.5, -1.5, 2.0}), true);
  auto r = gradcheck([](const std::vector<Variable>& in) { return wrong_cube(in[0]); }, {x});
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.message, Catch::Contains("input 0 element [0]") && Catch::Contains("analytic 0.5") &&
                            Catch::Contains("numeric 0.75"));
}

TEST_CASE("gradcheck in float32 uses the 4-point stencil", "[gradcheck]") {
  Variable a(Tensor::randn({5, 3}, 3, 0, DType::Float32), true);
  auto r = gradcheck([](const std::vector<Variable>& in) { return exp(in[0]) * in[0]; }, {a});
  INFO(r.message);
  CHECK(r.ok);
  Variable x(Tensor::from_vector<float>({0.5f, -1.5f}), true);
  CHECK_FALSE(gradcheck([](const std::vector<Variable>& in) { return wrong_cube(in[0]); }, {x}).ok);
}
