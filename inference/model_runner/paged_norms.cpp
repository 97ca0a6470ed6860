// norm_rows (inference/model_runner/paged_kernels.h). Compiled with -ffp-contract=off
// (inference/CMakeLists.txt) so that every clone runs the same operations: the AVX-512 one
// would fuse the sum of squares' multiply and add, which AVX2 and baseline x86-64 cannot.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/simd.h"
#include "inference/model_runner/paged_kernels.h"

namespace ember::inference::paged {

// Rows r0 .. r0 + G - 1, their sums side by side: each row's sums are the same chain in c
// order (its bits alone), but the G chains overlap instead of waiting on the latency of one
// double add after another.
template <int G>
[[gnu::always_inline]] inline void norm_group(bool rms, const float* x, int64_t r0, int64_t C, int64_t ld,
                                              const float* w, const float* b, double eps, float* out, int64_t ldo) {
  const float* xr[G];
  for (int j = 0; j < G; ++j) xr[j] = x + (r0 + j) * ld;
  double mean[G] = {}, ss[G] = {};
  if (!rms) {
    for (int64_t c = 0; c < C; ++c) {
      for (int j = 0; j < G; ++j) mean[j] += xr[j][c];
    }
    for (int j = 0; j < G; ++j) mean[j] /= static_cast<double>(C);
  }
  for (int64_t c = 0; c < C; ++c) {
    for (int j = 0; j < G; ++j) ss[j] += (xr[j][c] - mean[j]) * (xr[j][c] - mean[j]);
  }
  for (int j = 0; j < G; ++j) {
    float* o = out + (r0 + j) * ldo;
    const double inv = 1.0 / std::sqrt(ss[j] / static_cast<double>(C) + eps);
    for (int64_t c = 0; c < C; ++c) {
      const double v = (xr[j][c] - mean[j]) * inv * w[c] + (b ? b[c] : 0.0);
      o[c] = static_cast<float>(v);
    }
  }
}

// Groups of 8 rows (a decode step's 16: 25 norms of 16 x 768 2x faster than row by row), the
// rows left over in groups of 4, 2 and 1 (no row summed twice).
EMBER_TARGET_CLONES void norm_rows(const std::string& kind, float* x, int64_t R, int64_t C, int64_t ld,
                                   const float* w, const float* b, double eps, float* out, int64_t ldo) {
  const bool rms = kind == "rmsnorm";
  const int64_t whole = R / 8 * 8;
#pragma omp parallel for if (R * C > (1 << 15))
  for (int64_t r0 = 0; r0 < whole; r0 += 8) norm_group<8>(rms, x, r0, C, ld, w, b, eps, out, ldo);
  int64_t r0 = whole;
  if (R - r0 >= 4) norm_group<4>(rms, x, r0, C, ld, w, b, eps, out, ldo), r0 += 4;
  if (R - r0 >= 2) norm_group<2>(rms, x, r0, C, ld, w, b, eps, out, ldo), r0 += 2;
  if (R - r0 >= 1) norm_group<1>(rms, x, r0, C, ld, w, b, eps, out, ldo);
}

}  // namespace ember::inference::paged
