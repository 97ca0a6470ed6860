// Unary elementwise kernels and the fused activation backward kernels against
// std:: reference functions in double (backward: central finite differences of
// the reference forward), in every layout; a ulp sweep of the float32 exp and
// tanh over their whole range; extreme inputs; integer dtypes and errors.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <limits>

#include "core/kernels/elementwise.h"
#include "kernel_testing.h"

using namespace ember;
using namespace ember::testing;
namespace k = ember::kernels;

namespace {

using UnaryFn = Tensor (*)(const Tensor&);
using RefFn = double (*)(double);

double ref_sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double ref_gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double ref_gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

struct UnaryCase {
  const char* name;
  UnaryFn fn;
  RefFn ref;
  double lo, hi;
};

const UnaryCase kUnary[] = {
    {"neg", k::neg, [](double x) { return -x; }, -5, 5},
    {"exp", k::exp, [](double x) { return std::exp(x); }, -20, 20},
    {"log", k::log, [](double x) { return std::log(x); }, 0.01, 50},
    {"sqrt", k::sqrt, [](double x) { return std::sqrt(x); }, 0.01, 50},
    {"rsqrt", k::rsqrt, [](double x) { return 1 / std::sqrt(x); }, 0.01, 50},
    {"tanh", k::tanh, [](double x) { return std::tanh(x); }, -6, 6},
    {"sigmoid", k::sigmoid, ref_sigmoid, -12, 12},
    {"silu", k::silu, [](double x) { return x * ref_sigmoid(x); }, -12, 12},
    {"gelu", k::gelu, ref_gelu, -6, 6},
    {"gelu_tanh", k::gelu_tanh, ref_gelu_tanh, -6, 6},
    {"relu", k::relu, [](double x) { return x > 0 ? x : 0.0; }, -5, 5},
    {"abs", k::abs, [](double x) { return std::abs(x); }, -5, 5},
    {"sign", k::sign, [](double x) { return double((x > 0) - (x < 0)); }, -5, 5},
};

using BackwardFn = Tensor (*)(const Tensor&, const Tensor&);

// Backward kernels: f is the forward whose derivative is checked; when
// takes_output, the kernel receives y = f(x) instead of x.
struct BackwardCase {
  const char* name;
  BackwardFn fn;
  RefFn f;
  bool takes_output;
};

const BackwardCase kBackward[] = {
    {"silu_backward", k::silu_backward, [](double x) { return x * ref_sigmoid(x); }, false},
    {"gelu_backward", k::gelu_backward, ref_gelu, false},
    {"gelu_tanh_backward", k::gelu_tanh_backward, ref_gelu_tanh, false},
    {"relu_backward", k::relu_backward, [](double x) { return x > 0 ? x : 0.0; }, false},
    {"sigmoid_backward", k::sigmoid_backward, ref_sigmoid, true},
    {"tanh_backward", k::tanh_backward, [](double x) { return std::tanh(x); }, true},
};

// Distance in float32 ulps between a and the float nearest b.
int64_t ulps(float a, double b) {
  auto key = [](float v) {
    const int32_t i = std::bit_cast<int32_t>(v);
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  return std::abs(key(a) - key(static_cast<float>(b)));
}

}  // namespace

TEST_CASE("unary kernels match std:: references in every layout", "[kernels][unary]") {
  for (const UnaryCase& c : kUnary) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      for (int64_t n : {1, 7, 257}) {
        for (const Shape& shape : {Shape{n}, Shape{3, n}}) {
          for (const Layout& l : layouts(shape, dt, 7 * n, c.lo, c.hi)) {
            INFO(c.name << ", " << dtype_name(dt) << ", shape " << shape_str(shape) << " "
                        << l.name);
            const Tensor y = c.fn(l.t);
            REQUIRE(y.shape() == shape);
            REQUIRE(y.dtype() == dt);
            std::vector<double> want = l.t.to_vector<double>();
            for (double& w : want) w = c.ref(w);
            check_close(y, want);
          }
        }
      }
    }
  }
}

TEST_CASE("fused activation backward matches finite differences", "[kernels][unary]") {
  for (const BackwardCase& c : kBackward) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      for (int64_t n : {1, 7, 257}) {
        for (const Layout& l : layouts({3, n}, dt, 11 * n, -5, 5)) {
          INFO(c.name << ", " << dtype_name(dt) << ", n " << n << " " << l.name);
          const std::vector<double> x = l.t.to_vector<double>();
          const Tensor g = random({3, n}, dt, 13 * n);
          const std::vector<double> gv = g.to_vector<double>();
          std::vector<double> input(x.size()), want(x.size());
          for (size_t i = 0; i < x.size(); ++i) {
            const double h = 1e-5 * std::max(1.0, std::abs(x[i]));
            const double d = (c.f(x[i] + h) - c.f(x[i] - h)) / (2 * h);
            want[i] = gv[i] * d;
            input[i] = c.takes_output ? c.f(x[i]) : x[i];
          }
          const Tensor in = c.takes_output ? Tensor::from_vector(input, {3, n}).to(dt) : l.t;
          const Tensor got = c.fn(in, g);
          if (dt == DType::Float64) {
            check_close(got, want, 1e-8, 1e-9);
          } else {
            check_close(got, want, 2e-5, 2e-6);
          }
        }
      }
    }
  }
}

TEST_CASE("float32 exp is within 1 ulp over its whole range", "[kernels][unary]") {
  std::vector<float> xs;
  for (float x = -104.5f; x < 89.0f; x += 0.00731f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.72f, -87.33f, -103.9f}) xs.push_back(x);
  const std::vector<float> y = k::exp(Tensor::from_vector(xs)).to_vector<float>();
  int64_t worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) worst = std::max(worst, ulps(y[i], std::exp(double(xs[i]))));
  CHECK(worst <= 1);
  const float inf = std::numeric_limits<float>::infinity();
  const auto s = k::exp(Tensor::from_vector<float>(
                             {inf, -inf, std::numeric_limits<float>::quiet_NaN(), 89.0f, 0.0f}))
                     .to_vector<float>();
  CHECK(s[0] == inf);
  CHECK(s[1] == 0.0f);
  CHECK(std::isnan(s[2]));
  CHECK(s[3] == inf);
  CHECK(s[4] == 1.0f);
}

TEST_CASE("float32 tanh is within a few ulp and exact at the ends", "[kernels][unary]") {
  std::vector<float> xs;
  for (float x = -12.0f; x < 12.0f; x += 0.000913f) xs.push_back(x);
  for (float x : {1e-20f, -1e-20f, 0.3f, -0.3f, 0.29999f}) xs.push_back(x);
  const std::vector<float> y = k::tanh(Tensor::from_vector(xs)).to_vector<float>();
  int64_t worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) worst = std::max(worst, ulps(y[i], std::tanh(double(xs[i]))));
  CHECK(worst <= 4);
  const float inf = std::numeric_limits<float>::infinity();
  const auto s = k::tanh(Tensor::from_vector<float>({inf, -inf, -0.0f, 50.0f})).to_vector<float>();
  CHECK(s[0] == 1.0f);
  CHECK(s[1] == -1.0f);
  CHECK(std::signbit(s[2]));
  CHECK(s[3] == 1.0f);
}

TEST_CASE("float32 gelu and its backward are accurate in the negative tail", "[kernels][unary]") {
  std::vector<float> xs;
  for (float x = -12.0f; x < 8.0f; x += 0.000731f) xs.push_back(x);
  const Tensor x = Tensor::from_vector(xs);
  const std::vector<double> y = k::gelu(x).to_vector<double>();
  const std::vector<double> d = k::gelu_backward(x, Tensor::ones({int64_t(xs.size())})).to_vector<double>();
  double worst_rel = 0, worst_abs = 0, worst_drel = 0, worst_dabs = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
    const double want = v * cdf;
    const double dwant = cdf + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    worst_abs = std::max(worst_abs, std::abs(y[i] - want));
    worst_rel = std::max(worst_rel, std::abs(y[i] - want) / std::abs(want));
    worst_dabs = std::max(worst_dabs, std::abs(d[i] - dwant));
    if (v < -2 && dwant != 0)  // the tail (gelu' crosses 0 near -0.75)
      worst_drel = std::max(worst_drel, std::abs(d[i] - dwant) / std::abs(dwant));
  }
  CHECK(worst_abs < 1e-6);  // about 1 ulp of the largest outputs
  CHECK(worst_rel < 3e-5);  // relative, even where gelu(x) ~ 1e-32
  CHECK(worst_dabs < 2e-6);
  CHECK(worst_drel < 1e-4);
}

TEST_CASE("activations stay finite for extreme inputs", "[kernels][unary]") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    const Tensor x = Tensor::from_vector<double>({-1000, -100, 100, 1000}).to(dt);
    INFO(dtype_name(dt));
    const auto s = k::sigmoid(x).to_vector<double>();
    CHECK(s[0] == 0.0);
    CHECK(s[1] == Approx(ref_sigmoid(-100)).margin(1e-44));
    CHECK(s[2] == 1.0);
    CHECK(s[3] == 1.0);
    const auto si = k::silu(x).to_vector<double>();
    CHECK(si[0] == 0.0);
    CHECK(si[3] == 1000.0);
    const auto ge = k::gelu(x).to_vector<double>();
    CHECK(ge[0] == 0.0);
    CHECK(ge[3] == 1000.0);
    const auto gt = k::gelu_tanh(x).to_vector<double>();
    CHECK(gt[0] == 0.0);
    CHECK(gt[3] == 1000.0);
    for (BackwardFn fn : {BackwardFn(k::silu_backward), BackwardFn(k::gelu_backward),
                          BackwardFn(k::gelu_tanh_backward)}) {
      const auto d = fn(x, Tensor::ones({4}, dt)).to_vector<double>();
      CHECK(d[0] == 0.0);
      CHECK(d[3] == 1.0);
    }
  }
}

TEST_CASE("neg, abs, sign and relu on integers, math on integers is an error",
          "[kernels][unary][int]") {
  for (DType dt : {DType::Int32, DType::Int64}) {
    for (const Layout& l : layouts({3, 7}, dt, 17, -9, 9)) {
      INFO(dtype_name(dt) << " " << l.name);
      const std::vector<double> x = l.t.to_vector<double>();
      std::vector<double> neg(x.size()), abs(x.size()), sign(x.size()), relu(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        neg[i] = -x[i];
        abs[i] = x[i] < 0 ? -x[i] : x[i];
        sign[i] = x[i] > 0 ? 1 : (x[i] < 0 ? -1 : 0);
        relu[i] = x[i] > 0 ? x[i] : 0;
      }
      CHECK(k::neg(l.t).dtype() == dt);
      CHECK(k::neg(l.t).to_vector<double>() == neg);
      CHECK(k::abs(l.t).to_vector<double>() == abs);
      CHECK(k::sign(l.t).to_vector<double>() == sign);
      CHECK(k::relu(l.t).to_vector<double>() == relu);
    }
  }
  const Tensor i = Tensor::zeros({2}, DType::Int32);
  for (UnaryFn fn : {UnaryFn(k::exp), UnaryFn(k::log), UnaryFn(k::sqrt), UnaryFn(k::tanh),
                     UnaryFn(k::sigmoid), UnaryFn(k::silu), UnaryFn(k::gelu)}) {
    REQUIRE_THROWS_WITH(fn(i), Catch::Contains("int32"));
  }
  REQUIRE_THROWS_WITH(k::exp(i), Catch::Contains("exp"));
  REQUIRE_THROWS_WITH(k::relu_backward(i, i), Catch::Contains("relu_backward"));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto v = k::sign(Tensor::from_vector<double>({nan, -0.0, 2})).to_vector<double>();
  CHECK(std::isnan(v[0]));
  CHECK(v[1] == 0.0);
  CHECK(v[2] == 1.0);
  CHECK(std::isnan(k::relu(Tensor::from_vector<double>({nan})).item()));
}
