// core::Tensor: factories, views without copies, contiguous(), copy_ with
// broadcast and casts, element access, printing, errors.
#include <catch2/catch.hpp>

#include "core/tensor.h"

using namespace ember;

TEST_CASE("factories fill shape, dtype and values", "[tensor]") {
  Tensor z = Tensor::zeros({2, 3}, DType::Float64);
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.strides() == Shape{3, 1});
  CHECK(z.dtype() == DType::Float64);
  CHECK(z.numel() == 6);
  CHECK(z.at({1, 2}) == 0.0);
  CHECK(Tensor::ones({4}, DType::Int32).at({3}) == 1.0);
  CHECK(Tensor::full({2, 2}, 2.5).at({1, 0}) == 2.5);
  CHECK(Tensor::scalar(7, DType::Int64).item() == 7.0);
  CHECK(Tensor::arange(0, 5).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(Tensor::arange(1, 2, 0.25, DType::Float32).to_vector<float>() ==
        std::vector<float>{1, 1.25f, 1.5f, 1.75f});
  Tensor v = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(v.at({1, 0}) == 4.0);
  CHECK_THROWS_AS(Tensor::from_vector<float>({1, 2}, {3}), Error);
}

TEST_CASE("storage is 64-byte aligned and shared by views", "[tensor]") {
  for (int64_t n : {1, 7, 257, 4099}) {
    Tensor t = Tensor::empty({n});
    CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0);
  }
  Tensor a = Tensor::zeros({4, 5});
  Tensor b = a.transpose(0, 1);
  CHECK(b.shares_storage(a));
  b.set({2, 1}, 9);
  CHECK(a.at({1, 2}) == 9.0);
}

TEST_CASE("view and reshape", "[tensor]") {
  Tensor a = Tensor::arange(0, 24, 1, DType::Float32);
  Tensor v = a.view({2, 3, 4});
  CHECK(v.shares_storage(a));
  CHECK(v.at({1, 2, 3}) == 23.0);
  CHECK(a.view({4, -1}).shape() == Shape{4, 6});
  CHECK_THROWS_WITH(a.view({5, -1}), Catch::Contains("[5, -1]"));
  // A transposed tensor cannot be flattened without a copy: view fails, reshape copies.
  Tensor t = v.transpose(1, 2);  // [2, 4, 3]
  CHECK_FALSE(t.is_contiguous());
  CHECK_THROWS_AS(t.view({24}), Error);
  Tensor r = t.reshape({24});
  CHECK_FALSE(r.shares_storage(a));
  CHECK(r.at({1}) == 4.0);  // t[0][0][1] = v[0][1][0]
  // Merging dims that are contiguous among themselves is still a view.
  Tensor s = v.narrow(2, 1, 2);  // [2, 3, 2], strides [12, 4, 1]
  Tensor sv = s.transpose(0, 1).reshape({3, 4});  // not mergeable: copy
  CHECK(sv.at({0, 2}) == 13.0);
  CHECK(v.reshape({6, 4}).shares_storage(a));
  // A 0-dim tensor views as any all-ones shape.
  Tensor s0 = Tensor::scalar(2.5);
  CHECK(s0.view({1, 1}).shape() == Shape{1, 1});
  CHECK(s0.reshape({1}).at({0}) == 2.5);
}

TEST_CASE("permute, narrow, slice, select, expand, squeeze, unsqueeze", "[tensor]") {
  Tensor a = Tensor::arange(0, 24, 1, DType::Float64).view({2, 3, 4});
  Tensor p = a.permute({2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.at({3, 1, 2}) == a.at({1, 2, 3}));
  CHECK_THROWS_AS(a.permute({0, 0, 1}), Error);

  Tensor n = a.narrow(2, 1, 2);
  CHECK(n.shape() == Shape{2, 3, 2});
  CHECK(n.at({1, 1, 0}) == a.at({1, 1, 1}));
  CHECK_THROWS_WITH(a.narrow(1, 2, 2), Catch::Contains("[2, 3, 4]"));

  Tensor s = a.slice(2, 0, 4, 2);  // columns 0, 2
  CHECK(s.shape() == Shape{2, 3, 2});
  CHECK(s.at({0, 1, 1}) == a.at({0, 1, 2}));
  CHECK(a.slice(1, -2, 3).shape() == Shape{2, 2, 4});

  Tensor sel = a.select(1, 2);
  CHECK(sel.shape() == Shape{2, 4});
  CHECK(sel.at({1, 3}) == 23.0);

  Tensor col = Tensor::from_vector<double>({1, 2, 3}, {3, 1});
  Tensor e = col.expand({2, 3, 4});
  CHECK(e.shape() == Shape{2, 3, 4});
  CHECK(e.strides() == Shape{0, 1, 0});
  CHECK(e.at({1, 2, 3}) == 3.0);
  CHECK_THROWS_AS(col.expand({2, 2}), Error);

  Tensor u = a.unsqueeze(0).unsqueeze(-1);
  CHECK(u.shape() == Shape{1, 2, 3, 4, 1});
  CHECK(u.squeeze().shape() == Shape{2, 3, 4});
  CHECK(u.squeeze(0).shape() == Shape{2, 3, 4, 1});
  CHECK(a.squeeze(1).shape() == Shape{2, 3, 4});  // size 3: unchanged
}

TEST_CASE("contiguous copies only when needed", "[tensor]") {
  Tensor a = Tensor::arange(0, 12, 1, DType::Float32).view({3, 4});
  CHECK(a.contiguous().shares_storage(a));
  Tensor t = a.transpose(0, 1).contiguous();
  CHECK_FALSE(t.shares_storage(a));
  CHECK(t.is_contiguous());
  CHECK(t.to_vector<float>() == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  // A large non-contiguous copy goes through the parallel path.
  Tensor big = Tensor::arange(0, 300 * 257, 1, DType::Float64).view({300, 257});
  Tensor bt = big.transpose(0, 1).contiguous();
  bool ok = true;
  for (int64_t i = 0; i < 257; i += 37)
    for (int64_t j = 0; j < 300; j += 29) ok = ok && bt.at({i, j}) == static_cast<double>(j * 257 + i);
  CHECK(ok);
}

TEST_CASE("copy_ broadcasts and casts, to() converts dtypes", "[tensor]") {
  Tensor dst = Tensor::zeros({2, 3}, DType::Float64);
  dst.copy_(Tensor::from_vector<float>({1.5f, 2.5f, 3.5f}));
  CHECK(dst.to_vector<double>() == std::vector<double>{1.5, 2.5, 3.5, 1.5, 2.5, 3.5});
  CHECK(dst.to(DType::Int32).to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3, 1, 2, 3});
  CHECK_THROWS_AS(dst.copy_(Tensor::zeros({4})), Error);
}

TEST_CASE("in-place writes bump the storage version shared by views", "[tensor]") {
  Tensor a = Tensor::zeros({3});
  Tensor v = a.view({3});
  const uint64_t v0 = a.version();
  v.fill_(1);
  CHECK(a.version() == v0 + 1);
  a.set({0}, 2);
  CHECK(v.version() == v0 + 2);
}

TEST_CASE("element access checks dtype, rank and range", "[tensor]") {
  Tensor a = Tensor::zeros({2, 2});
  CHECK_THROWS_WITH(a.data<double>(), Catch::Contains("float32"));
  CHECK_THROWS_AS(a.at({0}), Error);
  CHECK_THROWS_WITH(a.at({2, 0}), Catch::Contains("out of range"));
  CHECK(a.at({-1, -1}) == 0.0);
  CHECK_THROWS_AS(a.item(), Error);
}

TEST_CASE("printing shows values, shape and dtype", "[tensor]") {
  Tensor a = Tensor::from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  CHECK(a.to_string() == "Tensor([[1, 2], [3, 4]], shape=[2, 2], dtype=int64)");
  Tensor big = Tensor::arange(0, 100, 1, DType::Int32);
  CHECK(big.to_string(4) == "Tensor([0, 1, ..., 98, 99], shape=[100], dtype=int32)");
}

TEST_CASE("broadcast_shapes follows NumPy rules", "[tensor]") {
  CHECK(broadcast_shapes({3, 1, 5}, {4, 5}) == Shape{3, 4, 5});
  CHECK(broadcast_shapes({}, {2}) == Shape{2});
  CHECK_THROWS_WITH(broadcast_shapes({2, 3}, {4}), Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
}
