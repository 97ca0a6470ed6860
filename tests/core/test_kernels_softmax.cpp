// Softmax and log-softmax over the last dim against reference loops in
// double, in every layout and on rows of 1, 7 and 257; stability for large and
// infinite inputs; backward against finite differences (float64) and the
// header formulas (float32); errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/kernels/softmax.h"
#include "kernel_testing.h"

using namespace ember;
using namespace ember::testing;
namespace k = ember::kernels;

namespace {

// Softmax (or log-softmax) of each row of C values, in double.
std::vector<double> ref_softmax(const std::vector<double>& x, int64_t C, bool log) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / C; ++r) {
    const double* xr = &x[r * C];
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < C; ++i) m = std::max(m, xr[i]);
    double s = 0;
    for (int64_t i = 0; i < C; ++i) s += std::exp(xr[i] - m);
    for (int64_t i = 0; i < C; ++i)
      y[r * C + i] = log ? xr[i] - m - std::log(s) : std::exp(xr[i] - m) / s;
  }
  return y;
}

}  // namespace

TEST_CASE("softmax and log_softmax match the reference in every layout", "[kernels][softmax]") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int64_t n : {1, 7, 257}) {
      for (const Shape& shape : {Shape{1, n}, Shape{3, n}, Shape{2, 3, n}, Shape{300, n}}) {
        for (const Layout& l : layouts(shape, dt, 5 * n, -8, 8)) {
          INFO(dtype_name(dt) << " shape " << shape_str(shape) << " " << l.name);
          const std::vector<double> x = l.t.to_vector<double>();
          const Tensor y = k::softmax(l.t);
          REQUIRE(y.shape() == shape);
          REQUIRE(y.dtype() == dt);
          check_close(y, ref_softmax(x, n, false));
          check_close(k::log_softmax(l.t), ref_softmax(x, n, true));
        }
      }
    }
  }
}

TEST_CASE("softmax is stable for large and infinite inputs", "[kernels][softmax]") {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::Float32, DType::Float64}) {
    INFO(dtype_name(dt));
    const Tensor x = Tensor::from_vector<double>({1000, 1000, -1000,  // huge values
                                                  1, -inf, 1,         // a masked entry
                                                  -inf, -inf, -inf},  // all masked
                                                 {3, 3}).to(dt);
    const auto p = k::softmax(x).to_vector<double>();
    CHECK(p[0] == Approx(0.5));
    CHECK(p[1] == Approx(0.5));
    CHECK(p[2] == 0.0);
    CHECK(p[3] == Approx(0.5));
    CHECK(p[4] == 0.0);
    CHECK(p[5] == Approx(0.5));
    for (int i = 6; i < 9; ++i) CHECK(std::isnan(p[i]));  // as in PyTorch
    const auto l = k::log_softmax(x).to_vector<double>();
    CHECK(l[0] == Approx(-std::log(2.0)));
    CHECK(l[2] == Approx(-2000 - std::log(2.0)));
    CHECK(l[4] == -inf);
    CHECK(l[5] == Approx(-std::log(2.0)));
  }
  CHECK(k::softmax(Tensor::scalar(3)).item() == 1.0);
  CHECK(k::log_softmax(Tensor::scalar(3)).item() == 0.0);
  CHECK(k::softmax(Tensor::zeros({4, 0})).shape() == Shape{4, 0});
}

TEST_CASE("softmax backward matches finite differences", "[kernels][softmax]") {
  for (bool log : {false, true}) {
    for (int64_t C : {1, 7}) {
      const Tensor x = random({3, C}, DType::Float64, 61 + C);
      const Tensor dy = random({3, C}, DType::Float64, 62 + C);
      const std::vector<double> xv = x.to_vector<double>(), gv = dy.to_vector<double>();
      // dL/dx_i for L = sum(dy * f(x)), by central differences of the reference.
      auto loss = [&](const std::vector<double>& v) {
        const std::vector<double> y = ref_softmax(v, C, log);
        double s = 0;
        for (size_t i = 0; i < y.size(); ++i) s += gv[i] * y[i];
        return s;
      };
      std::vector<double> want(xv.size());
      for (size_t i = 0; i < xv.size(); ++i) {
        std::vector<double> up = xv, down = xv;
        up[i] += 1e-6;
        down[i] -= 1e-6;
        want[i] = (loss(up) - loss(down)) / 2e-6;
      }
      const Tensor y = log ? k::log_softmax(x) : k::softmax(x);
      // Transposed dy: backward makes its rows contiguous itself.
      const Tensor dyt = dy.transpose(0, 1).contiguous().transpose(0, 1);
      const Tensor dx = log ? k::log_softmax_backward(y, dyt) : k::softmax_backward(y, dyt);
      INFO((log ? "log_softmax" : "softmax") << " C " << C);
      check_close(dx, want, 1e-7, 1e-8);
    }
  }
}

TEST_CASE("float32 softmax backward follows the header formulas", "[kernels][softmax]") {
  for (int64_t n : {1, 7, 257}) {
    for (const Layout& l : layouts({3, n}, DType::Float32, 71 + n)) {
      const Tensor y = k::softmax(random({3, n}, DType::Float32, 72 + n));
      const Tensor ly = k::log_softmax(random({3, n}, DType::Float32, 73 + n));
      const std::vector<double> g = l.t.to_vector<double>();
      const std::vector<double> yv = y.to_vector<double>(), lv = ly.to_vector<double>();
      std::vector<double> want(g.size()), lwant(g.size());
      for (int64_t r = 0; r < 3; ++r) {
        double dot = 0, sum = 0;
        for (int64_t i = 0; i < n; ++i) {
          dot += g[r * n + i] * yv[r * n + i];
          sum += g[r * n + i];
        }
        for (int64_t i = 0; i < n; ++i) {
          want[r * n + i] = yv[r * n + i] * (g[r * n + i] - dot);                 // y (dy - sum(dy y))
          lwant[r * n + i] = g[r * n + i] - std::exp(lv[r * n + i]) * sum;  // dy - exp(y) sum(dy)
        }
      }
      INFO("n " << n << " dy " << l.name);
      check_close(k::softmax_backward(y, l.t), want, 1e-5, 2e-6);
      check_close(k::log_softmax_backward(ly, l.t), lwant, 1e-5, 2e-6);
    }
  }
}

TEST_CASE("softmax errors name dtypes and shapes", "[kernels][softmax][errors]") {
  const Tensor i = Tensor::zeros({2, 3}, DType::Int32);
  REQUIRE_THROWS_WITH(k::softmax(i), Catch::Contains("softmax") && Catch::Contains("int32"));
  REQUIRE_THROWS_WITH(k::log_softmax(i), Catch::Contains("int32"));
  const Tensor y = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(k::softmax_backward(y, Tensor::zeros({3, 2})),
                      Catch::Contains("[2, 3]") && Catch::Contains("[3, 2]"));
  REQUIRE_THROWS_WITH(k::log_softmax_backward(y, Tensor::zeros({2, 3}, DType::Float64)),
                      Catch::Contains("float32") && Catch::Contains("float64"));
  REQUIRE_THROWS_AS(k::softmax(Tensor()), Error);
}
