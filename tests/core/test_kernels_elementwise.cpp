// Binary elementwise kernels against plain reference loops: broadcasting, all
// layouts (transposed, sliced, expanded), float32/float64 and integer dtypes,
// scalar forms, clamp, in-place add_ / mul_scalar_, comparisons, where,
// masked_fill, and the errors for mismatched dtypes and shapes.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/kernels/elementwise.h"
#include "kernel_testing.h"

using namespace ember;
using namespace ember::testing;
namespace k = ember::kernels;

namespace {

using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);

struct ShapePair {
  Shape a, b, out;
};

std::vector<ShapePair> shape_pairs(int64_t n) {
  return {{{n}, {n}, {n}},
          {{3, n}, {n}, {3, n}},
          {{3, 1}, {1, n}, {3, n}},
          {{}, {3, n}, {3, n}},
          {{2, 3, n}, {3, 1}, {2, 3, n}}};
}

// want[i] = f(a[i], b[i]) on the inputs broadcast to out.
template <class F>
std::vector<double> ref_binary(const Tensor& a, const Tensor& b, const Shape& out, F f) {
  const std::vector<double> x = a.expand(out).to_vector<double>();
  const std::vector<double> y = b.expand(out).to_vector<double>();
  std::vector<double> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = f(x[i], y[i]);
  return r;
}

// Runs fn over every shape pair, size and layout combination against ref.
template <class F>
void check_binary(BinaryFn fn, F ref, DType dt, double lo, double hi, bool exact = false) {
  uint64_t seed = 1;
  for (int64_t n : {1, 7, 257}) {
    for (const ShapePair& sp : shape_pairs(n)) {
      for (const Layout& la : layouts(sp.a, dt, seed += 10, lo, hi)) {
        for (const Layout& lb : layouts(sp.b, dt, seed += 10, lo, hi)) {
          INFO("n " << n << ", a " << shape_str(sp.a) << " " << la.name << ", b "
                    << shape_str(sp.b) << " " << lb.name << ", " << dtype_name(dt));
          const Tensor y = fn(la.t, lb.t);
          REQUIRE(y.shape() == sp.out);
          REQUIRE(y.dtype() == dt);
          REQUIRE(y.is_contiguous());
          const std::vector<double> want = ref_binary(la.t, lb.t, sp.out, ref);
          if (exact) {
            CHECK(y.to_vector<double>() == want);
          } else {
            check_close(y, want);
          }
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("binary float ops match reference loops in every layout", "[kernels][elementwise]") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    check_binary(k::add, [](double x, double y) { return x + y; }, dt, -3, 3);
    check_binary(k::sub, [](double x, double y) { return x - y; }, dt, -3, 3);
    check_binary(k::mul, [](double x, double y) { return x * y; }, dt, -3, 3);
    check_binary(k::div, [](double x, double y) { return x / y; }, dt, 0.5, 3);
    check_binary(k::pow, [](double x, double y) { return std::pow(x, y); }, dt, 0.1, 3);
    check_binary(k::maximum, [](double x, double y) { return std::max(x, y); }, dt, -3, 3, true);
    check_binary(k::minimum, [](double x, double y) { return std::min(x, y); }, dt, -3, 3, true);
  }
}

TEST_CASE("binary integer ops are exact", "[kernels][elementwise][int]") {
  for (DType dt : {DType::Int32, DType::Int64}) {
    check_binary(k::add, [](double x, double y) { return x + y; }, dt, -20, 20, true);
    check_binary(k::sub, [](double x, double y) { return x - y; }, dt, -20, 20, true);
    check_binary(k::mul, [](double x, double y) { return x * y; }, dt, -20, 20, true);
    check_binary(k::div, [](double x, double y) { return std::trunc(x / y); }, dt, 1, 20, true);
    check_binary(k::maximum, [](double x, double y) { return std::max(x, y); }, dt, -9, 9, true);
    check_binary(k::minimum, [](double x, double y) { return std::min(x, y); }, dt, -9, 9, true);
  }
  Tensor a = Tensor::from_vector<int32_t>({-7, 7, std::numeric_limits<int32_t>::min()});
  Tensor b = Tensor::from_vector<int32_t>({2, -2, -1});
  CHECK(k::div(a, b).to_vector<int32_t>() ==
        std::vector<int32_t>{-3, -3, std::numeric_limits<int32_t>::min()});
  REQUIRE_THROWS_WITH(k::div(a, Tensor::from_vector<int32_t>({1, 0, 1})),
                      Catch::Contains("division by zero"));
}

TEST_CASE("maximum and minimum propagate NaN", "[kernels][elementwise]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = Tensor::from_vector<double>({nan, 1, 2, nan});
  Tensor b = Tensor::from_vector<double>({1, nan, 1, nan});
  for (Tensor y : {k::maximum(a, b), k::minimum(a, b)}) {
    const auto v = y.to_vector<double>();
    CHECK(std::isnan(v[0]));
    CHECK(std::isnan(v[1]));
    CHECK(!std::isnan(v[2]));
    CHECK(std::isnan(v[3]));
  }
}

TEST_CASE("scalar ops and clamp", "[kernels][elementwise]") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int64_t n : {1, 7, 257}) {
      for (const Layout& l : layouts({3, n}, dt, 40 + n, 0.1, 4)) {
        INFO(l.name << ", n " << n << ", " << dtype_name(dt));
        const std::vector<double> x = l.t.to_vector<double>();
        auto ref = [&](auto f) {
          std::vector<double> r(x.size());
          for (size_t i = 0; i < x.size(); ++i) r[i] = f(x[i]);
          return r;
        };
        check_close(k::add_scalar(l.t, 1.5), ref([](double v) { return v + 1.5; }));
        check_close(k::mul_scalar(l.t, -0.25), ref([](double v) { return v * -0.25; }));
        check_close(k::rsub_scalar(l.t, 2), ref([](double v) { return 2 - v; }));
        check_close(k::clamp(l.t, 1, 2.5), ref([](double v) { return std::min(std::max(v, 1.0), 2.5); }));
        for (double p : {0.0, 1.0, 2.0, 3.0, -1.0, 0.5, -0.5, 1.7, -2.3}) {
          INFO("p = " << p);
          check_close(k::pow_scalar(l.t, p), ref([p](double v) { return std::pow(v, p); }));
        }
      }
    }
  }
  // clamp with lo > hi gives hi (torch.clamp); NaN stays NaN; ints clamp too.
  Tensor v = Tensor::from_vector<float>({-1, 5, std::numeric_limits<float>::quiet_NaN()});
  const auto c = k::clamp(v, 3, 2).to_vector<float>();
  CHECK(c[0] == 2);
  CHECK(c[1] == 2);
  CHECK(std::isnan(c[2]));
  Tensor iv = Tensor::from_vector<int64_t>({-5, 0, 9});
  CHECK(k::clamp(iv, -1, std::numeric_limits<double>::infinity()).to_vector<int64_t>() ==
        std::vector<int64_t>{-1, 0, 9});
  CHECK(k::add_scalar(iv, 2).to_vector<int64_t>() == std::vector<int64_t>{-3, 2, 11});
  CHECK(k::mul_scalar(iv, 0.5).to_vector<int64_t>() == std::vector<int64_t>{-2, 0, 4});
  CHECK(k::rsub_scalar(iv, 1).dtype() == DType::Int64);
  REQUIRE_THROWS_WITH(k::pow_scalar(iv, 2), Catch::Contains("pow_scalar") && Catch::Contains("int64"));
}

TEST_CASE("add_ and mul_scalar_ write in place through strided views", "[kernels][elementwise]") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int64_t n : {1, 7, 257}) {
      // dst: every other column of a transposed [2n+1, 3] buffer, i.e. a [3, n] strided view.
      Tensor base = random({2 * n + 1, 3}, dt, 70 + n);
      const std::vector<double> before = base.to_vector<double>();
      Tensor dst = base.transpose(0, 1).slice(1, 0, 2 * n, 2);
      REQUIRE(dst.shape() == Shape{3, n});
      const std::vector<double> d0 = dst.to_vector<double>();
      Tensor src = random({n}, dt, 80 + n);
      const std::vector<double> s = src.expand({3, n}).to_vector<double>();
      const uint64_t v0 = dst.version();
      k::add_(dst, src, 0.5);
      CHECK(dst.version() > v0);
      std::vector<double> want(d0.size());
      for (size_t i = 0; i < d0.size(); ++i) want[i] = d0[i] + 0.5 * s[i];
      check_close(dst, want);
      // Elements outside the view are untouched (odd rows of base).
      const std::vector<double> after = base.to_vector<double>();
      for (int64_t r = 1; r < 2 * n + 1; r += 2)
        for (int64_t c = 0; c < 3; ++c) CHECK(after[r * 3 + c] == before[r * 3 + c]);

      const uint64_t v1 = dst.version();
      k::mul_scalar_(dst, -2);
      CHECK(dst.version() > v1);
      for (double& w : want) w *= -2;
      check_close(dst, want);
    }
  }
  Tensor i = Tensor::from_vector<int32_t>({1, 2, 3});
  k::add_(i, Tensor::scalar(4, DType::Int32));
  CHECK(i.to_vector<int32_t>() == std::vector<int32_t>{5, 6, 7});
  Tensor f = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(k::add_(f, Tensor::zeros({2, 1, 3})),
                      Catch::Contains("[2, 1, 3]") && Catch::Contains("[2, 3]"));
  Tensor expanded = Tensor::zeros({1, 3}).expand({2, 3});
  REQUIRE_THROWS_WITH(k::add_(expanded, Tensor::zeros({3})), Catch::Contains("expanded"));
}

TEST_CASE("comparisons give int32 0/1 for every dtype", "[kernels][elementwise][int]") {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    for (int64_t n : {1, 7, 257}) {
      // Few distinct (integer) values so that ties occur; b broadcasts over rows.
      auto make = [dt](const Shape& s, uint64_t sd) { return random(s, DType::Int64, sd, 0, 3).to(dt); };
      const Tensor b = make({n}, 91 + n);
      for (const Layout& la : layouts_of({3, n}, 90 + n, make)) {
        const Tensor& a = la.t;
        INFO(la.name << ", n " << n << ", " << dtype_name(dt));
        auto check = [&](BinaryFn fn, auto f) {
          const Tensor y = fn(a, b);
          CHECK(y.dtype() == DType::Int32);
          CHECK(y.to_vector<double>() == ref_binary(a, b, {3, n}, [f](double x, double z) {
                  return f(x, z) ? 1.0 : 0.0;
                }));
        };
        check(k::eq, [](double x, double y) { return x == y; });
        check(k::ne, [](double x, double y) { return x != y; });
        check(k::lt, [](double x, double y) { return x < y; });
        check(k::le, [](double x, double y) { return x <= y; });
        check(k::gt, [](double x, double y) { return x > y; });
        check(k::ge, [](double x, double y) { return x >= y; });
      }
    }
  }
}

TEST_CASE("where broadcasts all three operands", "[kernels][elementwise]") {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int64}) {
    for (DType ct : {DType::Int32, DType::Float32}) {
      for (int64_t n : {1, 7, 257}) {
        const Tensor cond = random({3, 1}, DType::Int32, 100 + n, -1, 2).to(ct);  // -1, 0, 1
        for (const Layout& la : layouts({3, n}, dt, 110 + n)) {
          const Tensor b = random({n}, dt, 120 + n);
          const Tensor y = k::where(cond, la.t, b);
          REQUIRE(y.shape() == Shape{3, n});
          const std::vector<double> c = cond.expand({3, n}).to_vector<double>();
          const std::vector<double> x = la.t.to_vector<double>();
          const std::vector<double> z = b.expand({3, n}).to_vector<double>();
          std::vector<double> want(x.size());
          for (size_t i = 0; i < x.size(); ++i) want[i] = c[i] != 0 ? x[i] : z[i];
          INFO(la.name << ", n " << n);
          CHECK(y.to_vector<double>() == want);
        }
      }
    }
  }
  REQUIRE_THROWS_WITH(k::where(Tensor::ones({4}), Tensor::ones({3}), Tensor::ones({3})),
                      Catch::Contains("where") && Catch::Contains("[4]"));
}

TEST_CASE("masked_fill sets masked elements", "[kernels][elementwise]") {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32}) {
    for (int64_t n : {1, 7, 257}) {
      for (const Layout& la : layouts({3, n}, dt, 130 + n)) {
        const Tensor mask = random({1, n}, DType::Int32, 140 + n, 0, 2);
        const Tensor y = k::masked_fill(la.t, mask, -9);
        const std::vector<double> m = mask.expand({3, n}).to_vector<double>();
        const std::vector<double> x = la.t.to_vector<double>();
        std::vector<double> want(x.size());
        for (size_t i = 0; i < x.size(); ++i) want[i] = m[i] != 0 ? -9 : x[i];
        INFO(la.name << ", n " << n);
        CHECK(y.to_vector<double>() == want);
      }
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  Tensor y = k::masked_fill(Tensor::zeros({2, 2}), Tensor::from_vector<int32_t>({0, 1}), -inf);
  CHECK(y.to_vector<double>() == std::vector<double>{0, -inf, 0, -inf});
  REQUIRE_THROWS_WITH(k::masked_fill(Tensor::zeros({2, 3}), Tensor::ones({4, 1}, DType::Int32), 0),
                      Catch::Contains("[4, 1]") && Catch::Contains("[2, 3]"));
}

TEST_CASE("mismatched dtypes and shapes are errors naming them", "[kernels][elementwise][errors]") {
  const Tensor f32 = Tensor::zeros({2, 3}), f64 = Tensor::zeros({2, 3}, DType::Float64);
  const Tensor i32 = Tensor::zeros({2, 3}, DType::Int32);
  for (BinaryFn fn : {BinaryFn(k::add), BinaryFn(k::sub), BinaryFn(k::mul), BinaryFn(k::div),
                      BinaryFn(k::pow), BinaryFn(k::maximum), BinaryFn(k::eq), BinaryFn(k::lt),
                      BinaryFn(k::silu_backward), BinaryFn(k::gelu_backward)}) {
    REQUIRE_THROWS_AS(fn(f32, f64), Error);
    REQUIRE_THROWS_WITH(fn(f32, f64), Catch::Contains("float32") && Catch::Contains("float64"));
    REQUIRE_THROWS_WITH(fn(f32, Tensor::zeros({4})),
                        Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  }
  REQUIRE_THROWS_WITH(k::add(f32, f64), Catch::Contains("add"));
  REQUIRE_THROWS_WITH(k::mul(i32, f32), Catch::Contains("mul") && Catch::Contains("int32"));
  REQUIRE_THROWS_WITH(k::pow(i32, i32), Catch::Contains("pow") && Catch::Contains("int32"));
  REQUIRE_THROWS_WITH(k::where(i32, f32, f64), Catch::Contains("float64"));
  Tensor dst = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(k::add_(dst, f64), Catch::Contains("float32") && Catch::Contains("float64"));
  REQUIRE_THROWS_AS(k::add(Tensor(), f32), Error);
}

TEST_CASE("large tensors split across threads match the serial result", "[kernels][elementwise]") {
  // 3 * 100003 elements: above the parallel grain, odd row length.
  const Tensor a = random({3, 100003}, DType::Float32, 150);
  const Tensor b = random({100003}, DType::Float32, 151);
  const std::vector<double> want = ref_binary(a, b, {3, 100003}, [](double x, double y) {
    return static_cast<double>(static_cast<float>(x) * static_cast<float>(y));
  });
  CHECK(k::mul(a, b).to_vector<double>() == want);
  CHECK(k::mul(a.transpose(0, 1).contiguous().transpose(0, 1), b).to_vector<double>() == want);
}
