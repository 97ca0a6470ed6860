// Building blocks of the flash attention kernels (core/kernels/attention_*.cpp):
// the tile geometry and mask, packing of head rows into padded tiles, and the
// register-blocked tile GEMM. Everything here is always_inline so that it is
// compiled inside the per-ISA clones of the tile functions (EMBER_TARGET_CLONES)
// that call it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "core/kernels/attention/attention.h"
#include "core/kernels/fast_math.h"
#include "core/simd.h"
#include "core/threads.h"

#define EMBER_ATTN_INLINE inline __attribute__((always_inline))

// The 64-byte vector helpers below take and return vectors by value; they are
// always inlined into the per-ISA clones, so GCC's note that such a function's
// ABI differs without AVX-512 concerns no real call.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace ember::kernels::attn {

// Tile sizes: Br query rows x Bc keys. A [Br, Bc] score tile and the packed
// [Br or Bc, Dp] operand tiles stay in L1/L2.
constexpr int64_t kBr = 64, kBc = 64;
// Micro-kernel: kMR rows x two 64-byte vectors of columns.
constexpr int kMR = 4;
template <class T>
constexpr int64_t kNR = 2 * 64 / static_cast<int64_t>(sizeof(T));

// Rows of a [B, N, H, D] tensor with a contiguous D axis.
template <class T>
struct HeadRows {
  T* data;
  int64_t sb, sn, sh;
  HeadRows(T* d, const Tensor& t) : data(d), sb(t.stride(0)), sn(t.stride(1)), sh(t.stride(2)) {}
  T* row(int64_t b, int64_t n, int64_t h) const { return data + b * sb + n * sn + h * sh; }
};

struct Geometry {
  int64_t B, T, S, Hq, Hkv, D, Dp;
  double scale;
  int64_t window;
  double softcap;
  Geometry(const Tensor& q, const Tensor& k, const AttentionParams& p, int64_t nr)
      : B(q.size(0)),
        T(q.size(1)),
        S(k.size(1)),
        Hq(q.size(2)),
        Hkv(k.size(2)),
        D(q.size(3)),
        Dp((q.size(3) + nr - 1) / nr * nr),
        scale(p.scale),
        window(p.window),
        softcap(p.softcap) {}
  int64_t group() const { return Hq / Hkv; }
  int64_t q_tiles() const { return (T + kBr - 1) / kBr; }
  int64_t kv_tiles() const { return (S + kBc - 1) / kBc; }
  int64_t T_pad() const { return q_tiles() * kBr; }
  int64_t S_pad() const { return kv_tiles() * kBc; }
  // Position of query row t (rows past T, the padding of the last tile, continue the count).
  int64_t pos(int64_t t) const { return S - T + t; }
  // Keys visible to row t: [first_key, last_key] (last_key may be >= S on padding rows).
  int64_t first_key(int64_t t) const {
    return window > 0 ? std::max<int64_t>(0, pos(t) - window + 1) : 0;
  }
  int64_t last_key(int64_t t) const { return pos(t); }
  // Rows that see key s (s < S): [first_row, last_row], the inverse of the above.
  int64_t first_row(int64_t s) const { return s - (S - T); }
  int64_t last_row(int64_t s) const {
    return window > 0 ? s + window - 1 - (S - T) : std::numeric_limits<int64_t>::max() / 4;
  }
  // Every (row, key) of tile (t0, s0) is visible and real: no mask needed.
  bool tile_unmasked(int64_t t0, int64_t s0) const {
    return s0 + kBc <= S && s0 + kBc - 1 <= last_key(t0) && first_key(t0 + kBr - 1) <= s0;
  }
  // Enough multiply-adds to be worth a parallel region.
  bool parallel() const { return B * Hq * T * S * D > kParallelGrain; }
};

// Copies rows n0 .. n0 + count - 1 (of head h, batch b) times f into dst
// [rows, Dp], zero-filling the padding rows and columns.
template <class T>
EMBER_ATTN_INLINE void pack_rows(T* __restrict dst, int64_t rows, const HeadRows<const T>& src,
                                 int64_t b, int64_t n0, int64_t count, int64_t h, int64_t D,
                                 int64_t Dp, T f) {
  for (int64_t i = 0; i < rows; ++i) {
    T* d = dst + i * Dp;
    if (i < count) {
      const T* s = src.row(b, n0 + i, h);
#pragma omp simd
      for (int64_t c = 0; c < D; ++c) d[c] = f * s[c];
      std::fill(d + D, d + Dp, T(0));
    } else {
      std::fill(d, d + Dp, T(0));
    }
  }
}

// Transpose of pack_rows (f = 1): dst [Dp, ld], dst[c * ld + j] = row n0 + j,
// column c, for j < kBc (zero past count and on padding columns).
template <class T>
EMBER_ATTN_INLINE void pack_columns(T* __restrict dst, int64_t ld, const HeadRows<const T>& src,
                                    int64_t b, int64_t n0, int64_t count, int64_t h, int64_t D,
                                    int64_t Dp) {
  for (int64_t c = 0; c < Dp; ++c) std::fill(dst + c * ld, dst + c * ld + kBc, T(0));
  for (int64_t j = 0; j < count; ++j) {
    const T* s = src.row(b, n0 + j, h);
    for (int64_t c = 0; c < D; ++c) dst[c * ld + j] = s[c];
  }
}

// 64-byte vectors of W lanes for the fused kernels, whose scores stay in
// registers from the GEMM through mask / exp: the backward's strips of kMR
// query rows x NV vectors of W keys, the forward's blocks of keys x vectors of
// W query rows (attention_forward_tile.h).
template <class T>
struct Vec {
  typedef T V __attribute__((vector_size(64)));
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  typedef I IV __attribute__((vector_size(64)));
  static constexpr int W = 64 / sizeof(T);
  static constexpr int NV = static_cast<int>(kBc) / W;  // vectors per tile row
  static EMBER_ATTN_INLINE V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof(V));
    return v;
  }
  static EMBER_ATTN_INLINE void store(T* p, V v) { std::memcpy(p, &v, sizeof(V)); }
  static EMBER_ATTN_INLINE V splat(T x) { return V{} + x; }
  static EMBER_ATTN_INLINE V vmax(V a, V b) { return a > b ? a : b; }
  // Lane indices j0 .. j0 + W - 1.
  static EMBER_ATTN_INLINE IV lanes(int j0) {
    IV r;
    for (int j = 0; j < W; ++j) r[j] = static_cast<I>(j0 + j);
    return r;
  }
  // exp(x) for the softmax, where x <= ~0 (scores minus their max or
  // logsumexp): the Cephes polynomial of fast::exp_f32 with x clamped to
  // [-87.3, 88] so that 2^n is one normal power of two. Below -87.3 the result
  // stays ~1e-38 instead of underflowing, negligible next to the row's largest
  // probability (P of invisible keys is set to exactly 0 by the mask). NaN in,
  // NaN out. float64 (tests, gradchecks) uses std::exp.
  static EMBER_ATTN_INLINE V exp(V x) {
    if constexpr (sizeof(T) == 4) {
      x = x < -87.3f ? V{} - 87.3f : x;
      x = x > 88.0f ? V{} + 88.0f : x;
      V fn;
      const V y = fast::exp_reduced(x, fn);
      const IV n = __builtin_convertvector(fn, IV);
      V s;
      const IV bits = (n + 127) << 23;
      std::memcpy(&s, &bits, sizeof(V));
      return y * s;
    } else {
      for (int j = 0; j < W; ++j) x[j] = std::exp(x[j]);
      return x;
    }
  }
};

// The register block of every tile product of these kernels:
//   acc[i][v] += sum_{k0 <= k < k1} A(i, k) B(k, v W .. v W + W - 1)
// with A(i, k) = a[i * si + k * sk] and B's rows ldb apart: per k, NV vector
// loads of B and R broadcasts of A feed R NV multiply-adds.
template <class T, int R, int NV>
EMBER_ATTN_INLINE void block_accumulate(typename Vec<T>::V (&acc)[R][NV], int64_t k0, int64_t k1,
                                        const T* __restrict a, int64_t si, int64_t sk,
                                        const T* __restrict b, int64_t ldb) {
  using X = Vec<T>;
  for (int64_t k = k0; k < k1; ++k) {
    typename X::V bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = X::load(b + k * ldb + v * X::W);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const T ai = a[i * si + k * sk];
      for (int v = 0; v < NV; ++v) acc[i][v] += ai * bv[v];
    }
  }
}

// One kMR x kNR block of C (+)= A B over k in [k0, k1), with A(i, k) =
// am[i * sam + k * sak] and B row-major (row stride ldb), held in 2 kMR
// vector registers while k runs.
template <class T>
EMBER_ATTN_INLINE void gemm_block(int64_t k0, int64_t k1, const T* __restrict am, int64_t sam,
                                  int64_t sak, const T* __restrict bn, int64_t ldb,
                                  T* __restrict cm, int64_t ldc, bool accumulate) {
  using X = Vec<T>;
  typename X::V r[kMR][2];
  for (int i = 0; i < kMR; ++i)
    for (int v = 0; v < 2; ++v)
      r[i][v] = accumulate ? X::load(cm + i * ldc + v * X::W) : typename X::V{};
  block_accumulate<T, kMR, 2>(r, k0, k1, am, sam, sak, bn, ldb);
  for (int i = 0; i < kMR; ++i)
    for (int v = 0; v < 2; ++v) X::store(cm + i * ldc + v * X::W, r[i][v]);
}

// C [M, N] += A B, where A(m, k) = a[m * sam + k * sak] and B [K, N] is
// row-major with row stride ldb (M % kMR == 0, N % kNR<T> == 0); block row m
// (rows m .. m + kMR - 1) sums only k in [k_lo[m / kMR], k_hi[m / kMR]): the
// rest of its terms are known to be zero (masked probabilities), so skipping
// them is exact.
template <class T>
EMBER_ATTN_INLINE void tile_gemm_ranged(int64_t M, int64_t N, const T* __restrict a, int64_t sam,
                                        int64_t sak, const T* __restrict b, int64_t ldb,
                                        T* __restrict c, int64_t ldc, const int32_t* k_lo,
                                        const int32_t* k_hi) {
  constexpr int64_t W = 64 / sizeof(T);
  for (int64_t m = 0; m < M; m += kMR) {
    const int64_t k0 = k_lo[m / kMR], k1 = k_hi[m / kMR];
    if (k0 >= k1) continue;
    for (int64_t n = 0; n < N; n += 2 * W) {
      gemm_block(k0, k1, a + m * sam, sam, sak, b + n, ldb, c + m * ldc + n, ldc, true);
    }
  }
}

// acc[i][v] = sum_k a[i * lda + k] b[k * kBc + v W]: kMR rows of A [.., K]
// times the first NV vectors of the columns of B [K, kBc].
template <class T, int NV>
EMBER_ATTN_INLINE void strip_scores(typename Vec<T>::V (&acc)[kMR][NV], const T* __restrict a,
                                    int64_t lda, const T* __restrict b, int64_t K) {
  for (int i = 0; i < kMR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = typename Vec<T>::V{};
  block_accumulate<T, kMR, NV>(acc, 0, K, a, lda, 1, b, kBc);
}

// c[i][:Dp] = beta[i] c[i][:Dp] (or 0 when beta is null) + sum_{k < K}
// a[i * lda + k] b[k * ldb + :Dp] for the kMR rows of a strip; Dp % 2W == 0.
// Columns in chunks of 4 (then 2) vectors: at most 4 kMR accumulators.
template <class T, int CH>
EMBER_ATTN_INLINE void strip_update_chunk(T* __restrict c, int64_t ldc, const T* beta,
                                          const T* __restrict a, int64_t lda, const T* __restrict b,
                                          int64_t ldb, int64_t K) {
  using X = Vec<T>;
  typename X::V r[kMR][CH];
  for (int i = 0; i < kMR; ++i)
    for (int v = 0; v < CH; ++v)
      r[i][v] = beta ? X::load(c + i * ldc + v * X::W) * beta[i] : typename X::V{};
  block_accumulate<T, kMR, CH>(r, 0, K, a, lda, 1, b, ldb);
  for (int i = 0; i < kMR; ++i)
    for (int v = 0; v < CH; ++v) X::store(c + i * ldc + v * X::W, r[i][v]);
}

template <class T>
EMBER_ATTN_INLINE void strip_update(T* __restrict c, int64_t ldc, const T* beta,
                                    const T* __restrict a, int64_t lda, const T* __restrict b,
                                    int64_t ldb, int64_t K, int64_t Dp) {
  constexpr int64_t W = Vec<T>::W;
  int64_t n = 0;
  for (; n + 4 * W <= Dp; n += 4 * W)
    strip_update_chunk<T, 4>(c + n, ldc, beta, a, lda, b + n, ldb, K);
  if (n < Dp) strip_update_chunk<T, 2>(c + n, ldc, beta, a, lda, b + n, ldb, K);
}

// Visible keys [lo, hi] of row t in the tile of keys s0 .. s0 + kBc - 1,
// relative to s0 and clamped to the tile (lo > hi: nothing visible).
struct RowRange {
  int32_t lo, hi;
};
EMBER_ATTN_INLINE RowRange row_range(const Geometry& g, int64_t t, int64_t s0) {
  return {static_cast<int32_t>(std::clamp<int64_t>(g.first_key(t) - s0, 0, kBc)),
          static_cast<int32_t>(
              std::clamp<int64_t>(std::min(g.last_key(t), g.S - 1) - s0, -1, kBc - 1))};
}

// Softcap of a strip of scores held in registers: x = c tanh(x / c).
template <class T, int NV>
EMBER_ATTN_INLINE void softcap_strip(typename Vec<T>::V (&acc)[kMR][NV], T* __restrict cap_grad,
                                     T c) {
  using X = Vec<T>;
  const T inv = T(1) / c;
  for (int i = 0; i < kMR; ++i)
    for (int v = 0; v < NV; ++v) {
      T x[X::W];
      X::store(x, acc[i][v]);
#pragma omp simd
      for (int j = 0; j < X::W; ++j) {
        const T th = fast::tanh(x[j] * inv);
        x[j] = c * th;
        if (cap_grad) cap_grad[i * kBc + v * X::W + j] = T(1) - th * th;
      }
      acc[i][v] = X::load(x);
    }
}

// Visibility masks of a strip's lanes: key v W + j is seen by row i when
// rr[i].lo <= v W + j <= rr[i].hi.
template <class T, int NV>
EMBER_ATTN_INLINE void strip_masks(typename Vec<T>::IV (&mask)[kMR][NV], const RowRange* rr) {
  using X = Vec<T>;
  using U = std::make_unsigned_t<typename X::I>;
  typedef U UV __attribute__((vector_size(64)));
  // lo <= j <= hi as one unsigned compare, j - lo <= hi - lo (GCC 12 turns
  // two vector compares joined by & into scalar code); empty: base past kBc.
  for (int i = 0; i < kMR; ++i) {
    const bool empty = rr[i].hi < rr[i].lo;
    const U base = static_cast<U>(empty ? kBc + 1 : rr[i].lo);
    const U width = static_cast<U>(empty ? 0 : rr[i].hi - rr[i].lo);
    for (int v = 0; v < NV; ++v)
      mask[i][v] = reinterpret_cast<UV>(X::lanes(v * X::W)) - base <= width;
  }
}

}  // namespace ember::kernels::attn
