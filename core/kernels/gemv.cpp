// gemv_rows: rows of W split over threads; each row's dot product with x runs
// in 32 independent lanes (so the loop is bound by loads, not by add latency),
// compiled per ISA (AVX-512, AVX2, baseline) by EMBER_TARGET_CLONES.
//   y[n] = alpha * sum_k x[k] w[n, k] + beta * y[n]
#include "core/kernels/gemv.h"

#include <omp.h>

#include "core/simd.h"

namespace ember::kernels {
namespace {

constexpr int64_t kLanes = 32;

EMBER_TARGET_CLONES void gemv_block(int64_t n0, int64_t n1, int64_t K, const float* __restrict x,
                                    const float* __restrict w, int64_t ldw, float* __restrict y,
                                    int64_t incy, float alpha, float beta) {
  const int64_t k_main = K - K % kLanes;
  for (int64_t n = n0; n < n1; ++n) {
    const float* __restrict row = w + n * ldw;
    float acc[kLanes] = {};
    for (int64_t k = 0; k < k_main; k += kLanes) {
#pragma omp simd
      for (int64_t j = 0; j < kLanes; ++j) acc[j] += x[k + j] * row[k + j];
    }
    float s = 0;
    for (int64_t k = k_main; k < K; ++k) s += x[k] * row[k];
    for (int64_t j = 0; j < kLanes; ++j) s += acc[j];
    float& out = y[n * incy];
    out = beta == 0 ? alpha * s : alpha * s + beta * out;
  }
}

}  // namespace

void gemv_rows(int64_t N, int64_t K, const float* x, const float* w, int64_t ldw, float* y,
               int64_t incy, float alpha, float beta) {
  // Parallel when W is past 1 MiB (below, a fork-join costs about what it saves);
  // contiguous row ranges per thread.
  const bool parallel = N * K >= (int64_t{1} << 18) && !omp_in_parallel();
#pragma omp parallel if (parallel)
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t n0 = N * t / threads, n1 = N * (t + 1) / threads;
    gemv_block(n0, n1, K, x, w, ldw, y, incy, alpha, beta);
  }
}

}  // namespace ember::kernels
