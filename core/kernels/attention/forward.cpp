// Flash attention forward (FlashAttention-2): one task per (batch, query head,
// query tile of kBr rows). Per visible key tile of kBc keys:
//   S = (scale Q) K^T,  S = c tanh(S / c) with softcap,  mask,
//   m' = max(m, rowmax S),  P = exp(S - m'),  l = e^(m - m') l + rowsum P,
//   O = e^(m - m') O + P V,  m = m'
// and at the end out = O / l, lse = m + log l. Everything is kept transposed
// (Q^T, S^T, O^T: query rows along the vector lanes, attention_forward_tile.h).
// Key tiles wholly outside the causal / sliding window are never visited, nor
// the (key group, row vector) blocks of a tile that no row sees; only blocks
// crossing the window's edges are masked. K and V are packed once per kv head
// into padded row panels (linear in S) that the query tiles of every head
// sharing it read in place.
#include <omp.h>

#include <cmath>
#include <vector>

#include "core/kernels/attention/forward_tile.h"

namespace ember::kernels {
namespace {

using namespace attn;

// Per-thread scratch of one query tile, 64-byte aligned: Q^T and O^T
// [Dp, kBr], S^T / P^T [kBc, kBr], and per row m, m', m' with 0 for -inf,
// alpha, l and the key tile's sum of P.
template <class T>
struct ForwardScratch {
  std::vector<T> buf;
  T *qt, *ot, *s, *m, *m_new, *m_use, *alpha, *l, *lsum;
  explicit ForwardScratch(int64_t Dp) : buf((2 * Dp + kBc + 6) * kBr + 64 / sizeof(T)) {
    const auto addr = reinterpret_cast<uintptr_t>(buf.data());
    qt = buf.data() + (64 - addr % 64) % 64 / sizeof(T);
    ot = qt + Dp * kBr;
    s = ot + Dp * kBr;
    T* p = s + kBc * kBr;
    for (T** x : {&m, &m_new, &m_use, &alpha, &l, &lsum}) {
      *x = p;
      p += kBr;
    }
  }
};

// Packed keys and values of every (batch, kv head): rows [S_pad, Dp] (zeros
// on padding rows and columns).
template <class T>
struct KVPanels {
  T *k, *v;
  int64_t Spad, Dp;
  T* k_of(int64_t b, int64_t kvh, int64_t Hkv) const { return k + (b * Hkv + kvh) * Spad * Dp; }
  T* v_of(int64_t b, int64_t kvh, int64_t Hkv) const { return v + (b * Hkv + kvh) * Spad * Dp; }
};

template <class T>
EMBER_TARGET_CLONES void pack_key_tile(const Geometry& g, const HeadRows<const T>& k,
                                       const HeadRows<const T>& v, const KVPanels<T>& p, int64_t b,
                                       int64_t kvh, int64_t kt) {
  const int64_t s0 = kt * kBc, cols = std::min(kBc, g.S - s0);
  pack_rows(p.k_of(b, kvh, g.Hkv) + s0 * g.Dp, kBc, k, b, s0, cols, kvh, g.D, g.Dp, T(1));
  pack_rows(p.v_of(b, kvh, g.Hkv) + s0 * g.Dp, kBc, v, b, s0, cols, kvh, g.D, g.Dp, T(1));
}

// qt [roundup(D, W), kBr] = scale q^T of rows t0 .. t0 + kBr - 1 of head h
// (zeros past row T and column D), by W x W blocks transposed in registers.
template <class T>
EMBER_ATTN_INLINE void load_query_tile(const Geometry& g, const HeadRows<const T>& q, T* qt,
                                       int64_t b, int64_t t0, int64_t h) {
  using X = Vec<T>;
  constexpr int W = X::W;
  const int64_t rows = std::min(kBr, g.T - t0);
  const T scale = static_cast<T>(g.scale);
  for (int64_t i0 = 0; i0 < kBr; i0 += W)
    for (int64_t d0 = 0; d0 < g.D; d0 += W) {
      const int64_t n = std::min<int64_t>(g.D - d0, W);
      typename X::V r[W];
      for (int i = 0; i < W; ++i) {
        const T* src = i0 + i < rows ? q.row(b, t0 + i0 + i, h) + d0 : nullptr;
        if (src && n == W) {
          r[i] = X::load(src) * scale;
        } else {
          T x[W] = {};
          for (int64_t c = 0; src && c < n; ++c) x[c] = scale * src[c];
          r[i] = X::load(x);
        }
      }
      transpose_block<T>(r);
      for (int j = 0; j < W; ++j) X::store(qt + (d0 + j) * kBr + i0, r[j]);
    }
}

// out rows of the task's real rows = O^T transposed / l, by W x W blocks.
template <class T>
EMBER_ATTN_INLINE void write_rows(const Geometry& g, const T* ot, const T* l, int64_t rows,
                                  const HeadRows<T>& out, int64_t b, int64_t t0, int64_t h) {
  using X = Vec<T>;
  constexpr int W = X::W;
  for (int64_t i0 = 0; i0 < rows; i0 += W) {
    const typename X::V inv = T(1) / X::load(l + i0);
    for (int64_t d0 = 0; d0 < g.D; d0 += W) {
      typename X::V r[W];
      for (int j = 0; j < W; ++j) r[j] = X::load(ot + (d0 + j) * kBr + i0) * inv;
      transpose_block<T>(r);
      const int64_t n = std::min<int64_t>(g.D - d0, W);
      for (int i = 0; i < W && i0 + i < rows; ++i) {
        T* o = out.row(b, t0 + i0 + i, h) + d0;
        if (n == W) {
          X::store(o, r[i]);
        } else {
          T x[W];
          X::store(x, r[i]);
          std::copy_n(x, n, o);
        }
      }
    }
  }
}

template <class T>
EMBER_TARGET_CLONES void forward_query_tile(const Geometry& g, const HeadRows<const T>& q,
                                            const KVPanels<T>& kv, const HeadRows<T>& out, T* lse,
                                            int64_t b, int64_t h, int64_t qt,
                                            ForwardScratch<T>& w) {
  using X = Vec<T>;
  using V = typename X::V;
  constexpr int W = X::W;
  const T ninf = -std::numeric_limits<T>::infinity();
  const int64_t kvh = h / g.group(), Dp = g.Dp, t0 = qt * kBr;
  const int64_t rows = std::min(kBr, g.T - t0);
  TileArgs<T> a{
      &g,      t0,      0,     (g.D + 15) / 16 * 16, w.qt, nullptr, nullptr, w.s, w.ot, w.m_new,
      w.m_use, w.alpha, w.lsum};
  load_query_tile(g, q, w.qt, b, t0, h);
  std::fill(w.ot, w.ot + a.Dd * kBr, T(0));
  std::fill(w.m, w.m + kBr, ninf);
  std::fill(w.l, w.l + kBr, T(0));
  std::fill(w.alpha, w.alpha + kBr, T(1));
  const int64_t kt_first = g.first_key(t0) / kBc;
  const int64_t kt_last = std::min(g.last_key(t0 + rows - 1), g.S - 1) / kBc;
  for (int64_t kt = kt_first; kt <= kt_last; ++kt) {
    a.s0 = kt * kBc;
    a.k = kv.k_of(b, kvh, g.Hkv) + a.s0 * Dp;
    a.v = kv.v_of(b, kvh, g.Hkv) + a.s0 * Dp;
    Segment segs[kBc / kKeyGroup];
    const int n = key_segments<T>(g, t0, rows, a.s0, segs);
    if (n == 0) continue;
    // The row vectors [c0, c1) some segment covers: the others' m and l stay.
    int c0 = static_cast<int>(kBr), c1 = 0;
    for (int i = 0; i < n; ++i) {
      c0 = std::min(c0, segs[i].v0 * W);
      c1 = std::max(c1, (segs[i].v0 + segs[i].nv) * W);
    }
    std::copy(w.m + c0, w.m + c1, w.m_new + c0);
    for (int i = 0; i < n; ++i) run_segment<T, Pass::kScores>(a, segs[i]);
    for (int j = c0; j < c1; j += W) {
      const V m = X::load(w.m + j), m_new = X::load(w.m_new + j);
      // A row with nothing visible yet keeps m = -inf (its P is 0); its alpha
      // is 0 on the first key it sees (and 1 while m stays: exp(0) = 1 exactly).
      X::store(w.alpha + j, m == ninf ? V{} : X::exp(m - m_new));
      X::store(w.m_use + j, m_new == ninf ? V{} : m_new);
      X::store(w.lsum + j, V{});
    }
    for (int i = 0; i < n; ++i) run_segment<T, Pass::kProbs>(a, segs[i]);
    for (int j = c0; j < c1; j += W) {
      X::store(w.l + j, X::load(w.alpha + j) * X::load(w.l + j) + X::load(w.lsum + j));
      X::store(w.m + j, X::load(w.m_new + j));
    }
    for (int i = 0; i < n; ++i) run_segment<T, Pass::kUpdate>(a, segs[i]);
  }
  write_rows(g, w.ot, w.l, rows, out, b, t0, h);
  for (int64_t i = 0; i < rows; ++i) lse[(b * g.Hq + h) * g.T + t0 + i] = w.m[i] + std::log(w.l[i]);
}

template <class T>
void forward(const Tensor& q, const Tensor& k, const Tensor& v, const Geometry& g, Tensor& out,
             Tensor& lse) {
  const HeadRows<const T> qr(q.data<T>(), q), kr(k.data<T>(), k), vr(v.data<T>(), v);
  const HeadRows<T> outr(out.data<T>(), out);
  T* lsep = lse.data<T>();
  const int64_t nq = g.q_tiles(), nk = g.kv_tiles(), tasks = g.B * g.Hq * nq;
  Tensor k_panels = Tensor::empty({g.B * g.Hkv * g.S_pad() * g.Dp}, q.dtype());
  Tensor v_panels = Tensor::empty({g.B * g.Hkv * g.S_pad() * g.Dp}, q.dtype());
  const KVPanels<T> kv{k_panels.data<T>(), v_panels.data<T>(), g.S_pad(), g.Dp};
#pragma omp parallel if (g.parallel() && !omp_in_parallel())
  {
#pragma omp for schedule(static)
    for (int64_t i = 0; i < g.B * g.Hkv * nk; ++i)
      pack_key_tile<T>(g, kr, vr, kv, i / (g.Hkv * nk), i / nk % g.Hkv, i % nk);
    ForwardScratch<T> w(g.Dp);
    // Latest query tiles (the most key tiles under the causal mask) first.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t qt = nq - 1 - task / (g.B * g.Hq), bh = task % (g.B * g.Hq);
      forward_query_tile<T>(g, qr, kv, outr, lsep, bh / g.Hq, bh % g.Hq, qt, w);
    }
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
