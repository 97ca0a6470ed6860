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

#include "core/kernels/attention_tile.h"

namespace ember::kernels {
namespace {

using namespace attn;

template <class T>
struct BackwardScratch {
  std::vector<T> k, kt, vt, s, cap, dp, dq, dk, dv;
  explicit BackwardScratch(int64_t Dp)
      : k(kBc * Dp),
        kt(Dp * kBc),
        vt(Dp * kBc),
        s(kBr * kBc),
        cap(kBr * kBc),
        dp(kBr * kBc),
        dq(kBr * Dp),
        dk(kBc * Dp),
        dv(kBc * Dp) {}
};

// Scores -> P = exp(S - lse) in place (masked scores are -inf: P = 0).
template <class T>
EMBER_ATTN_INLINE void probabilities(T* __restrict s, const T* __restrict lse) {
  const T ninf = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < kBr; ++i) {
    T* x = s + i * kBc;
    const T L = lse[i];
#pragma omp simd
    for (int64_t j = 0; j < kBc; ++j) x[j] = blend(x[j] != ninf, fast::exp(x[j] - L), T(0));
  }
}

// dP -> dS = P * (dP - delta) (* cap) in place.
template <class T>
EMBER_ATTN_INLINE void score_grads(T* __restrict dp, const T* __restrict p, const T* __restrict cap,
                                   const T* __restrict delta) {
  for (int64_t i = 0; i < kBr; ++i) {
    const int64_t r = i * kBc;
    const T di = delta[i];
    if (cap) {
#pragma omp simd
      for (int64_t j = 0; j < kBc; ++j) dp[r + j] = p[r + j] * (dp[r + j] - di) * cap[r + j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < kBc; ++j) dp[r + j] = p[r + j] * (dp[r + j] - di);
    }
  }
}

template <class T>
struct BackwardArgs {
  HeadRows<const T> q, k, v, out, dout;
  const T* lse;
  HeadRows<T> dk, dv;
};

// Per (batch, query head): q times scale and dO [T_pad, Dp], lse and delta [T_pad].
template <class T>
struct QueryPanels {
  T *q, *dout, *lse, *delta;
  int64_t Tpad, Dp;
  int64_t head(int64_t b, int64_t h, int64_t Hq) const { return b * Hq + h; }
};

// Packs query tile (b, h, qt) into the panels (zeros on padding rows).
template <class T>
EMBER_TARGET_CLONES void pack_query_tile(const Geometry& g, const BackwardArgs<T>& a,
                                         const QueryPanels<T>& p, int64_t b, int64_t h,
                                         int64_t qt) {
  const int64_t t0 = qt * kBr, rows = std::min(kBr, g.T - t0), hd = p.head(b, h, g.Hq);
  T* q = p.q + (hd * p.Tpad + t0) * p.Dp;
  T* dout = p.dout + (hd * p.Tpad + t0) * p.Dp;
  pack_rows(q, kBr, a.q, b, t0, rows, h, g.D, g.Dp, static_cast<T>(g.scale));
  pack_rows(dout, kBr, a.dout, b, t0, rows, h, g.D, g.Dp, T(1));
  for (int64_t i = 0; i < kBr; ++i) {
    // In the order (and with the multiply-adds) of the tile GEMM that makes
    // dP: where softmax is exact (a row seeing one key: P = 1, O = v) dP - delta
    // is then exactly 0, as is its true gradient, instead of rounding noise.
    T d = 0;
    if (i < rows) {
      const T* o = a.out.row(b, t0 + i, h);
      const T* dor = dout + i * g.Dp;
      for (int64_t c = 0; c < g.D; ++c) d += dor[c] * o[c];
    }
    p.delta[hd * p.Tpad + t0 + i] = d;
    p.lse[hd * p.Tpad + t0 + i] = i < rows ? a.lse[(b * g.Hq + h) * g.T + t0 + i] : T(0);
  }
}

// Key tile kt of kv head (b, kvh): its dK, dV rows, and its terms of dQ.
template <class T>
EMBER_TARGET_CLONES void backward_key_tile(const Geometry& g, const BackwardArgs<T>& a,
                                           const QueryPanels<T>& qp, int64_t b, int64_t kvh,
                                           int64_t kt, T* dq, BackwardScratch<T>& w) {
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
      tile_gemm(kBr, kBc, Dp, q, Dp, 1, w.kt.data(), kBc, w.s.data(), kBc, false);
      if (cap) softcap_tile(w.s.data(), cap, static_cast<T>(g.softcap));
      if (!g.tile_unmasked(t0, s0)) mask_tile(w.s.data(), g, t0, s0);
      probabilities(w.s.data(), qp.lse + row0);
      // dV += P^T dO: A(m = key, k = row) = P[row][key].
      tile_gemm(kBc, Dp, kBr, w.s.data(), 1, kBc, dout, Dp, w.dv.data(), Dp, true);
      tile_gemm(kBr, kBc, Dp, dout, Dp, 1, w.vt.data(), kBc, w.dp.data(), kBc, false);
      score_grads(w.dp.data(), w.s.data(), cap, qp.delta + row0);
      tile_gemm(kBr, Dp, kBc, w.dp.data(), kBc, 1, w.k.data(), Dp, w.dq.data(), Dp, false);
      tile_gemm(kBc, Dp, kBr, w.dp.data(), 1, kBc, q, Dp, w.dk.data(), Dp, true);
      const T scale = static_cast<T>(g.scale);
      for (int64_t i = 0; i < rows; ++i) {
        T* dst = dq + (((b * g.T) + t0 + i) * g.Hq + h) * g.D;
        const T* src = w.dq.data() + i * Dp;
#pragma omp simd
        for (int64_t c = 0; c < g.D; ++c) dst[c] += scale * src[c];
      }
    }
  }
  for (int64_t j = 0; j < cols; ++j) {
    std::copy_n(w.dk.data() + j * Dp, g.D, a.dk.row(b, s0 + j, kvh));
    std::copy_n(w.dv.data() + j * Dp, g.D, a.dv.row(b, s0 + j, kvh));
  }
}

template <class T>
void backward(const BackwardArgs<T>& a, const Geometry& g, const QueryPanels<T>& qp, T* dq) {
  const int64_t nk = g.kv_tiles(), nq = g.q_tiles();
#pragma omp parallel if (g.parallel() && !omp_in_parallel())
  {
    BackwardScratch<T> w(g.Dp);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < g.B * g.Hq * nq; ++i)
      pack_query_tile<T>(g, a, qp, i / (g.Hq * nq), i / nq % g.Hq, i % nq);
#pragma omp for schedule(dynamic, 1)
    for (int64_t bg = 0; bg < g.B * g.Hkv; ++bg)
      for (int64_t kt = 0; kt < nk; ++kt)
        backward_key_tile<T>(g, a, qp, bg / g.Hkv, bg % g.Hkv, kt, dq, w);
  }
}

}  // namespace

AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& dout,
                                  const AttentionParams& p) {
  AttentionGrads r;
  r.dq = Tensor::zeros(q.shape(), q.dtype());
  r.dk = Tensor::empty(k.shape(), k.dtype());
  r.dv = Tensor::empty(v.shape(), v.dtype());
  dispatch_float(q.dtype(), "attention backward", [&](auto tag) {
    using T = decltype(tag);
    const Geometry g(q, k, p, attn::kNR<T>);
    const BackwardArgs<T> a{{q.data<T>(), q},       {k.data<T>(), k},       {v.data<T>(), v},
                            {out.data<T>(), out},   {dout.data<T>(), dout}, lse.data<T>(),
                            {r.dk.data<T>(), r.dk}, {r.dv.data<T>(), r.dv}};
    const int64_t rows = g.B * g.Hq * g.T_pad();
    Tensor panels = Tensor::empty({rows * (2 * g.Dp + 2)}, q.dtype());
    T* pp = panels.data<T>();
    const QueryPanels<T> qp{
        pp, pp + rows * g.Dp, pp + 2 * rows * g.Dp, pp + rows * (2 * g.Dp + 1), g.T_pad(), g.Dp};
    backward<T>(a, g, qp, r.dq.data<T>());
  });
  return r;
}

}  // namespace ember::kernels
