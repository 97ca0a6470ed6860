// Register blocks of the flash attention forward (attention_forward.cpp),
// transposed: the kBr rows of a query tile run along the vector lanes, so the
// row statistics m, l are vectors and need no horizontal reductions. A key
// tile is cut into segments (runs of kKeyGroup keys seen by the same row
// vectors); the passes below work on one segment of the key tile's scores
// S^T [kBc keys, kBr rows] at a time:
//   scores:  S^T = K Q^T (c tanh(S / c) with softcap; -inf where invisible),
//            m' = max(m', S^T over the keys);
//   probs:   P^T = exp(S^T - m') (0 where S^T = -inf),  lsum += P^T over the keys;
//   update:  O^T = alpha O^T + V^T P^T, with alpha = e^(m - m') folded into
//            the accumulator loads (then set to 1: every segment after the
//            first that covers a row vector adds on the rescaled O^T).
#pragma once
#include <array>

#include "core/kernels/attention/tile.h"

namespace ember::kernels::attn {

constexpr int64_t kKeyGroup = 16;

// Keys [k0, k1) of the key tile (relative to its first key) and row vectors
// [v0, v0 + nv) of the query tile that hold every row seeing one of them;
// masked: some (row, key) pair of the block is invisible (or a key past S).
struct Segment {
  int32_t k0, k1, v0, nv;
  bool masked;
};

// Register block of NV row vectors: x NV accumulators with x * NV <= 16.
constexpr int block_for(int nv) {
  return nv >= 5 ? 2 : nv >= 3 ? 4 : nv == 2 ? 8 : 16;
}

// Segments of key tile s0 for the query tile of rows t0 .. t0 + rows - 1 (its
// real rows), in key order; groups of keys no real row sees are left out.
// Returns their count (at most kBc / kKeyGroup).
template <class T>
inline int key_segments(const Geometry& g, int64_t t0, int64_t rows, int64_t s0, Segment* out) {
  constexpr int64_t W = Vec<T>::W;
  int n = 0;
  for (int64_t k0 = 0; k0 < kBc; k0 += kKeyGroup) {
    const int64_t first = s0 + k0, last = std::min(s0 + k0 + kKeyGroup, g.S) - 1;
    if (first > last) break;
    // The rows seeing key s form [first_row(s), last_row(s)], both increasing
    // with s by one a key: a group's rows are one interval.
    const int64_t lo = std::max<int64_t>(g.first_row(first) - t0, 0);
    const int64_t hi = std::min(g.last_row(last) - t0, rows - 1);
    if (lo > hi) continue;
    const int64_t v0 = lo / W, v1 = hi / W;
    const bool masked = last < s0 + k0 + kKeyGroup - 1 || g.first_row(last) - t0 > v0 * W ||
                        g.last_row(first) - t0 < v1 * W + W - 1;
    const Segment s{static_cast<int32_t>(k0), static_cast<int32_t>(k0 + kKeyGroup),
                    static_cast<int32_t>(v0), static_cast<int32_t>(v1 - v0 + 1), masked};
    Segment* prev = n > 0 ? out + n - 1 : nullptr;
    if (prev && prev->v0 == s.v0 && prev->nv == s.nv && prev->masked == s.masked &&
        prev->k1 == s.k0)
      prev->k1 = s.k1;
    else
      out[n++] = s;
  }
  return n;
}

// One query tile (its transposed scratch) against one key tile.
template <class T>
struct TileArgs {
  const Geometry* g;
  int64_t t0, s0, Dd;               // Dd: D rounded up to 16 (rows of O^T computed)
  const T *qt, *k, *v;              // Q^T [Dp, kBr]; K, V rows of the key tile [kBc, Dp]
  T *s, *ot;                        // S^T / P^T [kBc, kBr]; O^T [Dp, kBr]
  T *m_new, *m_use, *alpha, *lsum;  // [kBr] each
};

// c tanh(x / c), inv = 1 / c.
template <class T>
EMBER_ATTN_INLINE typename Vec<T>::V softcap_vector(typename Vec<T>::V x, T c, T inv) {
  using X = Vec<T>;
  T y[X::W];
  X::store(y, x);
#pragma omp simd
  for (int j = 0; j < X::W; ++j) y[j] = c * fast::tanh(y[j] * inv);
  return X::load(y);
}

// Scores pass: blocks of KB keys x NV row vectors, per d KB broadcasts of
// K[key][d], NV loads of Q^T[d] and KB NV multiply-adds.
template <class T, int NV>
EMBER_ATTN_INLINE void segment_scores(const TileArgs<T>& a, const Segment& sg) {
  using X = Vec<T>;
  using V = typename X::V;
  constexpr int KB = block_for(NV), W = X::W;
  const Geometry& g = *a.g;
  const int64_t D = g.D, Dp = g.Dp;
  const T ninf = -std::numeric_limits<T>::infinity();
  const T* __restrict q = a.qt + sg.v0 * W;
  T* __restrict s = a.s + sg.v0 * W;
  using U = std::make_unsigned_t<typename X::I>;
  typedef U UV __attribute__((vector_size(64)));
  V mx[NV];
  UV row[NV];
  for (int v = 0; v < NV; ++v) {
    mx[v] = X::load(a.m_new + (sg.v0 + v) * W);
    row[v] = reinterpret_cast<UV>(X::lanes(0)) + static_cast<U>((sg.v0 + v) * W);
  }
  for (int k = sg.k0; k < sg.k1; k += KB) {
    V acc[KB][NV];
    for (int j = 0; j < KB; ++j)
      for (int v = 0; v < NV; ++v) acc[j][v] = V{};
    const T* __restrict kr = a.k + k * Dp;
    block_accumulate<T, KB, NV>(acc, 0, D, kr, Dp, 1, q, kBr);
    if (g.softcap > 0) {
      const T c = static_cast<T>(g.softcap), inv = T(1) / c;
      for (int j = 0; j < KB; ++j)
        for (int v = 0; v < NV; ++v) acc[j][v] = softcap_vector<T>(acc[j][v], c, inv);
    }
    if (sg.masked) {
      // Row r of the tile sees key s when r - lo (unsigned) <= hi - lo: one
      // compare (GCC 12 turns two chained vector compares into scalar code).
      for (int j = 0; j < KB; ++j) {
        const int64_t key = a.s0 + k + j;
        int64_t lo = std::clamp<int64_t>(g.first_row(key) - a.t0, -1, kBr);
        const int64_t hi = std::clamp<int64_t>(g.last_row(key) - a.t0, -1, kBr);
        if (key >= g.S || hi < lo) lo = kBr + 1;
        const U base = static_cast<U>(lo), width = static_cast<U>(std::max<int64_t>(hi - lo, 0));
        for (int v = 0; v < NV; ++v) acc[j][v] = row[v] - base > width ? X::splat(ninf) : acc[j][v];
      }
    }
    for (int j = 0; j < KB; ++j)
      for (int v = 0; v < NV; ++v) {
        mx[v] = X::vmax(mx[v], acc[j][v]);
        X::store(s + (k + j) * kBr + v * W, acc[j][v]);
      }
  }
  for (int v = 0; v < NV; ++v) X::store(a.m_new + (sg.v0 + v) * W, mx[v]);
}

// Probabilities pass, in place of the scores.
template <class T, int NV>
EMBER_ATTN_INLINE void segment_probs(const TileArgs<T>& a, const Segment& sg) {
  using X = Vec<T>;
  using V = typename X::V;
  constexpr int W = X::W;
  const T ninf = -std::numeric_limits<T>::infinity();
  T* __restrict s = a.s + sg.v0 * W;
  V mu[NV], sum[NV];
  for (int v = 0; v < NV; ++v) {
    mu[v] = X::load(a.m_use + (sg.v0 + v) * W);
    sum[v] = V{};
  }
  for (int k = sg.k0; k < sg.k1; ++k)
    for (int v = 0; v < NV; ++v) {
      const V x = X::load(s + k * kBr + v * W);
      V p = X::exp(x - mu[v]);
      if (sg.masked) p = x == ninf ? V{} : p;
      sum[v] += p;
      X::store(s + k * kBr + v * W, p);
    }
  for (int v = 0; v < NV; ++v) {
    T* l = a.lsum + (sg.v0 + v) * W;
    X::store(l, X::load(l) + sum[v]);
  }
}

// Update pass: blocks of DB rows of O^T x NV row vectors, per key DB
// broadcasts of V[key][d], NV loads of P^T[key] and DB NV multiply-adds.
template <class T, int NV>
EMBER_ATTN_INLINE void segment_update(const TileArgs<T>& a, const Segment& sg) {
  using X = Vec<T>;
  using V = typename X::V;
  constexpr int DB = block_for(NV), W = X::W;
  const int64_t Dp = a.g->Dp;
  const T* __restrict p = a.s + sg.v0 * W;
  T* __restrict o = a.ot + sg.v0 * W;
  V al[NV];
  for (int v = 0; v < NV; ++v) al[v] = X::load(a.alpha + (sg.v0 + v) * W);
  for (int64_t d0 = 0; d0 < a.Dd; d0 += DB) {
    V acc[DB][NV];
    for (int j = 0; j < DB; ++j)
      for (int v = 0; v < NV; ++v) acc[j][v] = X::load(o + (d0 + j) * kBr + v * W) * al[v];
    const T* __restrict vr = a.v + d0;
    block_accumulate<T, DB, NV>(acc, sg.k0, sg.k1, vr, 1, Dp, p, kBr);
    for (int j = 0; j < DB; ++j)
      for (int v = 0; v < NV; ++v) X::store(o + (d0 + j) * kBr + v * W, acc[j][v]);
  }
  for (int v = 0; v < NV; ++v) X::store(a.alpha + (sg.v0 + v) * W, X::splat(T(1)));
}

// Transposes a W x W block held in W vectors (r[i][j] becomes r[j][i]) by
// log2 W rounds (H = W / 2, .., 1), each swapping the off-diagonal H x H
// blocks of every 2H x 2H block with two-source lane shuffles.
template <class T, int H>
EMBER_ATTN_INLINE void transpose_round(typename Vec<T>::V (&r)[Vec<T>::W]) {
  using X = Vec<T>;
  constexpr int W = X::W;
  using I = typename X::I;
  static constexpr auto masks = [] {
    std::array<std::array<I, W>, 2> m{};
    for (int j = 0; j < W; ++j) {
      m[0][j] = static_cast<I>(j & H ? W + j - H : j);
      m[1][j] = static_cast<I>(j & H ? W + j : j + H);
    }
    return m;
  }();
  typename X::IV lo, hi;
  std::memcpy(&lo, masks[0].data(), sizeof lo);
  std::memcpy(&hi, masks[1].data(), sizeof hi);
#pragma GCC unroll 16
  for (int i = 0; i < W; ++i) {
    if (i & H) continue;
    const typename X::V a = r[i], b = r[i + H];
    r[i] = __builtin_shuffle(a, b, lo);
    r[i + H] = __builtin_shuffle(a, b, hi);
  }
  if constexpr (H > 1) transpose_round<T, H / 2>(r);
}

template <class T>
EMBER_ATTN_INLINE void transpose_block(typename Vec<T>::V (&r)[Vec<T>::W]) {
  using X = Vec<T>;
  constexpr int W = X::W;
  transpose_round<T, W / 2>(r);
}

enum class Pass { kScores, kProbs, kUpdate };

// Pass P of segment sg with NV = sg.nv (1 .. kBr / W) as a compile-time constant.
template <class T, Pass P, int N = static_cast<int>(kBr) / Vec<T>::W>
EMBER_ATTN_INLINE void run_segment(const TileArgs<T>& a, const Segment& sg) {
  if constexpr (N > 1) {
    if (sg.nv < N) return run_segment<T, P, N - 1>(a, sg);
  }
  if constexpr (P == Pass::kScores) {
    segment_scores<T, N>(a, sg);
  } else if constexpr (P == Pass::kProbs) {
    segment_probs<T, N>(a, sg);
  } else {
    segment_update<T, N>(a, sg);
  }
}

}  // namespace ember::kernels::attn
