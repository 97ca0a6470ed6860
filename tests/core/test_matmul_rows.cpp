// kernels::matmul_rows: against a double reference loop, and batch invariance:
// every row bit-identical to the same row computed alone, for any M, strides,
// bias and thread count.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/kernels/matmul_rows.h"

using ember::kernels::matmul_rows;

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

struct Problem {
  int64_t M, N, K, ldx, ldw, ldy;
  bool bias;
};

// y [M, ldy] for x [M, ldx], w [N, ldw] made from fixed seeds.
std::vector<float> run(const Problem& p, const std::vector<float>& x, const std::vector<float>& w,
                       const std::vector<float>& b) {
  std::vector<float> y(static_cast<size_t>(p.M * p.ldy), -7.0f);
  matmul_rows(p.M, p.N, p.K, x.data(), p.ldx, w.data(), p.ldw, p.bias ? b.data() : nullptr,
              y.data(), p.ldy);
  return y;
}

void check_problem(const Problem& p) {
  INFO("M " << p.M << " N " << p.N << " K " << p.K << " bias " << p.bias << " ldx " << p.ldx);
  const auto x = values(p.M * p.ldx, 1), w = values(p.N * p.ldw, 2), b = values(p.N, 3);
  const auto y = run(p, x, w, b);
  double worst = 0;
  for (int64_t m = 0; m < p.M; ++m) {
    for (int64_t n = 0; n < p.N; ++n) {
      double ref = p.bias ? b[n] : 0.0, mag = std::abs(ref);
      for (int64_t k = 0; k < p.K; ++k) {
        ref += static_cast<double>(x[m * p.ldx + k]) * w[n * p.ldw + k];
        mag += std::abs(static_cast<double>(x[m * p.ldx + k]) * w[n * p.ldw + k]);
      }
      worst = std::max(worst, std::abs(y[m * p.ldy + n] - ref) / (mag + 1e-30));
    }
    for (int64_t n = p.N; n < p.ldy; ++n) CHECK(y[m * p.ldy + n] == -7.0f);  // padding untouched
  }
  CHECK(worst < 1e-5);
  // Row m alone (M = 1) gives the same bits.
  for (int64_t m = 0; m < p.M; ++m) {
    Problem one = p;
    one.M = 1;
    const std::vector<float> xm(x.begin() + m * p.ldx, x.begin() + (m + 1) * p.ldx);
    const auto ym = run(one, xm, w, b);
    INFO("row " << m);
    CHECK(std::memcmp(ym.data(), y.data() + m * p.ldy, static_cast<size_t>(p.N) * 4) == 0);
  }
}

}  // namespace

TEST_CASE("matmul_rows: reference and rows alone for odd shapes, bias and strides",
          "[matmul_rows]") {
  for (const int64_t K : {1, 7, 16, 33, 100, 257, 1100}) {
    for (const int64_t N : {1, 5, 17, 64}) {
      for (const int64_t M : {1, 3, 9, 21}) {
        check_problem({M, N, K, K, K, N, (K + N) % 2 == 0});
        check_problem({M, N, K, K + 3, K + 5, N + 2, true});
      }
    }
  }
}

// K = 2100 takes the k-blocked path from M = 16 (k-blocks of 1024, 1024, 48, then a tail of 4).
TEST_CASE("matmul_rows: rows bit-identical for M = 1..40 and 1 or 2 threads", "[matmul_rows]") {
  const int64_t N = 300, K = GENERATE(768, 2100);
  const auto x = values(40 * K, 4), w = values(N * K, 5), b = values(N, 6);
  std::vector<std::vector<float>> alone(40);
  for (int64_t m = 0; m < 40; ++m) {
    alone[m].resize(static_cast<size_t>(N));
    matmul_rows(1, N, K, x.data() + m * K, K, w.data(), K, b.data(), alone[m].data(), N);
  }
  const int saved = omp_get_max_threads();
  for (const int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (int64_t M = 1; M <= 40; ++M) {
      for (const int64_t first : {int64_t{0}, 40 - M}) {
        std::vector<float> y(static_cast<size_t>(M * N));
        matmul_rows(M, N, K, x.data() + first * K, K, w.data(), K, b.data(), y.data(), N);
        for (int64_t m = 0; m < M; ++m) {
          INFO("threads " << threads << " M " << M << " row " << first + m);
          CHECK(std::memcmp(y.data() + m * N, alone[first + m].data(), N * 4) == 0);
        }
      }
    }
  }
  omp_set_num_threads(saved);
}
