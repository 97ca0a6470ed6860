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

#include "core/kernels/attention.h"
#include "core/kernels/fast_math.h"
#include "core/simd.h"

#define EMBER_ATTN_INLINE inline __attribute__((always_inline))

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
  // Every (row, key) of tile (t0, s0) is visible and real: no mask needed.
  bool tile_unmasked(int64_t t0, int64_t s0) const {
    return s0 + kBc <= S && s0 + kBc - 1 <= last_key(t0) && first_key(t0 + kBr - 1) <= s0;
  }
  // Enough multiply-adds to be worth a parallel region.
  bool parallel() const { return B * Hq * T * S * D > 32768; }
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

// Sets the invisible scores of tile (t0, s0) (rows of score tile x [kBr, kBc])
// to -inf: key s0 + j is seen by row t0 + i when first_key <= s0 + j <= last_key
// and s0 + j < S.
template <class T>
EMBER_ATTN_INLINE void mask_tile(T* __restrict x, const Geometry& g, int64_t t0, int64_t s0) {
  const T ninf = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < kBr; ++i) {
    const int32_t lo = static_cast<int32_t>(std::clamp<int64_t>(g.first_key(t0 + i) - s0, -1, kBc));
    const int32_t hi = static_cast<int32_t>(
        std::clamp<int64_t>(std::min(g.last_key(t0 + i), g.S - 1) - s0, -1, kBc));
    T* r = x + i * kBc;
#pragma omp simd
    for (int32_t j = 0; j < static_cast<int32_t>(kBc); ++j)
      r[j] = blend(j >= lo && j <= hi, r[j], ninf);
  }
}

// C [M, N] (+)= A B, where A(m, k) = a[m * sam + k * sak] and B [K, N] is
// row-major with row stride ldb; M % kMR == 0, N % kNR<T> == 0. Each kMR x kNR
// block of C is held in 2 kMR vector registers while k runs: per k, two loads
// of B and kMR broadcasts of A feed 2 kMR multiply-adds.
template <class T>
EMBER_ATTN_INLINE void tile_gemm(int64_t M, int64_t N, int64_t K, const T* __restrict a,
                                 int64_t sam, int64_t sak, const T* __restrict b, int64_t ldb,
                                 T* __restrict c, int64_t ldc, bool accumulate) {
  typedef T V __attribute__((vector_size(64)));
  constexpr int64_t W = 64 / sizeof(T);
  for (int64_t m = 0; m < M; m += kMR) {
    for (int64_t n = 0; n < N; n += 2 * W) {
      V r[kMR][2];
      for (int i = 0; i < kMR; ++i) {
        if (accumulate) {
          std::memcpy(&r[i][0], c + (m + i) * ldc + n, sizeof(V));
          std::memcpy(&r[i][1], c + (m + i) * ldc + n + W, sizeof(V));
        } else {
          r[i][0] = V{};
          r[i][1] = V{};
        }
      }
      const T* am = a + m * sam;
      const T* bn = b + n;
      for (int64_t k = 0; k < K; ++k) {
        V b0, b1;
        std::memcpy(&b0, bn + k * ldb, sizeof(V));
        std::memcpy(&b1, bn + k * ldb + W, sizeof(V));
#pragma GCC unroll 8
        for (int i = 0; i < kMR; ++i) {
          const T ai = am[i * sam + k * sak];
          r[i][0] += ai * b0;
          r[i][1] += ai * b1;
        }
      }
      for (int i = 0; i < kMR; ++i) {
        std::memcpy(c + (m + i) * ldc + n, &r[i][0], sizeof(V));
        std::memcpy(c + (m + i) * ldc + n + W, &r[i][1], sizeof(V));
      }
    }
  }
}

// Scores of a tile in place, softcapped: x = c tanh(x / c); cap_grad (if not
// null) receives d x / d raw = 1 - tanh^2.
template <class T>
EMBER_ATTN_INLINE void softcap_tile(T* __restrict x, T* __restrict cap_grad, T c) {
  const T inv = T(1) / c;
  if (cap_grad) {
#pragma omp simd
    for (int64_t i = 0; i < kBr * kBc; ++i) {
      const T th = fast::tanh(x[i] * inv);
      x[i] = c * th;
      cap_grad[i] = T(1) - th * th;
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < kBr * kBc; ++i) x[i] = c * fast::tanh(x[i] * inv);
  }
}

}  // namespace ember::kernels::attn
