// kernels::matmul / matmul_into against a plain triple loop in double: odd
// sizes, all four transpose combos, batches with a broadcast operand, strided
// and transposed views, alpha / beta accumulate, strided outputs, the
// primitive cache, and errors that name the shapes.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/kernels/matmul.h"
#include "matmul_testing.h"

using namespace ember;
using kernels::matmul;
using kernels::matmul_into;

namespace {

using testing::for_each_odd_matmul;
using testing::max_abs_diff;
using testing::reference_matmul;

// Inputs are uniform in [-1, 1): the error of a K-term sum stays below K * eps.
double tolerance(DType dt, int64_t K) {
  return (dt == DType::Float32 ? 2e-6 : 1e-13) * (K + 1);
}

Tensor uniform(const Shape& shape, DType dt, uint64_t seed) {
  return Tensor::rand(shape, seed, 0, dt, -1, 1);
}

template <class T>
constexpr DType dt_of() {
  return dtype_of<T>();
}

}  // namespace

TEMPLATE_TEST_CASE("matmul matches a triple loop for odd sizes and all transposes", "[matmul]",
                   float, double) {
  const DType dt = dt_of<TestType>();
  for_each_odd_matmul([&](int64_t M, int64_t N, int64_t K, bool ta, bool tb, uint64_t sa,
                          uint64_t sb) {
    const Tensor a = uniform(ta ? Shape{K, M} : Shape{M, K}, dt, sa);
    const Tensor b = uniform(tb ? Shape{N, K} : Shape{K, N}, dt, sb);
    const Tensor c = matmul(a, b, ta, tb);
    CHECK(c.shape() == Shape{M, N});
    CHECK(c.dtype() == dt);
    CHECK(max_abs_diff(c, reference_matmul(a, b, ta, tb)) < tolerance(dt, K));
  });
}

TEMPLATE_TEST_CASE("batched matmul broadcasts batch dims and 2-D operands", "[matmul]", float,
                   double) {
  const DType dt = dt_of<TestType>();
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const std::vector<Case> cases = {
      {{3, 5, 7}, {7, 4}, false, false},        // x[B, T, C] @ W: folds into one 2-D gemm
      {{3, 5, 7}, {4, 7}, false, true},         // x @ W^T (Linear)
      {{3, 7, 5}, {7, 4}, true, false},         // batch cannot fold (A transposed)
      {{5, 7}, {3, 7, 4}, false, false},        // shared A, batched B
      {{2, 3, 5, 7}, {3, 7, 4}, false, false},  // leading batch dim broadcast
      {{2, 1, 5, 7}, {1, 3, 4, 7}, false, true},
      {{8, 33, 16}, {8, 33, 16}, false, true},  // attention scores q k^T
      {{8, 33, 33}, {8, 33, 16}, true, false},  // dV = P^T dY
  };
  uint64_t seed = 100;
  for (const Case& cs : cases) {
    CAPTURE(shape_str(cs.a), shape_str(cs.b), cs.ta, cs.tb);
    const Tensor a = uniform(cs.a, dt, seed++), b = uniform(cs.b, dt, seed++);
    const Tensor c = matmul(a, b, cs.ta, cs.tb);
    const Tensor r = reference_matmul(a, b, cs.ta, cs.tb);
    CHECK(c.shape() == r.shape());
    CHECK(max_abs_diff(c, r) < tolerance(dt, cs.ta ? cs.a[cs.a.size() - 2] : cs.a.back()));
  }
}

TEMPLATE_TEST_CASE("matmul reads transposed views, slices and expanded operands", "[matmul]", float,
                   double) {
  const DType dt = dt_of<TestType>();
  const Tensor big = uniform({40, 70}, dt, 7);
  const Tensor rows = big.narrow(1, 3, 33);                  // [40, 33], row stride 70
  const Tensor cols = big.transpose(0, 1).narrow(0, 5, 33);  // [33, 40], column-major
  const Tensor step = big.slice(1, 0, 66, 2);                // [40, 33], no unit stride: copied
  const Tensor w = uniform({33, 9}, dt, 8);
  for (const Tensor& a : {rows, step})
    CHECK(max_abs_diff(matmul(a, w), reference_matmul(a, w, false, false)) < tolerance(dt, 33));
  CHECK(max_abs_diff(matmul(cols, rows), reference_matmul(cols, rows, false, false)) < tolerance(dt, 40));
  CHECK(max_abs_diff(matmul(rows, cols, true, true), reference_matmul(rows, cols, true, true)) <
        tolerance(dt, 40));
  // Batched slices: q and k as strided views of one fused qkv [B, T, 3C].
  const Tensor qkv = uniform({4, 17, 3 * 8}, dt, 9);
  const Tensor q = qkv.narrow(2, 0, 8), k = qkv.narrow(2, 8, 8);
  CHECK(max_abs_diff(matmul(q, k, false, true), reference_matmul(q, k, false, true)) < tolerance(dt, 8));
  // Heads split out of qkv: q, k, v are [B, H, T, D] views with strides (T*3C, D, 3C, 1),
  // and the output goes straight into y [B, T, H, D] through a transposed view.
  const int64_t B = 2, T = 9, H = 3, D = 4, C = H * D;
  const Tensor qkv4 = uniform({B, T, 3 * C}, dt, 13);
  auto head = [&](int64_t i) {
    return qkv4.narrow(2, i * C, C).view({B, T, H, D}).transpose(1, 2);
  };
  const Tensor qh = head(0), kh = head(1), vh = head(2);
  const Tensor s = matmul(qh, kh, false, true);  // [B, H, T, T]
  CHECK(max_abs_diff(s, reference_matmul(qh, kh, false, true)) < tolerance(dt, D));
  Tensor y = Tensor::zeros({B, T, H, D}, dt);
  Tensor yh = y.transpose(1, 2);
  matmul_into(yh, s, vh);
  CHECK(max_abs_diff(yh, reference_matmul(s, vh, false, false)) < tolerance(dt, T) * 8);
  // An operand expanded over the batch (stride 0), and an expanded inner dim (copied).
  const Tensor e = uniform({1, 6, 5}, dt, 10).expand({3, 6, 5});
  const Tensor x = uniform({3, 4, 6}, dt, 11);
  CHECK(max_abs_diff(matmul(x, e), reference_matmul(x, e, false, false)) < tolerance(dt, 6));
  const Tensor col = uniform({6, 1}, dt, 12).expand({6, 5});
  CHECK(max_abs_diff(matmul(x, col), reference_matmul(x, col, false, false)) < tolerance(dt, 6));
}

TEMPLATE_TEST_CASE("matmul_into honours alpha, beta and strided outputs", "[matmul]", float,
                   double) {
  const DType dt = dt_of<TestType>();
  const int64_t M = 37, N = 29, K = 19;
  const Tensor a = uniform({M, K}, dt, 20), b = uniform({N, K}, dt, 21);
  const Tensor ab = reference_matmul(a, b, false, true);
  const std::vector<std::pair<double, double>> coeffs = {{1, 1}, {0.5, 1}, {2, 0}, {-1, 2}};
  for (auto [alpha, beta] : coeffs) {
    const Tensor c0 = uniform({M, N}, dt, 22);
    // expected = alpha * A B^T + beta * C0, computed in double
    const auto vab = ab.to_vector<double>(), vc0 = c0.to_vector<double>();
    std::vector<double> want(vab.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = alpha * vab[i] + beta * vc0[i];
    const Tensor expected = Tensor::from_vector(want, {M, N});
    // Contiguous, row-strided (a narrow of a wider buffer) and column-major outputs.
    const Tensor wide = Tensor::zeros({M, N + 11}, dt);
    const Tensor trans = Tensor::zeros({N, M}, dt);
    std::vector<Tensor> outs = {Tensor::empty({M, N}, dt), wide.narrow(1, 4, N),
                                trans.transpose(0, 1)};
    // A as given and read transposed from [K, M] (the weight-gradient layout).
    const Tensor a_t = a.transpose(0, 1).contiguous();
    for (size_t o = 0; o < 2 * outs.size(); ++o) {
      const bool ta = o >= outs.size();
      CAPTURE(alpha, beta, o, ta);
      Tensor& c = outs[o % outs.size()];
      c.copy_(c0);
      const uint64_t version = c.version();
      matmul_into(c, ta ? a_t : a, b, ta, true, alpha, beta);
      CHECK(c.version() > version);
      CHECK(max_abs_diff(c, expected) < 4 * tolerance(dt, K));
    }
    CHECK(wide.narrow(1, 0, 4).to_vector<double>() == std::vector<double>(M * 4, 0.0));
  }
}

TEST_CASE("matmul_into accumulates batched gradients with beta = 1", "[matmul]") {
  // dW += dY^T X over a folded batch, twice: the second call doubles the first.
  const Tensor dy = uniform({3, 11, 6}, DType::Float32, 30),
               x = uniform({3, 11, 5}, DType::Float32, 31);
  Tensor dw = Tensor::zeros({6, 5});
  const Tensor dy2 = dy.reshape({33, 6}), x2 = x.reshape({33, 5});
  matmul_into(dw, dy2, x2, true, false, 1, 1);
  matmul_into(dw, dy2, x2, true, false, 1, 1);
  const Tensor once = reference_matmul(dy2, x2, true, false);
  const auto v = dw.to_vector<double>(), r = once.to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) CHECK(std::abs(v[i] - 2 * r[i]) < 1e-4);
  // Batched output with a strided C: [2, M, N] views of a [2, M, N + 3] buffer.
  const Tensor q = uniform({2, 9, 4}, DType::Float32, 32),
               k = uniform({2, 7, 4}, DType::Float32, 33);
  Tensor buf = Tensor::ones({2, 9, 10});
  Tensor c = buf.narrow(2, 3, 7);
  matmul_into(c, q, k, false, true, 1, 1);
  const Tensor want = reference_matmul(q, k, false, true);
  const auto vc = c.to_vector<double>(), vw = want.to_vector<double>();
  for (size_t i = 0; i < vc.size(); ++i) CHECK(std::abs(vc[i] - (vw[i] + 1)) < 1e-5);
}

TEST_CASE("empty inner dimension gives zeros or leaves C scaled by beta", "[matmul]") {
  const Tensor a = Tensor::empty({3, 0}), b = Tensor::empty({0, 4});
  CHECK(matmul(a, b).to_vector<float>() == std::vector<float>(12, 0.0f));
  Tensor c = Tensor::full({3, 4}, 2.0);
  matmul_into(c, a, b, false, false, 1, 1);
  CHECK(c.to_vector<float>() == std::vector<float>(12, 2.0f));
  CHECK(matmul(Tensor::empty({0, 5}), Tensor::empty({5, 4})).shape() == Shape{0, 4});
}

TEST_CASE("matmul primitives are created once per shape", "[matmul]") {
  const Tensor a = uniform({13, 19}, DType::Float32, 40), b = uniform({19, 17}, DType::Float32, 41);
  const Tensor first = matmul(a, b);
  const int64_t size = kernels::matmul_primitive_cache_size();
  CHECK(size >= 1);
  const Tensor a2 = uniform({13, 19}, DType::Float32, 42);
  const Tensor second = matmul(a2, b);  // same shape, different data
  CHECK(kernels::matmul_primitive_cache_size() == size);
  CHECK(max_abs_diff(second, reference_matmul(a2, b, false, false)) < 1e-4);
  matmul(a, b, false, false);
  CHECK(kernels::matmul_primitive_cache_size() == size);
  matmul(a, uniform({19, 5}, DType::Float32, 43));  // a different problem: one more primitive
  CHECK(kernels::matmul_primitive_cache_size() == size + 1);
  // A read transposed (weight gradients) runs on oneDNN's sgemm: no primitive.
  CHECK(max_abs_diff(matmul(b, a, true, true), reference_matmul(b, a, true, true)) < 1e-4);
  CHECK(kernels::matmul_primitive_cache_size() == size + 1);
  // float64 never touches oneDNN
  matmul(a.to(DType::Float64), b.to(DType::Float64));
  CHECK(kernels::matmul_primitive_cache_size() == size + 1);
}

TEST_CASE("matmul errors name the shapes and flags", "[matmul]") {
  using Catch::Contains;
  const Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4, 5});
  REQUIRE_THROWS_AS(matmul(a, b), Error);
  REQUIRE_THROWS_WITH(matmul(a, b), Contains("[2, 3]") && Contains("[4, 5]") &&
                                        Contains("inner dimensions") && Contains("3 vs 4"));
  REQUIRE_THROWS_WITH(matmul(a, b, true, false), Contains("trans_a=1") && Contains("2 vs 4"));
  REQUIRE_THROWS_WITH(matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({5, 4, 6})),
                      Contains("[2, 3, 4]") && Contains("[5, 4, 6]") && Contains("broadcast"));
  REQUIRE_THROWS_WITH(
      matmul(Tensor::zeros({2, 3}, DType::Int32), Tensor::zeros({3, 2}, DType::Int32)),
      Contains("int32"));
  REQUIRE_THROWS_WITH(matmul(Tensor::zeros({2, 3}), Tensor::zeros({3, 2}, DType::Float64)),
                      Contains("float32") && Contains("float64"));
  REQUIRE_THROWS_WITH(matmul(Tensor::zeros({3}), Tensor::zeros({3, 2})), Contains("[3]"));
  Tensor c = Tensor::zeros({2, 4});
  REQUIRE_THROWS_WITH(matmul_into(c, a, Tensor::zeros({3, 5})),
                      Contains("[2, 4]") && Contains("[2, 5]"));
}
