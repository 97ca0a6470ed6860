// Index kernels against reference loops: index_select (any data dtype, multi-dim
// index), index_add / index_add_ (repeated indices sum in source order,
// bit-for-bit the same on any thread count), gather, scatter_add, topk (ties to
// the lower index, NaN first), and out-of-range errors naming index and size.
#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <tuple>

#include "core/kernels/index.h"

using namespace ember;
using Catch::Contains;

namespace {

Tensor uniform(const Shape& shape, DType dt, uint64_t seed) {
  return Tensor::rand(shape, seed, 0, dt, -1, 1);
}

Tensor random_index(const Shape& shape, int64_t size, uint64_t seed, DType dt = DType::Int64) {
  const Tensor u = Tensor::rand(shape, seed, 0, DType::Float64, 0, static_cast<double>(size));
  std::vector<int64_t> v;
  for (double x : u.to_vector<double>())
    v.push_back(std::min<int64_t>(size - 1, static_cast<int64_t>(x)));
  return Tensor::from_vector(v, shape).to(dt);
}

// Runs f with the given OpenMP thread count, restoring the old one.
template <class F>
auto with_threads(int n, F&& f) {
  const int old = omp_get_max_threads();
  omp_set_num_threads(n);
  auto r = f();
  omp_set_num_threads(old);
  return r;
}

}  // namespace

TEST_CASE("index_select picks slices along a dim", "[index]") {
  const Tensor a = Tensor::arange(0, 35, 1, DType::Float32).reshape({5, 7});
  const Tensor idx = Tensor::from_vector<int64_t>({4, 0, 4, 2});
  const Tensor out = kernels::index_select(a, 0, idx);
  REQUIRE(out.shape() == Shape{4, 7});
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 7; ++j) CHECK(out.at({i, j}) == a.at({idx.to_vector<int64_t>()[i], j}));
  // dim 1 of a 3-D transposed view with a 2-D int32 index: out [3, 2, 2, 4]
  const Tensor b = uniform({6, 3, 4}, DType::Float64, 1).transpose(0, 1);  // [3, 6, 4]
  const Tensor idx2 = Tensor::from_vector<int32_t>({5, 1, 1, 0}, {2, 2});
  const Tensor out2 = kernels::index_select(b, -2, idx2);
  REQUIRE(out2.shape() == Shape{3, 2, 2, 4});
  const auto iv = idx2.to_vector<int32_t>();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t p = 0; p < 4; ++p)
      for (int64_t k = 0; k < 4; ++k) CHECK(out2.at({i, p / 2, p % 2, k}) == b.at({i, iv[p], k}));
  // Integer data (token ids) and the embedding lookup shape [B, T] -> [B, T, C]
  const Tensor ids = Tensor::from_vector<int32_t>({7, 8, 9});
  CHECK(
      kernels::index_select(ids, 0, Tensor::from_vector<int64_t>({2, 2, 0})).to_vector<int32_t>() ==
      std::vector<int32_t>{9, 9, 7});
  const Tensor table = uniform({11, 5}, DType::Float32, 2);
  const Tensor tok = random_index({3, 4}, 11, 3);
  const Tensor emb = kernels::index_select(table, 0, tok);
  REQUIRE(emb.shape() == Shape{3, 4, 5});
  CHECK(emb.select(0, 2).select(0, 1).to_vector<float>() ==
        table.select(0, static_cast<int64_t>(tok.at({2, 1}))).to_vector<float>());
}

TEST_CASE("index kernels reject out-of-range indices naming the index and the size", "[index]") {
  const Tensor a = Tensor::zeros({5, 3});
  REQUIRE_THROWS_WITH(kernels::index_select(a, 0, Tensor::from_vector<int64_t>({1, 5})),
                      Contains("index 5") && Contains("size 5"));
  REQUIRE_THROWS_WITH(kernels::index_select(a, 1, Tensor::from_vector<int32_t>({-1})),
                      Contains("index -1") && Contains("size 3"));
  REQUIRE_THROWS_WITH(kernels::index_select(a, 0, Tensor::zeros({2})), Contains("float32"));
  REQUIRE_THROWS_WITH(
      kernels::index_add(a, 0, Tensor::from_vector<int64_t>({9}), Tensor::zeros({1, 3})),
      Contains("index 9") && Contains("size 5"));
  REQUIRE_THROWS_WITH(
      kernels::index_add(a, 0, Tensor::from_vector<int64_t>({1}), Tensor::zeros({2, 3})),
      Contains("[2, 3]") && Contains("[1, 3]"));
  REQUIRE_THROWS_WITH(kernels::gather(a, 1, Tensor::from_vector<int64_t>({0, 3}, {1, 2})),
                      Contains("index 3") && Contains("size 3"));
  REQUIRE_THROWS_WITH(
      kernels::scatter_add(a, 0, Tensor::from_vector<int64_t>({6}, {1, 1}), Tensor::ones({1, 1})),
      Contains("index 6") && Contains("size 5"));
  REQUIRE_THROWS_WITH(kernels::topk(a, 4), Contains("k = 4") && Contains("[5, 3]"));
}

TEMPLATE_TEST_CASE("index_add sums repeated indices like a serial loop", "[index]", float, double) {
  const DType dt = dtype_of<TestType>();
  const Tensor base = uniform({4, 3}, dt, 4);
  const Tensor src = uniform({5, 3}, dt, 5);
  const std::vector<int64_t> iv = {1, 3, 1, 1, 0};
  const Tensor out = kernels::index_add(base, 0, Tensor::from_vector(iv), src);
  std::vector<TestType> want = base.to_vector<TestType>();
  const auto sv = src.to_vector<TestType>();
  for (size_t i = 0; i < iv.size(); ++i)
    for (int64_t j = 0; j < 3; ++j) want[iv[i] * 3 + j] += sv[i * 3 + j];
  CHECK(out.to_vector<TestType>() == want);   // same summation order: exact
  CHECK(base.to_vector<TestType>() != want);  // out-of-place leaves base alone

  // In place along dim 1 of a transposed (non-contiguous) base, int32 index.
  Tensor b2 = uniform({6, 2}, dt, 6).transpose(0, 1);  // [2, 6]
  const Tensor before = b2.clone();
  const Tensor s2 = uniform({2, 4}, dt, 7);
  const uint64_t version = b2.version();
  kernels::index_add_(b2, 1, Tensor::from_vector<int32_t>({5, 0, 5, 5}), s2);
  CHECK(b2.version() > version);
  for (int64_t r = 0; r < 2; ++r) {
    TestType v5 = static_cast<TestType>(before.at({r, 5}));
    for (int64_t i : {0, 2, 3}) v5 += static_cast<TestType>(s2.at({r, i}));
    CHECK(static_cast<TestType>(b2.at({r, 5})) == v5);
    CHECK(static_cast<TestType>(b2.at({r, 0})) ==
          static_cast<TestType>(static_cast<TestType>(before.at({r, 0})) +
                                static_cast<TestType>(s2.at({r, 1}))));
    CHECK(b2.at({r, 3}) == before.at({r, 3}));
  }
}

TEST_CASE("index_add is bit-identical across thread counts (embedding backward)", "[index]") {
  // 20000 token gradients of width 300 into a 50-row table: heavy repetition.
  const Tensor ids = random_index({20000}, 50, 8);
  const Tensor g = uniform({20000, 300}, DType::Float32, 9);
  auto run = [&] { return kernels::index_add(Tensor::zeros({50, 300}), 0, ids, g); };
  const Tensor one = with_threads(1, run),
               many = with_threads(std::max(2, omp_get_num_procs()), run);
  CHECK(one.to_vector<float>() == many.to_vector<float>());
  std::vector<float> want(50 * 300, 0.0f);  // serial loop in source order
  const auto iv = ids.to_vector<int64_t>();
  const float* gp = g.data<float>();
  for (size_t i = 0; i < iv.size(); ++i)
    for (int64_t j = 0; j < 300; ++j) want[iv[i] * 300 + j] += gp[i * 300 + j];
  CHECK(many.to_vector<float>() == want);
  // All ids equal: one hot row, whose columns are split over threads.
  const Tensor same = Tensor::zeros({4000}, DType::Int32);
  const Tensor wide = uniform({4000, 1024}, DType::Float32, 10);
  auto run_hot = [&] { return kernels::index_add(Tensor::zeros({3, 1024}), 0, same, wide); };
  const Tensor hot = with_threads(std::max(2, omp_get_num_procs()), run_hot);
  CHECK(hot.to_vector<float>() == with_threads(1, run_hot).to_vector<float>());
  std::vector<float> row(1024, 0.0f);
  const float* wp = wide.data<float>();
  for (int64_t i = 0; i < 4000; ++i)
    for (int64_t j = 0; j < 1024; ++j) row[j] += wp[i * 1024 + j];
  CHECK(hot.select(0, 0).to_vector<float>() == row);
  CHECK(hot.select(0, 1).to_vector<float>() == std::vector<float>(1024, 0.0f));
}

TEMPLATE_TEST_CASE("index_add_summed_ adds each row's summed sources once, like a loop", "[index]",
                   float, double) {
  const DType dt = std::is_same_v<TestType, float> ? DType::Float32 : DType::Float64;
  // 3000 sources of width 700 (three column pieces) into 40 rows; rows 0 and 39 get none.
  std::vector<int64_t> shifted = random_index({3000}, 38, 11).to_vector<int64_t>();
  for (int64_t& v : shifted) ++v;
  const Tensor ids = Tensor::from_vector(shifted, {3000});
  const Tensor src = uniform({3000, 700}, dt, 12);
  const Tensor base = uniform({40, 700}, dt, 13);
  auto run = [&] {
    Tensor out = base.clone();
    kernels::index_add_summed_(out, 0, ids, src);
    return out;
  };
  const Tensor one = with_threads(1, run), many = with_threads(std::max(2, omp_get_num_procs()), run);
  CHECK(one.to_vector<TestType>() == many.to_vector<TestType>());
  // Reference: per row, 0 + its sources in ascending order, then added to the base once.
  std::vector<TestType> want = base.to_vector<TestType>();
  const auto iv = ids.to_vector<int64_t>();
  const auto sv = src.to_vector<TestType>();
  for (int64_t v = 0; v < 40; ++v) {
    std::vector<TestType> sum(700, TestType(0));
    for (size_t i = 0; i < iv.size(); ++i)
      if (iv[i] == v)
        for (int64_t j = 0; j < 700; ++j) sum[j] += sv[i * 700 + j];
    for (int64_t j = 0; j < 700; ++j) want[v * 700 + j] += sum[j];
  }
  CHECK(many.to_vector<TestType>() == want);
  // On a zero base it is index_add_ bit for bit.
  Tensor zero = Tensor::zeros({40, 700}, dt);
  kernels::index_add_summed_(zero, 0, ids, src);
  CHECK(zero.to_vector<TestType>() ==
        kernels::index_add(Tensor::zeros({40, 700}, dt), 0, ids, src).to_vector<TestType>());
}

TEMPLATE_TEST_CASE("gather and scatter_add follow their loops", "[index]", float, double) {
  const DType dt = dtype_of<TestType>();
  const Tensor a = Tensor::from_vector<TestType>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4});
  const Tensor idx = Tensor::from_vector<int64_t>({0, 0, 3, 1, 2, 2}, {3, 2});
  CHECK(kernels::gather(a, 1, idx).to_vector<TestType>() ==
        std::vector<TestType>{1, 1, 8, 6, 11, 11});
  const Tensor idx0 = Tensor::from_vector<int32_t>({2, 0, 1, 2}, {1, 4});
  CHECK(kernels::gather(a, 0, idx0).to_vector<TestType>() == std::vector<TestType>{9, 2, 7, 12});

  // Random 3-D along each dim, a transposed view, index smaller than a off dim.
  const Tensor x = uniform({5, 4, 6}, dt, 10).permute({1, 0, 2});  // [4, 5, 6]
  for (int64_t d = 0; d < 3; ++d) {
    CAPTURE(d);
    Shape ishape = {3, 4, 5};
    ishape[d] = 7;
    const Tensor ix = random_index(ishape, x.size(d), 11 + d);
    const Tensor g = kernels::gather(x, d, ix);
    REQUIRE(g.shape() == ishape);
    const Tensor src = uniform({8, 8, 8}, dt, 20 + d);  // larger than the index
    const Tensor base = uniform({4, 5, 6}, dt, 30 + d);
    const Tensor s = kernels::scatter_add(base, d, ix, src);
    std::vector<TestType> want = base.to_vector<TestType>();
    for (int64_t i = 0; i < ishape[0]; ++i)
      for (int64_t j = 0; j < ishape[1]; ++j)
        for (int64_t k = 0; k < ishape[2]; ++k) {
          std::vector<int64_t> p = {i, j, k};
          const int64_t v = static_cast<int64_t>(ix.at(p));
          std::vector<int64_t> q = p;
          q[d] = v;
          CHECK(g.at(p) == x.at(q));
          want[(q[0] * 5 + q[1]) * 6 + q[2]] += static_cast<TestType>(src.at(p));
        }
    CHECK(s.to_vector<TestType>() == want);
  }
}

TEMPLATE_TEST_CASE("topk returns the k largest, ties to the lower index", "[index]", float,
                   double) {
  const Tensor a = Tensor::from_vector<TestType>({1, 3, 3, 2, 3, -1}, {1, 6});
  Tensor v, i;
  std::tie(v, i) = kernels::topk(a, 3);
  CHECK(v.to_vector<TestType>() == std::vector<TestType>{3, 3, 3});
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 4});
  CHECK(i.dtype() == DType::Int64);
  Tensor v6, i6;
  std::tie(v6, i6) = kernels::topk(a, 6);
  CHECK(i6.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 4, 3, 0, 5});
  CHECK(kernels::topk(a, 0).first.shape() == Shape{1, 0});
  const TestType nan = std::numeric_limits<TestType>::quiet_NaN();
  Tensor vn, in;
  std::tie(vn, in) = kernels::topk(Tensor::from_vector<TestType>({2, nan, 5}), 2);
  CHECK(in.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  CHECK(std::isnan(vn.to_vector<TestType>()[0]));

  // A NaN late in a long row (the small-k heap path) still comes first.
  std::vector<TestType> longrow(100, 1);
  longrow[40] = 4;
  longrow[70] = nan;
  longrow[90] = 4;
  Tensor vl, il;
  std::tie(vl, il) = kernels::topk(Tensor::from_vector(longrow), 3);
  CHECK(il.to_vector<int64_t>() == std::vector<int64_t>{70, 40, 90});

  // Many rows of a non-contiguous input with few distinct values, vs a stable
  // sort; n = 64 uses nth_element, n = 1000 the heap.
  for (int64_t n : {64, 1000}) {
    CAPTURE(n);
    const int64_t rows_n = 200, k = 10;
    const Tensor r =
        Tensor::rand({rows_n, n}, 12, 0, DType::Float64, 0, 8).to(dtype_of<TestType>());
    std::vector<TestType> rv = r.to_vector<TestType>();
    for (TestType& x : rv) x = std::floor(x);
    const Tensor rows =
        Tensor::from_vector(rv, {rows_n, n}).transpose(0, 1).contiguous().transpose(0, 1);
    Tensor tv, ti;
    std::tie(tv, ti) = kernels::topk(rows, k);
    REQUIRE(tv.shape() == Shape{rows_n, k});
    const auto tvv = tv.to_vector<TestType>();
    const auto tiv = ti.to_vector<int64_t>();
    for (int64_t row = 0; row < rows_n; ++row) {
      std::vector<int64_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t p, int64_t q) { return rv[row * n + p] > rv[row * n + q]; });
      for (int64_t j = 0; j < k; ++j) {
        CHECK(tiv[row * k + j] == order[j]);
        CHECK(tvv[row * k + j] == rv[row * n + order[j]]);
      }
    }
  }
}
