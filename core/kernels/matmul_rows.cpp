// matmul_rows: y[m, n] = sum_k x[m, k] w[n, k] (+ bias[n]), batch-invariant.
// Each output's order is fixed by K alone: 16 lane sums acc[j] = sum over
// k = j (mod 16), k < K16 (K rounded down to 16), in increasing k; then
// s = 0 + acc[0] + ... + acc[15] left to right, then the tail k >= K16 in
// order, then + bias. Every tile shape below runs exactly this sequence of
// float operations per output (no FMA contraction in this file), so tiling,
// M and the thread split (over n only) never change a bit of any row.
// Speed: a tile of MR rows of x times NR rows of w keeps MR * NR 16-lane
// accumulators in registers; the NR weight rows stay in L1 while every
// m-tile of a chunk of rows reads them, so W comes from memory once per chunk.
#include "core/kernels/matmul_rows.h"

#pragma GCC optimize("fp-contract=fast")

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/simd.h"

namespace ember::kernels {
namespace {

typedef float v16 __attribute__((vector_size(64)));

constexpr int64_t kLanes = 16;
constexpr int64_t kMaxMR = 4, kMaxNR = 4;
constexpr int64_t kRowChunk = 64;  // rows of x per pass over a weight block

struct Args {
  int64_t K;
  const float* x;
  int64_t ldx;
  const float* w;
  int64_t ldw;
  const float* bias;
  float* y;
  int64_t ldy;
};

// (An out-parameter: a 64-byte vector returned by value draws GCC's -Wpsabi note.)
__attribute__((always_inline)) inline void load16(v16& v, const float* p) {
  std::memcpy(&v, p, sizeof(v));
}

// Outputs [m, m + MR) x [n, n + NR) in the fixed order of the file comment.
template <int MR, int NR>
__attribute__((always_inline)) inline void tile(const Args& a, int64_t m, int64_t n) {
  const int64_t k_main = a.K - a.K % kLanes;
  const float* xr[MR];
  const float* wr[NR];
  for (int i = 0; i < MR; ++i) xr[i] = a.x + (m + i) * a.ldx;
  for (int j = 0; j < NR; ++j) wr[j] = a.w + (n + j) * a.ldw;
  v16 acc[MR][NR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) acc[i][j] = v16{};
  for (int64_t k = 0; k < k_main; k += kLanes) {
    v16 wv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) load16(wv[j], wr[j] + k);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      v16 xv;
      load16(xv, xr[i] + k);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] += xv * wv[j];
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float s = 0;
      for (int l = 0; l < kLanes; ++l) s += acc[i][j][l];
      for (int64_t k = k_main; k < a.K; ++k) s += xr[i][k] * wr[j][k];
      if (a.bias) s += a.bias[n + j];
      a.y[(m + i) * a.ldy + n + j] = s;
    }
  }
}

template <int MR>
__attribute__((always_inline)) inline void tile_nr(const Args& a, int64_t m, int64_t n, int64_t nr) {
  switch (nr) {
    case 4: return tile<MR, 4>(a, m, n);
    case 3: return tile<MR, 3>(a, m, n);
    case 2: return tile<MR, 2>(a, m, n);
    default: return tile<MR, 1>(a, m, n);
  }
}

// Columns [n0, n1) of all M rows, tiles of at most mr_max x nr_max.
EMBER_TARGET_CLONES void matmul_rows_block(const Args& a, int64_t M, int64_t n0, int64_t n1,
                                           int64_t mr_max, int64_t nr_max) {
  for (int64_t m0 = 0; m0 < M; m0 += kRowChunk) {
    const int64_t m1 = std::min(M, m0 + kRowChunk);
    for (int64_t n = n0; n < n1; n += nr_max) {
      const int64_t nr = std::min(nr_max, n1 - n);
      for (int64_t m = m0; m < m1; m += mr_max) {
        switch (std::min(mr_max, m1 - m)) {
          case 4: tile_nr<4>(a, m, n, nr); break;
          case 3: tile_nr<3>(a, m, n, nr); break;
          case 2: tile_nr<2>(a, m, n, nr); break;
          default: tile_nr<1>(a, m, n, nr); break;
        }
      }
    }
  }
}

// Tile shape by register file: 32 zmm hold 4 x 4 accumulators; 16 ymm hold 4 x 1 (2 ymm each).
int64_t tile_nr_max() {
  static const int64_t nr = __builtin_cpu_supports("avx512f") ? kMaxNR : 1;
  return nr;
}

}  // namespace

void matmul_rows(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* w,
                 int64_t ldw, const float* bias, float* y, int64_t ldy) {
  if (M <= 0 || N <= 0) return;
  const Args a{K, x, ldx, w, ldw, bias, y, ldy};
  const int64_t nr_max = tile_nr_max();
  // Parallel over contiguous column ranges once the work outweighs a fork-join.
  const bool parallel = N * K * std::min<int64_t>(M, 8) >= (int64_t{1} << 17) && !omp_in_parallel();
#pragma omp parallel if (parallel)
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t n0 = N * t / threads, n1 = N * (t + 1) / threads;
    matmul_rows_block(a, M, n0, n1, kMaxMR, nr_max);
  }
}

}  // namespace ember::kernels
