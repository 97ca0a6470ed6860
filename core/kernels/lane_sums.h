// Sums of 16-lane accumulators in one fixed order, sixteen at a time:
//   out[o] = 0 + v[o][0] + v[o][1] + ... + v[o][15]   (left to right)
// by a 16 x 16 transpose (four stages; stage b swaps bit b of the vector
// index with bit b of the lane) and 16 vector adds: the same float additions
// in the same order as sixteen scalar loops, for a fraction of the
// instructions. Used where a batch-invariant kernel fixes its summation order
// (kernels::matmul_rows, the paged attention scores).
#pragma once
#include <cstdint>
#include <cstring>

namespace ember::kernels {

typedef float v16 __attribute__((vector_size(64)));

// v is overwritten (it holds the transpose afterwards).
__attribute__((always_inline)) inline void lane_sums(v16* v, float* out) {
  typedef int32_t i16v __attribute__((vector_size(64)));
  static constexpr i16v lo_mask[4] = {
      {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
      {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
      {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
      {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}};
  static constexpr i16v hi_mask[4] = {
      {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31},
      {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
      {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31},
      {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}};
#pragma GCC unroll 4
  for (int b = 0; b < 4; ++b) {
    const int bit = 1 << b;
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) {
      if (r & bit) continue;
      const v16 lo = v[r], hi = v[r | bit];
      v[r] = __builtin_shuffle(lo, hi, lo_mask[b]);
      v[r | bit] = __builtin_shuffle(lo, hi, hi_mask[b]);
    }
  }
  v16 s{};
#pragma GCC unroll 16
  for (int l = 0; l < 16; ++l) s += v[l];
  std::memcpy(out, &s, sizeof(s));
}

}  // namespace ember::kernels
