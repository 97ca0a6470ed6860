// Flash attention backward (FlashAttention-2): one task per (batch, kv head)
// owns dK and dV of that head and dQ of the query heads sharing it, so nothing
// is shared between threads and every sum runs in a fixed order (the result
// does not depend on the thread count). Per key tile of kBc keys, for every
// query tile of those heads that sees one of its keys:
//   S = (scale Q) K^T,  (c tanh(S / c) with softcap),  P = exp(S - lse) masked,
//   dV += P^T dO,  dP = dO V^T,  dS = P * (dP - delta) (* (1 - tanh^2)),
//   dQ += scale dS K,  dK += dS^T (scale Q)
// with delta_t = dO_t . O_t. scale Q, dO, lse and delta are packed once per
// query head into padded panels (linear in T) that every key tile reads in
// place; K, K^T and V^T are packed per key tile.
#include <omp.h>

#include <cmath>
#include <vector>

#include "core/kernels/attention/tile.h"

namespace ember::kernels {
namespace {

using namespace attn;

template <class T>
struct BackwardScratch {
  std::vector<T> k, kt, vt, s, cap, dp, dk, dv;
  explicit BackwardScratch(int64_t Dp)
      : k(kBc * Dp),
        kt(Dp * kBc),
        vt(Dp * kBc),
        s(kBr * kBc),
        cap(kBr * kBc),
        dp(kBr * kBc),
        dk(kBc * Dp),
        dv(kBc * Dp) {}
};

// One strip of kMR query rows (q, dout, lse, delta at its first row) against
// the first NV W keys of the key tile (kt, vt [Dp, kBc]), fused in registers:
//   S = q K^T (softcapped, masked),  P = exp(S - lse),  dP = dO V^T,
//   dS = P * (dP - delta) (* (1 - tanh^2) with softcap)
// into the strip's rows of P and dS [kMR, kBc] (zero past the NV W keys, so
// that the tile GEMMs reading them see exact zeros there).
template <class T, int NV>
EMBER_ATTN_INLINE void backward_strip(const Geometry& g, const T* __restrict q,
                                      const T* __restrict dout, const T* __restrict lse,
                                      const T* __restrict delta, const T* __restrict kt,
                                      const T* __restrict vt, T* __restrict p, T* __restrict ds,
                                      T* __restrict cap, const RowRange* rr, bool masked) {
  using X = Vec<T>;
  using V = typename X::V;
  V acc[kMR][NV];
  strip_scores<T, NV>(acc, q, g.Dp, kt, g.Dp);
  if (cap) softcap_strip<T, NV>(acc, cap, static_cast<T>(g.softcap));
  typename X::IV mask[kMR][NV];
  if (masked) strip_masks<T, NV>(mask, rr);
  for (int i = 0; i < kMR; ++i) {
    for (int v = 0; v < NV; ++v) {
      V pv = X::exp(acc[i][v] - lse[i]);
      if (masked) pv = mask[i][v] ? pv : V{};
      X::store(p + i * kBc + v * X::W, pv);
    }
    for (int v = NV; v < X::NV; ++v) {
      X::store(p + i * kBc + v * X::W, V{});
      X::store(ds + i * kBc + v * X::W, V{});
    }
  }
  strip_scores<T, NV>(acc, dout, g.Dp, vt, g.Dp);
  for (int i = 0; i < kMR; ++i)
    for (int v = 0; v < NV; ++v) {
      V d = X::load(p + i * kBc + v * X::W) * (acc[i][v] - delta[i]);
      if (cap) d *= X::load(cap + i * kBc + v * X::W);
      X::store(ds + i * kBc + v * X::W, d);
    }
}

// backward_strip with NV = nv (1 .. vectors per tile row) chosen at run time.
template <class T, int N = Vec<T>::NV>
EMBER_ATTN_INLINE void backward_strip_n(int nv, const Geometry& g, const T* q, const T* dout,
                                        const T* lse, const T* delta, const T* kt, const T* vt,
                                        T* p, T* ds, T* cap, const RowRange* rr, bool masked) {
  if constexpr (N > 1) {
    if (nv < N)
      return backward_strip_n<T, N - 1>(nv, g, q, dout, lse, delta, kt, vt, p, ds, cap, rr, masked);
  }
  backward_strip<T, N>(g, q, dout, lse, delta, kt, vt, p, ds, cap, rr, masked);
}

template <class T>
struct BackwardArgs {
  HeadRows<const T> q, k, v, out, dout;
  const T* lse;
  HeadRows<T> dk, dv;
};

// Per (batch, query head): q times scale, dO and the dQ / scale accumulator
// [T_pad, Dp], lse and delta [T_pad].
template <class T>
struct QueryPanels {
  T *q, *dout, *dq, *lse, *delta;
  int64_t Tpad, Dp;
  int64_t head(int64_t b, int64_t h, int64_t Hq) const { return b * Hq + h; }
};

// Packs the rows of query tile qt of batch b, every head, into the panels
// (zeros on padding rows, dQ zeroed). Row by row across the heads, so that
// q, dO and O ([B, T, Hq, D]) are read in memory order.
template <class T>
EMBER_TARGET_CLONES void pack_query_rows(const Geometry& g, const BackwardArgs<T>& a,
                                         const QueryPanels<T>& p, int64_t b, int64_t qt) {
  const int64_t t0 = qt * kBr, rows = std::min(kBr, g.T - t0), Dp = g.Dp;
  const T scale = static_cast<T>(g.scale);
  for (int64_t i = 0; i < kBr; ++i)
    for (int64_t h = 0; h < g.Hq; ++h) {
      const int64_t r = p.head(b, h, g.Hq) * p.Tpad + t0 + i;
      T *q = p.q + r * Dp, *dout = p.dout + r * Dp;
      std::fill(p.dq + r * Dp, p.dq + (r + 1) * Dp, T(0));
      if (i >= rows) {
        std::fill(q, q + Dp, T(0));
        std::fill(dout, dout + Dp, T(0));
        p.delta[r] = 0;
        p.lse[r] = 0;
        continue;
      }
      const T *qs = a.q.row(b, t0 + i, h), *ds = a.dout.row(b, t0 + i, h);
#pragma omp simd
      for (int64_t c = 0; c < g.D; ++c) {
        q[c] = scale * qs[c];
        dout[c] = ds[c];
      }
      std::fill(q + g.D, q + Dp, T(0));
      std::fill(dout + g.D, dout + Dp, T(0));
      // In the order (and with the multiply-adds) of the tile GEMM that makes
      // dP: where softmax is exact (a row seeing one key: P = 1, O = v) dP - delta
      // is then exactly 0, as is its true gradient, instead of rounding noise.
      const T* o = a.out.row(b, t0 + i, h);
      T d = 0;
      for (int64_t c = 0; c < g.D; ++c) d += dout[c] * o[c];
      p.delta[r] = d;
      p.lse[r] = a.lse[(b * g.Hq + h) * g.T + t0 + i];
    }
}

// Key tile kt of kv head (b, kvh): its dK, dV rows, and its terms of dQ.
template <class T>
EMBER_TARGET_CLONES void backward_key_tile(const Geometry& g, const BackwardArgs<T>& a,
                                           const QueryPanels<T>& qp, int64_t b, int64_t kvh,
                                           int64_t kt, BackwardScratch<T>& w) {
  const int64_t Dp = g.Dp, s0 = kt * kBc, cols = std::min(kBc, g.S - s0);
  pack_rows(w.k.data(), kBc, a.k, b, s0, cols, kvh, g.D, Dp, T(1));
  pack_columns(w.kt.data(), kBc, a.k, b, s0, cols, kvh, g.D, Dp);
  pack_columns(w.vt.data(), kBc, a.v, b, s0, cols, kvh, g.D, Dp);
  std::fill(w.dk.begin(), w.dk.end(), T(0));
  std::fill(w.dv.begin(), w.dv.end(), T(0));
  // Query rows that see a key of [s0, s0 + cols): pos(t) >= s0 and first_key(t) <= last key.
  const int64_t t_lo = std::max<int64_t>(0, s0 - (g.S - g.T));
  int64_t t_hi = g.T - 1;
  if (g.window > 0) t_hi = std::min(t_hi, s0 + cols - 1 + g.window - 1 - (g.S - g.T));
  T* cap = g.softcap > 0 ? w.cap.data() : nullptr;
  for (int64_t h = kvh * g.group(); h < (kvh + 1) * g.group(); ++h) {
    for (int64_t qt = t_lo / kBr; qt <= t_hi / kBr && t_lo <= t_hi; ++qt) {
      const int64_t t0 = qt * kBr, rows = std::min(kBr, g.T - t0);
      const int64_t row0 = qp.head(b, h, g.Hq) * qp.Tpad + t0;
      const T* q = qp.q + row0 * Dp;
      const T* dout = qp.dout + row0 * Dp;
      const bool masked = !g.tile_unmasked(t0, s0);
      RowRange rr[kBr];
      int nvs[kBr / kMR];
      if (masked)
        for (int64_t i = 0; i < rows; ++i) rr[i] = row_range(g, t0 + i, s0);
      // Strips past the real rows, or (masked tiles) seeing no key of the tile,
      // are zero; the others stop at the last key vector one of their rows sees.
      for (int64_t r0 = 0; r0 < kBr; r0 += kMR) {
        int nv = r0 < rows ? Vec<T>::NV : 0;
        if (masked && nv > 0) {
          int32_t hi = -1;
          for (int64_t i = r0; i < std::min(r0 + kMR, rows); ++i)
            if (rr[i].lo <= rr[i].hi) hi = std::max(hi, rr[i].hi);
          nv = hi < 0 ? 0 : hi / Vec<T>::W + 1;
        }
        nvs[r0 / kMR] = nv;
        if (nv == 0) {
          std::fill_n(w.s.data() + r0 * kBc, kMR * kBc, T(0));
          std::fill_n(w.dp.data() + r0 * kBc, kMR * kBc, T(0));
          continue;
        }
        backward_strip_n<T>(nv, g, q + r0 * Dp, dout + r0 * Dp, qp.lse + row0 + r0,
                            qp.delta + row0 + r0, w.kt.data(), w.vt.data(),
                            w.s.data() + r0 * kBc, w.dp.data() + r0 * kBc,
                            cap ? cap + r0 * kBc : nullptr, rr + r0, masked);
      }
      // Rows [k_lo, k_hi) of P and dS can be non-zero in the columns of key
      // block j (keys kMR j ..): the dV and dK products sum over those alone.
      int32_t k_lo[kBc / kMR], k_hi[kBc / kMR];
      for (int64_t j = 0; j < kBc / kMR; ++j) {
        k_lo[j] = 0;
        k_hi[j] = static_cast<int32_t>(rows);
        if (!masked) continue;
        k_lo[j] = static_cast<int32_t>(kBr);
        k_hi[j] = 0;
        for (int64_t i = 0; i < rows; ++i)
          if (rr[i].lo <= j * kMR + kMR - 1 && rr[i].hi >= j * kMR) {
            k_lo[j] = std::min(k_lo[j], static_cast<int32_t>(i));
            k_hi[j] = static_cast<int32_t>(i + 1);
          }
      }
      // dV += P^T dO, dK += dS^T (scale Q): A(m = key, k = row).
      tile_gemm_ranged(kBc, Dp, w.s.data(), 1, kBc, dout, Dp, w.dv.data(), Dp, k_lo, k_hi);
      tile_gemm_ranged(kBc, Dp, w.dp.data(), 1, kBc, q, Dp, w.dk.data(), Dp, k_lo, k_hi);
      // dQ / scale rows of the strip += dS K over the keys the strip sees.
      static constexpr T kOnes[kMR] = {1, 1, 1, 1};
      for (int64_t r0 = 0; r0 < rows; r0 += kMR)
        if (nvs[r0 / kMR] > 0)
          strip_update(qp.dq + (row0 + r0) * Dp, Dp, kOnes, w.dp.data() + r0 * kBc, kBc,
                       w.k.data(), Dp, nvs[r0 / kMR] * Vec<T>::W, Dp);
    }
  }
  for (int64_t j = 0; j < cols; ++j) {
    std::copy_n(w.dk.data() + j * Dp, g.D, a.dk.row(b, s0 + j, kvh));
    std::copy_n(w.dv.data() + j * Dp, g.D, a.dv.row(b, s0 + j, kvh));
  }
}

// dQ of the query heads of kv head (b, kvh), once all its key tiles are done:
// scale times the accumulated panel rows.
template <class T>
EMBER_TARGET_CLONES void write_dq(const Geometry& g, const QueryPanels<T>& qp, int64_t b,
                                  int64_t kvh, T* dq) {
  const T scale = static_cast<T>(g.scale);
  for (int64_t t = 0; t < g.T; ++t)
    for (int64_t h = kvh * g.group(); h < (kvh + 1) * g.group(); ++h) {
      const T* src = qp.dq + (qp.head(b, h, g.Hq) * qp.Tpad + t) * qp.Dp;
      T* dst = dq + ((b * g.T + t) * g.Hq + h) * g.D;
#pragma omp simd
      for (int64_t c = 0; c < g.D; ++c) dst[c] = scale * src[c];
    }
}

template <class T>
void backward(const BackwardArgs<T>& a, const Geometry& g, const QueryPanels<T>& qp, T* dq) {
  const int64_t nk = g.kv_tiles(), nq = g.q_tiles();
#pragma omp parallel if (g.parallel() && !omp_in_parallel())
  {
    BackwardScratch<T> w(g.Dp);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < g.B * nq; ++i) pack_query_rows<T>(g, a, qp, i / nq, i % nq);
#pragma omp for schedule(dynamic, 1)
    for (int64_t bg = 0; bg < g.B * g.Hkv; ++bg) {
      for (int64_t kt = 0; kt < nk; ++kt)
        backward_key_tile<T>(g, a, qp, bg / g.Hkv, bg % g.Hkv, kt, w);
      write_dq<T>(g, qp, bg / g.Hkv, bg % g.Hkv, dq);
    }
  }
}

}  // namespace

AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& dout,
                                  const AttentionParams& p) {
  AttentionGrads r;
  r.dq = Tensor::empty(q.shape(), q.dtype());
  r.dk = Tensor::empty(k.shape(), k.dtype());
  r.dv = Tensor::empty(v.shape(), v.dtype());
  dispatch_float(q.dtype(), "attention backward", [&](auto tag) {
    using T = decltype(tag);
    const Geometry g(q, k, p, attn::kNR<T>);
    const BackwardArgs<T> a{{q.data<T>(), q},       {k.data<T>(), k},       {v.data<T>(), v},
                            {out.data<T>(), out},   {dout.data<T>(), dout}, lse.data<T>(),
                            {r.dk.data<T>(), r.dk}, {r.dv.data<T>(), r.dv}};
    const int64_t rows = g.B * g.Hq * g.T_pad();
    Tensor panels = Tensor::empty({rows * (3 * g.Dp + 2)}, q.dtype());
    T* pp = panels.data<T>();
    const QueryPanels<T> qp{pp,
                            pp + rows * g.Dp,
                            pp + 2 * rows * g.Dp,
                            pp + 3 * rows * g.Dp,
                            pp + rows * (3 * g.Dp + 1),
                            g.T_pad(),
                            g.Dp};
    backward<T>(a, g, qp, r.dq.data<T>());
  });
  return r;
}

}  // namespace ember::kernels
