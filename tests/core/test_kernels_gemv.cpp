// gemv_rows against a double-precision loop (odd K for the lane tail, row
// strides, strided y, alpha / beta, serial and parallel sizes), and matmul's
// routing of float32 M = 1 products through it.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/kernels/gemv.h"
#include "core/kernels/matmul.h"

using namespace ember;

TEST_CASE("gemv_rows matches a double loop", "[matmul][gemv]") {
  const std::vector<std::array<int64_t, 3>> cases = {
      {1, 1, 1}, {5, 31, 31}, {7, 33, 40}, {300, 257, 257}, {4099, 96, 100}};  // N, K, ldw
  for (auto [N, K, ldw] : cases) {
    const std::vector<float> w =
        Tensor::rand({N * ldw}, 1, 0, DType::Float32, -1, 1).to_vector<float>();
    const std::vector<float> x = Tensor::rand({K}, 2, 0, DType::Float32, -1, 1).to_vector<float>();
    for (auto [alpha, beta] : std::vector<std::pair<float, float>>{{1, 0}, {0.5f, 2}, {-1, 1}}) {
      CAPTURE(N, K, ldw, alpha, beta);
      std::vector<float> y(static_cast<size_t>(2 * N), 3.0f);  // every other element (incy 2)
      kernels::gemv_rows(N, K, x.data(), w.data(), ldw, y.data(), 2, alpha, beta);
      double err = 0;
      int64_t touched = 0;  // elements between the strided outputs that changed
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += static_cast<double>(x[k]) * w[n * ldw + k];
        err = std::max(err, std::abs(y[2 * n] - (alpha * s + beta * 3.0)));
        touched += y[2 * n + 1] != 3.0f;
      }
      CHECK(touched == 0);
      CHECK(err < 1e-5 * K);
    }
  }
}

TEST_CASE("matmul routes float32 x [1, K] W^T through gemv with the same result",
          "[matmul][gemv]") {
  const int64_t N = 1000, K = 77;
  const Tensor w = Tensor::rand({N, K}, 3, 0, DType::Float32, -1, 1);
  const Tensor rows = Tensor::rand({4, K}, 4, 0, DType::Float32, -1, 1);
  const Tensor x = rows.narrow(0, 2, 1);  // a row of a larger matrix
  const int64_t primitives = kernels::matmul_primitive_cache_size();
  const Tensor y = kernels::matmul(x, w, false, true);
  CHECK(kernels::matmul_primitive_cache_size() == primitives);  // no oneDNN primitive
  const Tensor want = kernels::matmul(x.to(DType::Float64), w.to(DType::Float64), false, true);
  REQUIRE(y.shape() == Shape{1, N});
  double err = 0;
  for (int64_t n = 0; n < N; ++n) err = std::max(err, std::abs(y.at({0, n}) - want.at({0, n})));
  CHECK(err < 1e-4);
  // A batched [B, 1, K] input folds into M = B and stays on oneDNN.
  const Tensor yb = kernels::matmul(rows.reshape({4, 1, K}), w, false, true);
  CHECK(std::abs(yb.at({2, 0, 5}) - y.at({0, 5})) < 1e-4);
}
