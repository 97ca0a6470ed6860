// Flash attention forward (FlashAttention-2): one task per (batch, query head,
// query tile of kBr rows). Per visible key tile of kBc keys:
//   S = (scale Q) K^T,  S = c tanh(S / c) with softcap,  mask,
//   m' = max(m, rowmax S),  P = exp(S - m'),  l = e^(m - m') l + rowsum P,
//   O = e^(m - m') O + P V,  m = m'
// and at the end out = O / l, lse = m + log l. Key tiles wholly outside the
// causal / sliding window are never visited; only tiles crossing its edges are
// masked. K^T and V are packed once per kv head into padded panels (linear in
// S) that the query tiles of every head sharing it read in place.
#include <omp.h>

#include <cmath>
#include <vector>

#include "core/kernels/attention_tile.h"

namespace ember::kernels {
namespace {

using namespace attn;

template <class T>
struct ForwardScratch {
  std::vector<T> p, o, m, l;
  explicit ForwardScratch(int64_t Dp) : p(kMR * kBc), o(kBr * Dp), m(kBr), l(kBr) {}
};

// One strip of kMR query rows (q, o, m, l at its first row) against the first
// NV W keys of key tile (kt [Dp, kBc], v [kBc, Dp]), fused in registers:
//   S = q K^T (softcapped, masked),  m' = max(m, rowmax S),  P = exp(S - m'),
//   l = e^(m - m') l + rowsum P,  o = e^(m - m') o + P V.
// Only P goes through memory (pbuf [kMR, kBc]), as the A operand of P V.
template <class T, int NV>
EMBER_ATTN_INLINE void forward_strip(const Geometry& g, const T* __restrict q,
                                     const T* __restrict kt, const T* __restrict vp,
                                     T* __restrict o, T* __restrict m, T* __restrict l,
                                     T* __restrict pbuf, const RowRange* rr, bool masked) {
  using X = Vec<T>;
  using V = typename X::V;
  const T ninf = -std::numeric_limits<T>::infinity();
  V acc[kMR][NV];
  strip_scores<T, NV>(acc, q, g.Dp, kt, g.Dp);
  if (g.softcap > 0) softcap_strip<T, NV>(acc, nullptr, static_cast<T>(g.softcap));
  typename X::IV mask[kMR][NV];
  if (masked) {
    strip_masks<T, NV>(mask, rr);
    for (int i = 0; i < kMR; ++i)
      for (int v = 0; v < NV; ++v) acc[i][v] = mask[i][v] ? acc[i][v] : X::splat(ninf);
  }
  T alpha[kMR];
  for (int i = 0; i < kMR; ++i) {
    V mv = acc[i][0];
    for (int v = 1; v < NV; ++v) mv = X::vmax(mv, acc[i][v]);
    const T m_new = std::max(m[i], X::hmax(mv));
    // A row with nothing visible yet keeps m = -inf (its P is masked to 0).
    const T m_use = m_new == ninf ? T(0) : m_new;
    // (An unchanged max, the common case past the first tiles, needs no exp:
    // exp(0) = 1 exactly.)
    alpha[i] = m[i] == ninf ? T(0) : m_new == m[i] ? T(1) : fast::exp(m[i] - m_use);
    V sum{};
    for (int v = 0; v < NV; ++v) {
      V p = X::exp(acc[i][v] - m_use);
      if (masked) p = mask[i][v] ? p : V{};
      sum += p;
      X::store(pbuf + i * kBc + v * X::W, p);
    }
    l[i] = alpha[i] * l[i] + X::hsum(sum);
    m[i] = m_new;
  }
  strip_update(o, g.Dp, alpha, pbuf, kBc, vp, g.Dp, NV * X::W, g.Dp);
}

// forward_strip with NV = nv (1 .. vectors per tile row) chosen at run time.
template <class T, int N = Vec<T>::NV>
EMBER_ATTN_INLINE void forward_strip_n(int nv, const Geometry& g, const T* q, const T* kt,
                                       const T* vp, T* o, T* m, T* l, T* pbuf, const RowRange* rr,
                                       bool masked) {
  if constexpr (N > 1) {
    if (nv < N) return forward_strip_n<T, N - 1>(nv, g, q, kt, vp, o, m, l, pbuf, rr, masked);
  }
  forward_strip<T, N>(g, q, kt, vp, o, m, l, pbuf, rr, masked);
}

// Packed keys and values of every (batch, kv head): per key tile a [Dp, kBc]
// block of K^T (blocks, not one [Dp, S_pad] panel: rows a power-of-two apart
// would fall into the same L1 sets) and V rows [S_pad, Dp].
template <class T>
struct KVPanels {
  T *kt, *v;
  int64_t Spad, Dp;
  T* kt_of(int64_t b, int64_t kvh, int64_t Hkv) const { return kt + (b * Hkv + kvh) * Dp * Spad; }
  T* v_of(int64_t b, int64_t kvh, int64_t Hkv) const { return v + (b * Hkv + kvh) * Spad * Dp; }
};

template <class T>
EMBER_TARGET_CLONES void pack_key_tile(const Geometry& g, const HeadRows<const T>& k,
                                       const HeadRows<const T>& v, const KVPanels<T>& p, int64_t b,
                                       int64_t kvh, int64_t kt) {
  const int64_t s0 = kt * kBc, cols = std::min(kBc, g.S - s0);
  T* ktp = p.kt_of(b, kvh, g.Hkv) + s0 * g.Dp;
  T* vp = p.v_of(b, kvh, g.Hkv) + s0 * g.Dp;
  pack_columns(ktp, kBc, k, b, s0, cols, kvh, g.D, g.Dp);
  pack_rows(vp, kBc, v, b, s0, cols, kvh, g.D, g.Dp, T(1));
}

// Packs scale q of the rows of query tile qt of batch b, every head, into the
// panel [B, Hq, T_pad, Dp] (zeros on padding rows and columns). Row by row
// across the heads, so that q ([B, T, Hq, D]) is read in memory order.
template <class T>
EMBER_TARGET_CLONES void pack_query_rows(const Geometry& g, const HeadRows<const T>& q, T* panel,
                                         int64_t b, int64_t qt) {
  const int64_t t0 = qt * kBr, rows = std::min(kBr, g.T - t0), Dp = g.Dp;
  const T scale = static_cast<T>(g.scale);
  for (int64_t i = 0; i < kBr; ++i)
    for (int64_t h = 0; h < g.Hq; ++h) {
      T* d = panel + ((b * g.Hq + h) * g.T_pad() + t0 + i) * Dp;
      if (i >= rows) {
        std::fill(d, d + Dp, T(0));
        continue;
      }
      const T* src = q.row(b, t0 + i, h);
#pragma omp simd
      for (int64_t c = 0; c < g.D; ++c) d[c] = scale * src[c];
      std::fill(d + g.D, d + Dp, T(0));
    }
}

template <class T>
EMBER_TARGET_CLONES void forward_query_tile(const Geometry& g, T* q_panel,
                                            const KVPanels<T>& kv, T* lse,
                                            int64_t b, int64_t h, int64_t qt,
                                            ForwardScratch<T>& w) {
  const int64_t kvh = h / g.group(), Dp = g.Dp, t0 = qt * kBr;
  const T* ktp = kv.kt_of(b, kvh, g.Hkv);
  const T* vp = kv.v_of(b, kvh, g.Hkv);
  const int64_t rows = std::min(kBr, g.T - t0);
  const T* qtile = q_panel + ((b * g.Hq + h) * g.T_pad() + t0) * Dp;
  std::fill(w.o.begin(), w.o.end(), T(0));
  std::fill(w.m.begin(), w.m.end(), -std::numeric_limits<T>::infinity());
  std::fill(w.l.begin(), w.l.end(), T(0));
  const int64_t kt_first = g.first_key(t0) / kBc;
  const int64_t kt_last = std::min(g.last_key(t0 + rows - 1), g.S - 1) / kBc;
  for (int64_t kt = kt_first; kt <= kt_last; ++kt) {
    const int64_t s0 = kt * kBc;
    const bool masked = !g.tile_unmasked(t0, s0);
    // Strips past the real rows are skipped; on masked tiles, so are strips
    // that see no key of the tile, and the key vectors past the last one any
    // row of the strip sees (the masked half of diagonal tiles).
    for (int64_t r0 = 0; r0 < rows; r0 += kMR) {
      RowRange rr[kMR];
      int nv = Vec<T>::NV;
      if (masked) {
        int32_t hi = -1;
        for (int i = 0; i < kMR; ++i) {
          rr[i] = row_range(g, t0 + r0 + i, s0);
          if (rr[i].lo <= rr[i].hi) hi = std::max(hi, rr[i].hi);
        }
        if (hi < 0) continue;
        nv = hi / Vec<T>::W + 1;
      }
      forward_strip_n<T>(nv, g, qtile + r0 * Dp, ktp + s0 * Dp, vp + s0 * Dp,
                         w.o.data() + r0 * Dp, w.m.data() + r0, w.l.data() + r0, w.p.data(), rr,
                         masked);
    }
  }
  // Normalised rows into the panel (in place of q, which this task alone
  // reads); unpack_output writes them to out in memory order.
  T* opanel = q_panel + ((b * g.Hq + h) * g.T_pad() + t0) * Dp;
  for (int64_t i = 0; i < rows; ++i) {
    const T inv = T(1) / w.l[i];
    const T* orow = w.o.data() + i * Dp;
#pragma omp simd
    for (int64_t d = 0; d < Dp; ++d) opanel[i * Dp + d] = orow[d] * inv;
    lse[(b * g.Hq + h) * g.T + t0 + i] = w.m[i] + std::log(w.l[i]);
  }
}

// out rows of query tile qt of batch b, every head, from the panel.
template <class T>
EMBER_TARGET_CLONES void unpack_output(const Geometry& g, const T* panel, const HeadRows<T>& out,
                                       int64_t b, int64_t qt) {
  const int64_t t0 = qt * kBr, rows = std::min(kBr, g.T - t0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t h = 0; h < g.Hq; ++h)
      std::copy_n(panel + ((b * g.Hq + h) * g.T_pad() + t0 + i) * g.Dp, g.D, out.row(b, t0 + i, h));
}

template <class T>
void forward(const Tensor& q, const Tensor& k, const Tensor& v, const Geometry& g, Tensor& out,
             Tensor& lse) {
  const HeadRows<const T> qr(q.data<T>(), q), kr(k.data<T>(), k), vr(v.data<T>(), v);
  const HeadRows<T> outr(out.data<T>(), out);
  T* lsep = lse.data<T>();
  const int64_t nq = g.q_tiles(), nk = g.kv_tiles(), tasks = g.B * g.Hq * nq;
  Tensor kt_panels = Tensor::empty({g.B * g.Hkv * g.Dp * g.S_pad()}, q.dtype());
  Tensor v_panels = Tensor::empty({g.B * g.Hkv * g.S_pad() * g.Dp}, q.dtype());
  const KVPanels<T> kv{kt_panels.data<T>(), v_panels.data<T>(), g.S_pad(), g.Dp};
  Tensor q_panel = Tensor::empty({g.B * g.Hq * g.T_pad() * g.Dp}, q.dtype());
  T* qp = q_panel.data<T>();
#pragma omp parallel if (g.parallel() && !omp_in_parallel())
  {
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < g.B * g.Hkv * nk; ++i)
      pack_key_tile<T>(g, kr, vr, kv, i / (g.Hkv * nk), i / nk % g.Hkv, i % nk);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < g.B * nq; ++i) pack_query_rows<T>(g, qr, qp, i / nq, i % nq);
    ForwardScratch<T> w(g.Dp);
    // Latest query tiles (the most key tiles under the causal mask) first.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t qt = nq - 1 - task / (g.B * g.Hq), bh = task % (g.B * g.Hq);
      forward_query_tile<T>(g, qp, kv, lsep, bh / g.Hq, bh % g.Hq, qt, w);
    }
#pragma omp for schedule(static)
    for (int64_t i = 0; i < g.B * nq; ++i) unpack_output<T>(g, qp, outr, i / nq, i % nq);
  }
}

}  // namespace

AttentionResult attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const AttentionParams& p) {
  AttentionResult r;
  r.out = Tensor::empty(q.shape(), q.dtype());
  r.lse = Tensor::empty({q.size(0), q.size(2), q.size(1)}, q.dtype());
  dispatch_float(q.dtype(), "attention", [&](auto tag) {
    using T = decltype(tag);
    forward<T>(q, k, v, Geometry(q, k, p, attn::kNR<T>), r.out, r.lse);
  });
  return r;
}

}  // namespace ember::kernels
