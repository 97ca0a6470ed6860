// kernels::PackedWeight per weight type: each product against a float64 loop over the
// SAME rounded weights (M = 1..16 and past 16, K and N tails, bias), every row bit-identical to
// the row computed alone (batch invariance) and to any split of the columns; bf16 bit-identical
// to matmul_rows over the widened weights; and the rounding against a hand computation.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/kernels/bf16.h"
#include "core/kernels/matmul_rows.h"
#include "core/kernels/packed_weights.h"

using namespace ember;
using kernels::PackedWeight;
using kernels::WeightType;

namespace {

std::vector<float> values(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001 - 1000) / 997.0f;
  }
  return v;
}

// Largest |y - ref| / sum |x w| over the outputs, ref in float64 on the rounded weights wq.
double worst_error(int64_t M, int64_t N, int64_t K, const std::vector<float>& x, const float* wq,
                   const std::vector<float>& b, const std::vector<float>& y) {
  double worst = 0;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double ref = b[n], mag = std::abs(ref);
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(x[m * K + k]) * wq[n * K + k];
        ref += p;
        mag += std::abs(p);
      }
      worst = std::max(worst, std::abs(y[m * N + n] - ref) / (mag + 1e-30));
    }
  }
  return worst;
}

// One shape: against float64, each row alone, and a two-way column split.
void check_shape(WeightType type, int64_t M, int64_t N, int64_t K, double tolerance) {
  INFO(kernels::weight_type_name(type) << " M " << M << " N " << N << " K " << K);
  const auto x = values(M * K, 1), wf = values(N * K, 2), b = values(N, 3);
  const PackedWeight w(Tensor::from_vector(wf, {N, K}), type);
  const Tensor wq = w.to_float32();
  std::vector<float> y(static_cast<size_t>(M * N));
  w.matmul(M, x.data(), K, b.data(), y.data(), N);
  CHECK(worst_error(M, N, K, x, wq.data<float>(), b, y) < tolerance);
  for (int64_t m = 0; m < M; ++m) {
    std::vector<float> alone(static_cast<size_t>(N));
    w.matmul(1, x.data() + m * K, K, b.data(), alone.data(), N);
    INFO("row " << m);
    CHECK(std::memcmp(alone.data(), y.data() + m * N, static_cast<size_t>(N) * 4) == 0);
  }
  std::vector<float> split(static_cast<size_t>(M * N));
  w.matmul(M, x.data(), K, b.data(), split.data(), N, 0, N / 3);
  w.matmul(M, x.data(), K, b.data(), split.data(), N, N / 3, N);
  CHECK(std::memcmp(split.data(), y.data(), y.size() * 4) == 0);
}

}  // namespace

TEST_CASE("packed weights: bf16 rounds each weight to nearest-even, by hand", "[packed_weights]") {
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even (1);
  // 1 + 3 * 2^-8 ties between 1 + 2^-7 (odd) and 1 + 2^-6: to 1 + 2^-6.
  const std::vector<float> w = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.5f, 0.1f};
  const PackedWeight p(Tensor::from_vector(w, {2, 2}), WeightType::BFloat16);
  float r[2];
  p.row(0, r);
  CHECK(r[0] == 1.0f);
  CHECK(r[1] == 1.0f + 0x1p-6f);
  p.row(1, r);
  CHECK(r[0] == -2.5f);
  CHECK(r[1] == 0.10009765625f);  // 0.1 = 0x3DCCCCCD -> 0x3DCD
  CHECK(p.nbytes() == 8);
}

TEST_CASE("packed weights: every type against float64 over its rounded weights, M = 1..16 and tails",
          "[packed_weights]") {
  for (WeightType type : {WeightType::Float32, WeightType::BFloat16}) {
    for (int64_t M = 1; M <= 16; ++M) check_shape(type, M, 19, 77, 1e-5);
    check_shape(type, 37, 45, 1100, 1e-5);  // past 16 rows and past the k-block of 1024
    check_shape(type, 5, 64, 32, 1e-5);
  }
}

TEST_CASE("packed weights: bf16 is matmul_rows over the widened weights, bit for bit", "[packed_weights]") {
  const int64_t M = 21, N = 33, K = 1030;
  const auto x = values(M * K, 4), wf = values(N * K, 5), b = values(N, 6);
  const PackedWeight w(Tensor::from_vector(wf, {N, K}), WeightType::BFloat16);
  const Tensor wq = w.to_float32();
  std::vector<float> y(static_cast<size_t>(M * N)), ref(static_cast<size_t>(M * N));
  w.matmul(M, x.data(), K, b.data(), y.data(), N);
  kernels::matmul_rows(M, N, K, x.data(), K, wq.data<float>(), K, b.data(), ref.data(), N);
  CHECK(std::memcmp(y.data(), ref.data(), y.size() * 4) == 0);
}
