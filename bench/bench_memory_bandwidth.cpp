// Prints the machine's read bandwidth from memory (GB/s) for 1 .. all OpenMP
// threads: the floor of every memory-bound step of inference (a decode step
// reads all weights and its KV cache once). Each thread sums its contiguous
// part of a 1 GiB float array with four independent vector accumulators, so the
// loads, not the adds, set the pace; the best of 8 passes.
//   GB/s = bytes read / seconds / 1e9
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "apps/common/stopwatch.h"
#include "core/kernels/lane_sums.h"
#include "core/simd.h"

namespace {

using ember::kernels::v16;

// The sum of x[0, n) (n a multiple of 64), in four lanes of 16.
EMBER_TARGET_CLONES float read_sum(const float* x, size_t n) {
  v16 s[4] = {};
  for (size_t i = 0; i < n; i += 64) {
    for (int j = 0; j < 4; ++j) {
      v16 v;
      std::memcpy(&v, x + i + 16 * j, sizeof v);
      s[j] += v;
    }
  }
  float total = 0;
  for (int j = 0; j < 4; ++j)
    for (int l = 0; l < 16; ++l) total += s[j][l];
  return total;
}

}  // namespace

int main() {
  const size_t n = size_t{1} << 28;  // 1 GiB of float32, far past any cache
  std::vector<float> data(n, 1.0f);
  const int max_threads = omp_get_max_threads();
  std::printf("%8s %10s\n", "threads", "read GB/s");
  volatile float sink = 0;
  for (int threads = 1; threads <= max_threads; ++threads) {
    const double s = ember::apps::best_seconds({1, 8, 8, 0}, [&] {
      float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
      {
        const size_t t = omp_get_thread_num(), T = omp_get_num_threads();
        const size_t i0 = n * t / T / 64 * 64, i1 = n * (t + 1) / T / 64 * 64;
        total += read_sum(data.data() + i0, i1 - i0);
      }
      sink = sink + total;
    });
    std::printf("%8d %10.1f\n", threads, static_cast<double>(n * sizeof(float)) / s / 1e9);
  }
  return 0;
}
