// matmul_rows: y[m, n] = sum_k x[m, k] w[n, k] (+ bias[n]), batch-invariant.
// Each output's order is fixed by K alone: 16 lane sums acc[j] = sum over
// k = j (mod 16), k < K16 (K16 = K rounded down to 16), in increasing k; then
// s = acc[0] + ... + acc[15] left to right, then the tail k >= K16 in order,
// then + bias. Every tile shape computes exactly this sequence of float ops.
#include "core/kernels/matmul_rows.h"

#include <omp.h>

#include "core/simd.h"

namespace ember::kernels {
namespace {

constexpr int64_t kLanes = 16;

EMBER_TARGET_CLONES void matmul_rows_block(int64_t M, int64_t n0, int64_t n1, int64_t K,
                                           const float* __restrict x, int64_t ldx,
                                           const float* __restrict w, int64_t ldw,
                                           const float* __restrict bias, float* __restrict y,
                                           int64_t ldy) {
  const int64_t k_main = K - K % kLanes;
  for (int64_t n = n0; n < n1; ++n) {
    const float* __restrict row = w + n * ldw;
    for (int64_t m = 0; m < M; ++m) {
      const float* __restrict xr = x + m * ldx;
      float acc[kLanes] = {};
      for (int64_t k = 0; k < k_main; k += kLanes) {
        for (int64_t j = 0; j < kLanes; ++j) acc[j] += xr[k + j] * row[k + j];
      }
      float s = 0;
      for (int64_t j = 0; j < kLanes; ++j) s += acc[j];
      for (int64_t k = k_main; k < K; ++k) s += xr[k] * row[k];
      if (bias) s += bias[n];
      y[m * ldy + n] = s;
    }
  }
}

}  // namespace

void matmul_rows(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* w,
                 int64_t ldw, const float* bias, float* y, int64_t ldy) {
  if (M <= 0 || N <= 0) return;
  const bool parallel = N * K >= (int64_t{1} << 16) && !omp_in_parallel();
#pragma omp parallel if (parallel)
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t n0 = N * t / threads, n1 = N * (t + 1) / threads;
    matmul_rows_block(M, n0, n1, K, x, ldx, w, ldw, bias, y, ldy);
  }
}

}  // namespace ember::kernels
