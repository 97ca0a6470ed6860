// matmul_rows: y[m, n] = sum_k x[m, k] w[n, k] (+ bias[n]), batch-invariant.
// Each output's order is fixed by K alone: 16 lane sums acc[j] = sum over
// k = j (mod 16), k < K16 (K rounded down to 16), in increasing k; then
// s = 0 + acc[0] + ... + acc[15] left to right, then the tail k >= K16 in
// order (each step one explicit fused multiply-add, so every instantiation rounds it alike),
// then + bias. Every tile shape below runs exactly this sequence of
// float operations per output (FMA contraction is on for this file: core/CMakeLists.txt, and so
// applies alike to every tile), so tiling, M and the thread split (over n
// only) never change a bit of any row.
// Speed: a tile of MR rows of x times NR rows of w keeps MR * NR 16-lane
// accumulators in registers; the NR weight rows stay in L1 while every
// m-tile of a chunk of rows (sized to stay in L2) reads them, so W comes from
// memory once per chunk.
#include "core/kernels/matmul_rows.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/kernels/bf16.h"
#include "core/kernels/lane_sums.h"
#include "core/simd.h"

namespace ember::kernels {
namespace {

constexpr int64_t kLanes = 16;
constexpr int64_t kMaxMR = 4, kMaxNR = 4;
constexpr int kStreams = 8;  // weight rows of a one-row tile, each from its own part of the range
constexpr int64_t kAheadBytes = 4096;  // how far ahead a one-row tile prefetches each weight row
constexpr int64_t kMB = 64, kNB = 16, kKB = 1024;  // the k-blocked path's block sizes

// W: float, or uint16_t for bfloat16 weights in the pair order (matmul_rows.h), each widened
// exactly to its float when loaded and met by the x it meets in the float32 order, so the
// sequence of float operations is the one float32 weights of the same values run.
template <class W>
struct Args {
  int64_t K;
  const float* x;
  int64_t ldx;
  const W* w;
  int64_t ldw;
  const float* bias;
  float* y;
  int64_t ldy;
};

// (An out-parameter: a 64-byte vector returned by value draws GCC's -Wpsabi note.)
__attribute__((always_inline)) inline void load16(v16& v, const float* p) {
  std::memcpy(&v, p, sizeof(v));
}
__attribute__((always_inline)) inline void load16(v16& v, const uint16_t* p) {
  typedef uint16_t u16x16 __attribute__((vector_size(32)));
  typedef uint32_t u32x16 __attribute__((vector_size(64)));
  u16x16 h;
  std::memcpy(&h, p, sizeof(h));
  const u32x16 bits = __builtin_convertvector(h, u32x16) << 16;
  std::memcpy(&v, &bits, sizeof(v));
}
// 32 bfloat16 weights in the pair order: lo gets k = 32c + j (lane j), hi k = 32c + 16 + j.
__attribute__((always_inline)) inline void load_pair(v16& lo, v16& hi, const uint16_t* p) {
  typedef uint32_t u32x16 __attribute__((vector_size(64)));
  u32x16 bits;
  std::memcpy(&bits, p, sizeof(bits));
  const u32x16 l = bits << 16, h = bits & 0xFFFF0000u;
  std::memcpy(&lo, &l, sizeof(lo));
  std::memcpy(&hi, &h, sizeof(hi));
}
__attribute__((always_inline)) inline float widen(float x) { return x; }
__attribute__((always_inline)) inline float widen(uint16_t h) { return bfloat16_value(h); }

// Prefetches of a tile's k step (they never change a result): the rows `prefetch` points to
// (NR of them, at k, into L2) and each weight row `ahead` elements on (into L1).
template <int NR, class W>
__attribute__((always_inline)) inline void fetch_ahead(const Args<W>& a, const W* const* wr, const W* prefetch,
                                                       int64_t k, int64_t ahead) {
  if (prefetch) {
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) __builtin_prefetch(prefetch + j * a.ldw + k, 0, 1);
  }
  if (ahead > 0) {
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) __builtin_prefetch(wr[j] + k + ahead, 0, 3);
  }
}

// Outputs [m, m + MR) x [n, n + NR), lane sums over k in [k0, k1) (multiples of 16, within
// K16): started at 0 when `first`, else loaded from acc (output (i, j) at acc[i * ld + j]);
// finished into y when `last` (the fixed order of the file comment), else stored back to acc.
// Stores and loads are exact, so k-blocking never changes the sequence of operations.
// rs: the weight rows' stride; ahead (when > 0): each weight row is also prefetched this many
// elements ahead (into L1: more lines in flight than the hardware prefetcher keeps).
template <int MR, int NR, class W>
__attribute__((always_inline)) inline void tile(const Args<W>& a, int64_t m, int64_t n, int64_t k0,
                                                int64_t k1, v16* acc_mem, int64_t ld, bool first,
                                                bool last, const W* prefetch, int64_t rs = 1,
                                                int64_t ahead = 0) {
  const float* xr[MR];
  const W* wr[NR];
  for (int i = 0; i < MR; ++i) xr[i] = a.x + (m + i) * a.ldx;
  for (int j = 0; j < NR; ++j) wr[j] = a.w + (n + j * rs) * a.ldw;
  v16 acc[MR][NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = first ? v16{} : acc_mem[i * ld + j];
  int64_t k = k0;
  if constexpr (std::is_same_v<W, uint16_t>) {  // whole blocks of 32 in the pair order: k, k + 16 at once
    const int64_t k32 = std::min(k1, a.K - a.K % 32);
    for (; k + 32 <= k32; k += 32) {
      fetch_ahead<NR>(a, wr, prefetch, k, ahead);
      v16 lo[NR], hi[NR];
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) load_pair(lo[j], hi[j], wr[j] + k);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        v16 x0, x1;
        load16(x0, xr[i] + k);
        load16(x1, xr[i] + k + kLanes);
#pragma GCC unroll 8
        for (int j = 0; j < NR; ++j) acc[i][j] += x0 * lo[j];
#pragma GCC unroll 8
        for (int j = 0; j < NR; ++j) acc[i][j] += x1 * hi[j];
      }
    }
  }
  for (; k < k1; k += kLanes) {
    fetch_ahead<NR>(a, wr, prefetch, k, ahead);
    v16 wv[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) load16(wv[j], wr[j] + k);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      v16 xv;
      load16(xv, xr[i] + k);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i][j] += xv * wv[j];
    }
  }
  if (!last) {
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc_mem[i * ld + j] = acc[i][j];
    return;
  }
  const int64_t k_main = a.K - a.K % kLanes;
  if constexpr (MR * NR == kLanes) {  // a full tile: its 16 lane sums at once, same order
    float sums[kLanes];
    lane_sums(acc[0], sums);
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) {
        float s = sums[i * NR + j];
        for (int64_t k = k_main; k < a.K; ++k) s = std::fma(xr[i][k], widen(wr[j][k]), s);
        if (a.bias) s += a.bias[n + j * rs];
        a.y[(m + i) * a.ldy + n + j * rs] = s;
      }
    }
    return;
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float s = 0;
      for (int l = 0; l < kLanes; ++l) s += acc[i][j][l];
      for (int64_t k = k_main; k < a.K; ++k) s = std::fma(xr[i][k], widen(wr[j][k]), s);
      if (a.bias) s += a.bias[n + j * rs];
      a.y[(m + i) * a.ldy + n + j * rs] = s;
    }
  }
}

// One k-range step of the mr x nr tile at (m, n) (see tile); prefetch: rows of w to fetch
// meanwhile (nr of them, at the same k), or null. Prefetches never change a result.
template <class W>
struct Step {
  int64_t k0, k1;
  v16* acc;
  int64_t ld;
  bool first, last;
  const W* prefetch = nullptr;
};

template <int MR, class W>
__attribute__((always_inline)) inline void tile_nr(const Args<W>& a, int64_t m, int64_t n, int64_t nr,
                                                   const Step<W>& st) {
  switch (nr) {
    case 4: return tile<MR, 4, W>(a, m, n, st.k0, st.k1, st.acc, st.ld, st.first, st.last, st.prefetch);
    case 3: return tile<MR, 3, W>(a, m, n, st.k0, st.k1, st.acc, st.ld, st.first, st.last, st.prefetch);
    case 2: return tile<MR, 2, W>(a, m, n, st.k0, st.k1, st.acc, st.ld, st.first, st.last, st.prefetch);
    default: return tile<MR, 1, W>(a, m, n, st.k0, st.k1, st.acc, st.ld, st.first, st.last, st.prefetch);
  }
}

template <class W>
__attribute__((always_inline)) inline void tile_any(const Args<W>& a, int64_t m, int64_t n,
                                                    int64_t mr, int64_t nr, const Step<W>& st) {
  switch (mr) {
    case 4: return tile_nr<4, W>(a, m, n, nr, st);
    case 3: return tile_nr<3, W>(a, m, n, nr, st);
    case 2: return tile_nr<2, W>(a, m, n, nr, st);
    default: return tile_nr<1, W>(a, m, n, nr, st);
  }
}

// K up to kKB: each tile runs over all of k in registers; the NR weight rows stay in L1
// while every m-tile of a chunk of rows (at least 64, up to 512 KiB of x) reads them, so W
// comes from memory once per chunk.
template <class W>
__attribute__((always_inline)) inline void block_direct(const Args<W>& a, int64_t M, int64_t n0,
                                                        int64_t n1, int64_t nr_max) {
  Step<W> st{0, a.K - a.K % kLanes, nullptr, 0, true, true};
  const int64_t chunk = std::clamp<int64_t>((int64_t{1} << 17) / std::max<int64_t>(a.K, 1), 64, 256) / 4 * 4;
  if (M == 1 && nr_max == kMaxNR) {
    // One row of x (a decode step's single stream): a tile takes its 4 weight rows from the 4
    // quarters of the range, so W streams from 4 places at once (one sequential stream alone
    // does not reach a core's bandwidth from memory); the rest after, 4 adjacent rows a tile.
    const int64_t q = (n1 - n0) / kStreams, ahead = kAheadBytes / static_cast<int64_t>(sizeof(W));
    for (int64_t n = n0; n < n0 + q; ++n) {
      tile<1, kStreams, W>(a, 0, n, st.k0, st.k1, st.acc, st.ld, true, true, nullptr, q, ahead);
    }
    for (int64_t n = n0 + kStreams * q; n < n1; n += kMaxNR) tile_any(a, 0, n, 1, std::min(kMaxNR, n1 - n), st);
    return;
  }
  for (int64_t m0 = 0; m0 < M; m0 += chunk) {
    const int64_t m1 = std::min(M, m0 + chunk);
    for (int64_t n = n0; n < n1; n += nr_max) {
      // The first m-tile of each group of weight rows brings the next group into L2.
      const bool more = n + 2 * nr_max <= n1;
      for (int64_t m = m0; m < m1; m += kMaxMR) {
        st.prefetch = m == m0 && more ? a.w + (n + nr_max) * a.ldw : nullptr;
        tile_any(a, m, n, std::min(kMaxMR, m1 - m), std::min(nr_max, n1 - n), st);
      }
    }
  }
}

// Many rows and K past kKB: blocks of kMB rows x kNB columns x kKB k, the lane sums kept in acc between
// k-blocks, so the x block (kMB x kKB) stays in L2 and the w block in L1 whatever K is.

template <class W>
__attribute__((always_inline)) inline void block_tiled(const Args<W>& a, int64_t M, int64_t n0,
                                                       int64_t n1, int64_t nr_max) {
  v16 acc[kMB * kNB];  // 64 KiB
  const int64_t k_main = a.K - a.K % kLanes;
  for (int64_t m0 = 0; m0 < M; m0 += kMB) {
    const int64_t m1 = std::min(M, m0 + kMB);
    for (int64_t nb = n0; nb < n1; nb += kNB) {
      const int64_t nb1 = std::min(n1, nb + kNB);
      for (int64_t k0 = 0; k0 == 0 || k0 < k_main; k0 += kKB) {
        const int64_t k1 = std::min(k_main, k0 + kKB);
        for (int64_t n = nb; n < nb1; n += nr_max) {
          for (int64_t m = m0; m < m1; m += kMaxMR) {
            const Step<W> st{k0, k1, acc + (m - m0) * kNB + (n - nb), kNB, k0 == 0, k1 == k_main, nullptr};
            tile_any(a, m, n, std::min(kMaxMR, m1 - m), std::min(nr_max, nb1 - n), st);
          }
        }
      }
    }
  }
}

// The compiled (cloned) forms of the two paths, per weight type.
EMBER_TARGET_CLONES void direct_f32(const Args<float>& a, int64_t M, int64_t n0, int64_t n1, int64_t nr) {
  block_direct(a, M, n0, n1, nr);
}
EMBER_TARGET_CLONES void tiled_f32(const Args<float>& a, int64_t M, int64_t n0, int64_t n1, int64_t nr) {
  block_tiled(a, M, n0, n1, nr);
}
EMBER_TARGET_CLONES void direct_bf16(const Args<uint16_t>& a, int64_t M, int64_t n0, int64_t n1,
                                     int64_t nr) {
  block_direct(a, M, n0, n1, nr);
}
EMBER_TARGET_CLONES void tiled_bf16(const Args<uint16_t>& a, int64_t M, int64_t n0, int64_t n1,
                                    int64_t nr) {
  block_tiled(a, M, n0, n1, nr);
}
void run_direct(const Args<float>& a, int64_t M, int64_t n0, int64_t n1, int64_t nr) { direct_f32(a, M, n0, n1, nr); }
void run_direct(const Args<uint16_t>& a, int64_t M, int64_t n0, int64_t n1, int64_t nr) { direct_bf16(a, M, n0, n1, nr); }
void run_tiled(const Args<float>& a, int64_t M, int64_t n0, int64_t n1, int64_t nr) { tiled_f32(a, M, n0, n1, nr); }
void run_tiled(const Args<uint16_t>& a, int64_t M, int64_t n0, int64_t n1, int64_t nr) { tiled_bf16(a, M, n0, n1, nr); }

// bfloat16 weights for many rows (prefill): kPanel weight rows at a time widened once to
// float32, then the float32 tiles run on the panel. The widening is exact and the tiles' order
// is the one every path runs, so this gives the bits the direct bf16 tiles give (which widen on
// every load: cheap when W streams from memory for a few rows, dearer than the FMAs when many
// rows reuse each weight).
constexpr int64_t kPanel = 16, kPanelMinRows = 16;
void panels_bf16(const Args<uint16_t>& a, int64_t M, int64_t n0, int64_t n1, int64_t nr) {
  thread_local std::vector<float> panel;
  panel.resize(static_cast<size_t>(kPanel * a.K));
  for (int64_t n = n0; n < n1; n += kPanel) {
    const int64_t rows = std::min(kPanel, n1 - n);
    for (int64_t r = 0; r < rows; ++r) {
      widen_row_bf16(a.w + (n + r) * a.ldw, a.K, panel.data() + r * a.K);
    }
    const Args<float> f{a.K, a.x, a.ldx, panel.data(), a.K, a.bias ? a.bias + n : nullptr, a.y + n, a.ldy};
    if (M < 16 || a.K <= kKB) {
      direct_f32(f, M, 0, rows, nr);
    } else {
      tiled_f32(f, M, 0, rows, nr);
    }
  }
}

// Tile shape by register file: 32 zmm hold 4 x 4 accumulators; 16 ymm hold 4 x 1 (2 ymm each).
int64_t tile_nr_max() {
  static const int64_t nr = __builtin_cpu_supports("avx512f") ? kMaxNR : 1;
  return nr;
}

template <class W>
void matmul_rows_any(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const W* w,
                     int64_t ldw, const float* bias, float* y, int64_t ldy) {
  if (M <= 0 || N <= 0) return;
  const Args<W> a{K, x, ldx, w, ldw, bias, y, ldy};
  const int64_t nr_max = tile_nr_max();
  // Parallel over contiguous column ranges once the work outweighs a fork-join.
  const bool parallel = N * K * std::min<int64_t>(M, 8) >= (int64_t{1} << 17) && !omp_in_parallel();
#pragma omp parallel if (parallel)
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t n0 = N * t / threads, n1 = N * (t + 1) / threads;
    bool done = false;
    if constexpr (std::is_same_v<W, uint16_t>) {
      if (M > kPanelMinRows) {
        panels_bf16(a, M, n0, n1, nr_max);
        done = true;
      }
    }
    if (done) {
    } else if (M < 16 || K <= kKB) {
      run_direct(a, M, n0, n1, nr_max);
    } else {
      run_tiled(a, M, n0, n1, nr_max);
    }
  }
}

}  // namespace

void matmul_rows(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* w,
                 int64_t ldw, const float* bias, float* y, int64_t ldy) {
  matmul_rows_any(M, N, K, x, ldx, w, ldw, bias, y, ldy);
}

void matmul_rows_bf16(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const uint16_t* w,
                      int64_t ldw, const float* bias, float* y, int64_t ldy) {
  matmul_rows_any(M, N, K, x, ldx, w, ldw, bias, y, ldy);
}

void pack_rows_bf16(const float* w, int64_t N, int64_t K, uint16_t* out) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) out[n * K + bf16_pair_position(k, K)] = bfloat16_bits(w[n * K + k]);
  }
}

void widen_row_bf16(const uint16_t* row, int64_t K, float* out) {
  const int64_t k32 = K - K % 32;
  for (int64_t c = 0; c < k32; c += 32) {
    for (int64_t j = 0; j < 16; ++j) {
      out[c + j] = bfloat16_value(row[c + 2 * j]);
      out[c + 16 + j] = bfloat16_value(row[c + 2 * j + 1]);
    }
  }
  for (int64_t k = k32; k < K; ++k) out[k] = bfloat16_value(row[k]);
}

}  // namespace ember::kernels
