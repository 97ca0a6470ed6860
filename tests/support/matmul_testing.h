// The reference the matmul tests compare against: C[b] = op(A)[b] op(B)[b] by
// three loops in double (batch dims broadcast), the largest difference, and
// the sweep of odd sizes and transposes the float32 and bf16 tests share.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "core/tensor.h"

namespace ember::testing {

inline Tensor reference_matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const Tensor oa = ta ? a.transpose(-1, -2) : a, ob = tb ? b.transpose(-1, -2) : b;
  const int64_t M = oa.size(-2), K = oa.size(-1), N = ob.size(-1);
  Shape batch = broadcast_shapes(Shape(oa.shape().begin(), oa.shape().end() - 2),
                                 Shape(ob.shape().begin(), ob.shape().end() - 2));
  Shape sa = batch, sb = batch, sc = batch;
  sa.insert(sa.end(), {M, K});
  sb.insert(sb.end(), {K, N});
  sc.insert(sc.end(), {M, N});
  const Tensor A = oa.to(DType::Float64).expand(sa).contiguous();
  const Tensor B = ob.to(DType::Float64).expand(sb).contiguous();
  Tensor C = Tensor::zeros(sc, DType::Float64);
  const double *pa = A.data<double>(), *pb = B.data<double>();
  double* pc = C.data<double>();
  for (int64_t z = 0, nb = shape_numel(batch); z < nb; ++z)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += pa[(z * M + i) * K + k] * pb[(z * K + k) * N + j];
        pc[(z * M + i) * N + j] = s;
      }
  return C;
}

inline double max_abs_diff(const Tensor& x, const Tensor& y) {
  REQUIRE(x.shape() == y.shape());
  const auto vx = x.to_vector<double>(), vy = y.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < vx.size(); ++i) m = std::max(m, std::abs(vx[i] - vy[i]));
  return m;
}

// Calls f(M, N, K, ta, tb, seed_a, seed_b) for odd sizes (1s, primes, one
// past a power of two) under all four transpose flags, fresh seeds each.
template <class F>
void for_each_odd_matmul(F&& f) {
  const std::vector<std::array<int64_t, 3>> sizes = {
      {1, 1, 1}, {7, 257, 1}, {257, 7, 33}, {1, 7, 257}, {257, 1, 7}, {33, 65, 129}, {64, 64, 64}};
  uint64_t seed = 1;
  for (auto [M, N, K] : sizes) {
    for (int flags = 0; flags < 4; ++flags) {
      const bool ta = flags & 1, tb = flags & 2;
      CAPTURE(M, N, K, ta, tb);
      f(M, N, K, ta, tb, seed, seed + 1);
      seed += 2;
    }
  }
}

}  // namespace ember::testing
