// Reduction kernels against a reference loop over every element (Tensor::at):
// sum, mean, amax, logsumexp over many dim sets, keepdim, in every layout;
// long rows and columns that are split into chunks, results independent of
// the thread count; sum_to_shape, argmax_last; edge cases and errors.
#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>
#include <limits>

#include "core/kernels/reduce.h"
#include "kernel_testing.h"

using namespace ember;
using namespace ember::testing;
namespace k = ember::kernels;

namespace {

using ReduceFn = Tensor (*)(const Tensor&, const std::vector<int64_t>&, bool);

struct Expected {
  Shape shape;
  std::vector<double> values;
};

enum class Op { Sum, Mean, Amax, LogSumExp };

// Reduces a over dims by visiting every element in a plain loop.
Expected reference(const Tensor& a, std::vector<int64_t> dims, bool keepdim, Op op) {
  const int64_t nd = a.dim();
  std::vector<bool> red(nd, dims.empty());
  for (int64_t d : dims) red[d < 0 ? d + nd : d] = true;
  Expected e;
  Shape kept;
  int64_t count = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (red[d]) {
      count *= a.size(d);
      if (keepdim) e.shape.push_back(1);
    } else {
      kept.push_back(a.size(d));
      e.shape.push_back(a.size(d));
    }
  }
  const int64_t M = shape_numel(kept);
  const double init = op == Op::Amax ? -std::numeric_limits<double>::infinity() : 0.0;
  std::vector<double> acc(M, init);
  for_each_index(a.shape(), [&](const Shape& idx) {
    int64_t m = 0;
    for (int64_t d = 0; d < nd; ++d)
      if (!red[d]) m = m * a.size(d) + idx[d];
    const double x = a.at(idx);
    if (op == Op::Amax) {
      acc[m] = std::max(acc[m], x);
    } else {
      acc[m] += op == Op::LogSumExp ? std::exp(x) : x;
    }
  });
  for (double& v : acc) {
    if (op == Op::Mean) v /= static_cast<double>(count);
    if (op == Op::LogSumExp) v = std::log(v);
  }
  e.values = acc;
  return e;
}

const std::vector<std::vector<int64_t>> kDimSets = {{},     {0},    {1},       {2},      {-1},
                                                    {0, 2}, {2, 0}, {-2, -1}, {0, 1, 2}, {1, 0}};

// Like layouts(), plus a permutation of a contiguous tensor.
std::vector<Layout> reduce_layouts(const Shape& shape, DType dt, uint64_t seed) {
  std::vector<Layout> ls = layouts(shape, dt, seed);
  ls.push_back({"permuted", random({shape[2], shape[0], shape[1]}, dt, seed + 5).permute({1, 2, 0})});
  return ls;
}

}  // namespace

TEST_CASE("sum, mean, amax, logsumexp over any dims in every layout", "[kernels][reduce]") {
  struct Case {
    const char* name;
    ReduceFn fn;
    Op op;
  };
  const Case cases[] = {{"sum", k::sum, Op::Sum},
                        {"mean", k::mean, Op::Mean},
                        {"amax", k::amax, Op::Amax},
                        {"logsumexp", k::logsumexp, Op::LogSumExp}};
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int64_t n : {1, 7, 257}) {
      for (const Shape& shape : {Shape{3, n, 2}, Shape{n, 5, 3}}) {
        for (const Layout& l : reduce_layouts(shape, dt, 3 * n)) {
          for (const auto& dims : kDimSets) {
            for (bool keepdim : {false, true}) {
              for (const Case& c : cases) {
                INFO(c.name << " " << dtype_name(dt) << " shape " << shape_str(shape) << " "
                            << l.name << " dims " << shape_str(dims) << " keepdim " << keepdim);
                const Expected e = reference(l.t, dims, keepdim, c.op);
                const Tensor y = c.fn(l.t, dims, keepdim);
                REQUIRE(y.shape() == e.shape);
                REQUIRE(y.dtype() == dt);
                check_close(y, e.values);
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("integer sum and amax are exact", "[kernels][reduce][int]") {
  for (DType dt : {DType::Int32, DType::Int64}) {
    for (const Layout& l : reduce_layouts({4, 9, 3}, dt, 21)) {
      for (const auto& dims : kDimSets) {
        INFO(dtype_name(dt) << " " << l.name << " dims " << shape_str(dims));
        const Tensor s = k::sum(l.t, dims);
        CHECK(s.dtype() == dt);
        CHECK(s.to_vector<double>() == reference(l.t, dims, false, Op::Sum).values);
        CHECK(k::amax(l.t, dims).to_vector<double>() ==
              reference(l.t, dims, false, Op::Amax).values);
      }
    }
  }
  REQUIRE_THROWS_WITH(k::mean(Tensor::ones({3}, DType::Int32), {}), Catch::Contains("int32"));
  REQUIRE_THROWS_WITH(k::logsumexp(Tensor::ones({3}, DType::Int64), {}), Catch::Contains("int64"));
}

TEST_CASE("long rows and columns are chunked, independent of thread count", "[kernels][reduce]") {
  struct Big {
    Shape shape;
    std::vector<int64_t> dims;
  };
  const Big bigs[] = {{{1000003}, {}},          // one long row, chunked
                      {{3, 100003}, {1}},       // long rows
                      {{100003, 3}, {0}},       // long columns, split into row chunks
                      {{50, 3001}, {0}},        // wide columns, one chunk per block
                      {{40, 41, 43}, {0, 2}},   // needs the copying fallback
                      {{5, 70001}, {}}};        // full reduction of a 2-D tensor
  const int threads = omp_get_max_threads();
  for (const Big& b : bigs) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      const Tensor a = random(b.shape, dt, 31);
      INFO("shape " << shape_str(b.shape) << " dims " << shape_str(b.dims) << " " << dtype_name(dt));
      check_close(k::sum(a, b.dims), reference(a, b.dims, false, Op::Sum).values);
      check_close(k::amax(a, b.dims), reference(a, b.dims, false, Op::Amax).values);
      check_close(k::logsumexp(a, b.dims), reference(a, b.dims, false, Op::LogSumExp).values);
      omp_set_num_threads(1);
      const std::vector<double> one = k::sum(a, b.dims).to_vector<double>();
      const std::vector<double> lse1 = k::logsumexp(a, b.dims).to_vector<double>();
      omp_set_num_threads(std::max(2, threads));
      CHECK(k::sum(a, b.dims).to_vector<double>() == one);
      CHECK(k::logsumexp(a, b.dims).to_vector<double>() == lse1);
      omp_set_num_threads(threads);
    }
  }
}

TEST_CASE("reduction edge cases", "[kernels][reduce]") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // 0-dim input: dims {} / {0} / {-1} all reduce the single element.
  const Tensor s = Tensor::scalar(2.5, DType::Float64);
  CHECK(k::sum(s).shape() == Shape{});
  CHECK(k::sum(s, {0}).item() == 2.5);
  CHECK(k::sum(s, {-1}, true).shape() == Shape{});
  CHECK(k::amax(s).item() == 2.5);
  // Reducing an empty dim: sum 0, mean NaN, logsumexp -inf, amax an error.
  const Tensor empty = Tensor::zeros({3, 0});
  CHECK(k::sum(empty, {1}).to_vector<double>() == std::vector<double>{0, 0, 0});
  CHECK(std::isnan(k::mean(empty, {1}).to_vector<double>()[0]));
  CHECK(k::logsumexp(empty, {1}).to_vector<double>()[0] == -inf);
  REQUIRE_THROWS_WITH(k::amax(empty, {1}), Catch::Contains("amax") && Catch::Contains("empty"));
  CHECK(k::amax(empty, {0}).shape() == Shape{0});
  // amax propagates NaN; logsumexp is stable and handles infinities.
  for (DType dt : {DType::Float32, DType::Float64}) {
    const Tensor x = Tensor::from_vector<double>({1, nan, 3, 1, 2, 3}, {2, 3}).to(dt);
    const auto m = k::amax(x, {1}).to_vector<double>();
    CHECK(std::isnan(m[0]));
    CHECK(m[1] == 3);
    const Tensor big = Tensor::from_vector<double>({1000, 1000, -inf,    // 1000 + log 2
                                                    -inf, -inf, -inf,    // -inf
                                                    -inf, inf, 0,        // inf
                                                    -1000, -1000, -1000},  // -1000 + log 3
                                                   {4, 3}).to(dt);
    const auto l = k::logsumexp(big, {1}).to_vector<double>();
    CHECK(l[0] == Approx(1000 + std::log(2.0)).epsilon(1e-6));
    CHECK(l[1] == -inf);
    CHECK(l[2] == inf);
    CHECK(l[3] == Approx(-1000 + std::log(3.0)).epsilon(1e-6));
  }
  // Errors name the dims and the shape.
  const Tensor a = Tensor::zeros({2, 3, 4});
  REQUIRE_THROWS_WITH(k::sum(a, {3}), Catch::Contains("sum") && Catch::Contains("[2, 3, 4]"));
  REQUIRE_THROWS_WITH(k::sum(a, {-4}), Catch::Contains("-4"));
  REQUIRE_THROWS_WITH(k::amax(a, {1, -2}), Catch::Contains("more than once"));
  REQUIRE_THROWS_AS(k::sum(Tensor(), {}), Error);
}

TEST_CASE("sum_to_shape undoes broadcasting", "[kernels][reduce]") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    const Tensor g = random({5, 3, 4}, dt, 41).permute({2, 1, 0});  // a [4, 3, 5] view
    struct Case {
      Shape shape;
      std::vector<int64_t> dims;  // what the reference sums over (keepdim)
    };
    const Case cases[] = {{{3, 1}, {0, 2}}, {{5}, {0, 1}}, {{1, 1, 5}, {0, 1}},
                          {{4, 1, 5}, {1}}, {{}, {}},       {{1}, {}}};
    for (const Case& c : cases) {
      INFO("to " << shape_str(c.shape));
      const Tensor y = k::sum_to_shape(g, c.shape);
      CHECK(y.shape() == c.shape);
      check_close(y, reference(g, c.dims, true, Op::Sum).values);
    }
    CHECK(k::sum_to_shape(g, {4, 3, 5}).to_vector<double>() == g.to_vector<double>());
    // Only size-1 leading dims differ: a reshape.
    const Tensor h = random({1, 1, 3}, dt, 42);
    CHECK(k::sum_to_shape(h, {3}).to_vector<double>() == h.to_vector<double>());
    REQUIRE_THROWS_WITH(k::sum_to_shape(g, {2}),
                        Catch::Contains("[2]") && Catch::Contains("[4, 3, 5]"));
    REQUIRE_THROWS_WITH(k::sum_to_shape(g, {7, 4, 3, 5}), Catch::Contains("[7, 4, 3, 5]"));
  }
}

TEST_CASE("argmax_last picks the first largest value", "[kernels][reduce]") {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    for (int64_t n : {1, 7, 257}) {
      for (const Layout& l : layouts({3, n}, dt, 51 + n, 0, 4)) {  // integers 0..3: many ties
        INFO(dtype_name(dt) << " n " << n << " " << l.name);
        const Tensor y = k::argmax_last(l.t);
        REQUIRE(y.shape() == Shape{3});
        REQUIRE(y.dtype() == DType::Int64);
        for (int64_t r = 0; r < 3; ++r) {
          int64_t best = 0;
          for (int64_t c = 1; c < n; ++c)
            if (l.t.at({r, c}) > l.t.at({r, best})) best = c;
          CHECK(y.at({r}) == best);
        }
      }
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(k::argmax_last(Tensor::from_vector<double>({1, 5, nan, 7, nan})).item() == 2);
  CHECK(k::argmax_last(Tensor::from_vector<float>({2, 2, 1, 2}, {2, 2})).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1});
  CHECK(k::argmax_last(Tensor::scalar(3)).item() == 0);
  REQUIRE_THROWS_WITH(k::argmax_last(Tensor::zeros({2, 0})), Catch::Contains("[2, 0]"));
}
