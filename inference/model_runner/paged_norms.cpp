// norm_rows (inference/model_runner/paged_kernels.h). Compiled with -ffp-contract=off
// (inference/CMakeLists.txt) so that every clone runs the same operations: the AVX-512 one
// would fuse the sum of squares' multiply and add, which AVX2 and baseline x86-64 cannot.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/simd.h"
#include "inference/model_runner/paged_kernels.h"

namespace ember::inference::paged {

// Rows in groups of kNormRows whose sums run side by side: each row's sums are the same chain
// in c order (its bits alone), but the chains of a group overlap instead of waiting on the
// latency of one double add after another (25 norms of a decode step's 16 x 768: 2x faster).
constexpr int64_t kNormRows = 8;

EMBER_TARGET_CLONES void norm_rows(const std::string& kind, float* x, int64_t R, int64_t C, int64_t ld,
                                   const float* w, const float* b, double eps, float* out, int64_t ldo) {
  const bool rms = kind == "rmsnorm";
#pragma omp parallel for if (R * C > (1 << 15))
  for (int64_t r0 = 0; r0 < R; r0 += kNormRows) {
    const int64_t n = std::min(kNormRows, R - r0);
    const float* xr[kNormRows];
    for (int64_t j = 0; j < kNormRows; ++j) xr[j] = x + (r0 + std::min(j, n - 1)) * ld;  // past n: a copy
    double mean[kNormRows] = {}, ss[kNormRows] = {};
    if (!rms) {
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t j = 0; j < kNormRows; ++j) mean[j] += xr[j][c];
      }
      for (int64_t j = 0; j < kNormRows; ++j) mean[j] /= static_cast<double>(C);
    }
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t j = 0; j < kNormRows; ++j) ss[j] += (xr[j][c] - mean[j]) * (xr[j][c] - mean[j]);
    }
    for (int64_t j = 0; j < n; ++j) {
      float* o = out + (r0 + j) * ldo;
      const double inv = 1.0 / std::sqrt(ss[j] / static_cast<double>(C) + eps);
      for (int64_t c = 0; c < C; ++c) {
        const double v = (xr[j][c] - mean[j]) * inv * w[c] + (b ? b[c] : 0.0);
        o[c] = static_cast<float>(v);
      }
    }
  }
}

}  // namespace ember::inference::paged
