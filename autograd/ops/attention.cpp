// Causal scaled dot-product attention with GQA/MQA head sharing, sliding
// window and score soft-capping, computed one query row at a time: only a
// [S] score row per thread is live, and backward
// recomputes the scores from q, k and the saved row logsumexp L (as
// FlashAttention does), so memory is linear in the sequence length.
// Shapes: q, out [B, T, Hq, D]; k, v [B, S, Hkv, D]; L [B, Hq, T]. G = Hq / Hkv.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"

namespace ember {
namespace {

struct AttnShape {
  int64_t B, T, S, Hq, Hkv, D;
  double scale;
  int64_t window;
  double softcap;
  // Keys visible to query row t: [first, last].
  // Enough multiply-adds to be worth a parallel region.
  bool parallel() const { return B * Hq * T * S * D > 32768; }
  int64_t last(int64_t t) const { return S - T + t; }
  int64_t first(int64_t t) const { return window > 0 ? std::max<int64_t>(0, last(t) - window + 1) : 0; }
  int64_t q_row(int64_t b, int64_t t, int64_t h) const { return ((b * T + t) * Hq + h) * D; }
  int64_t kv_row(int64_t b, int64_t s, int64_t g) const { return ((b * S + s) * Hkv + g) * D; }
};

template <class T>
inline T dot(const T* a, const T* b, int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// score(t, s) = c * tanh(scale * q.k / c) with softcap c, else scale * q.k.
template <class T>
inline T attn_score(const T* q, const T* k, const AttnShape& a) {
  const T raw = static_cast<T>(a.scale) * dot(q, k, a.D);
  if (a.softcap > 0) {
    const T c = static_cast<T>(a.softcap);
    return c * std::tanh(raw / c);
  }
  return raw;
}

// Forward: P = softmax over visible keys of the scores; out = P v; L = logsumexp of the scores.
template <class T>
void attention_forward(const T* q, const T* k, const T* v, T* out, T* lse, const AttnShape& a) {
#pragma omp parallel if (a.parallel())
  {
    std::vector<T> p(static_cast<size_t>(a.S));
#pragma omp for collapse(3) schedule(static)
    for (int64_t b = 0; b < a.B; ++b) {
      for (int64_t h = 0; h < a.Hq; ++h) {
        for (int64_t t = 0; t < a.T; ++t) {
          const int64_t g = h / (a.Hq / a.Hkv);
          const T* qr = q + a.q_row(b, t, h);
          T* o = out + a.q_row(b, t, h);
          const int64_t s0 = a.first(t), s1 = a.last(t);
          T m = -std::numeric_limits<T>::infinity();
          for (int64_t s = s0; s <= s1; ++s) {
            p[s] = attn_score(qr, k + a.kv_row(b, s, g), a);
            m = std::max(m, p[s]);
          }
          T l = 0;
          for (int64_t s = s0; s <= s1; ++s) {
            p[s] = std::exp(p[s] - m);
            l += p[s];
          }
          const T inv = T(1) / l;
          std::fill(o, o + a.D, T(0));
          for (int64_t s = s0; s <= s1; ++s) {
            const T w = p[s] * inv;
            const T* vr = v + a.kv_row(b, s, g);
#pragma omp simd
            for (int64_t d = 0; d < a.D; ++d) o[d] += w * vr[d];
          }
          lse[(b * a.Hq + h) * a.T + t] = m + std::log(l);
        }
      }
    }
  }
}

// Backward, per query row t with P_s = exp(score_s - L_t) and delta_t = dO_t . O_t:
//   dP_s = dO_t . v_s,  dscore_s = P_s (dP_s - delta_t) (times 1 - (score_s / c)^2 with softcap),
//   dq_t += scale dscore_s k_s,  dk_s += scale dscore_s q_t,  dv_s += P_s dO_t.
// One task per (b, kv head) owns dk, dv of that head and dq of its G query heads: no races.
template <class T>
void attention_backward(const T* q, const T* k, const T* v, const T* out, const T* lse,
                        const T* dout, T* dq, T* dk, T* dv, const AttnShape& a) {
  const int64_t G = a.Hq / a.Hkv;
  std::fill(dq, dq + a.B * a.T * a.Hq * a.D, T(0));
  std::fill(dk, dk + a.B * a.S * a.Hkv * a.D, T(0));
  std::fill(dv, dv + a.B * a.S * a.Hkv * a.D, T(0));
#pragma omp parallel if (a.parallel())
  {
    std::vector<T> p(static_cast<size_t>(a.S));
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < a.B; ++b) {
      for (int64_t g = 0; g < a.Hkv; ++g) {
        for (int64_t h = g * G; h < (g + 1) * G; ++h) {
          for (int64_t t = 0; t < a.T; ++t) {
            const int64_t row = a.q_row(b, t, h);
            const T* qr = q + row;
            const T* dor = dout + row;
            T* dqr = dq + row;
            const T L = lse[(b * a.Hq + h) * a.T + t];
            const T delta = dot(dor, out + row, a.D);
            const int64_t s0 = a.first(t), s1 = a.last(t);
            for (int64_t s = s0; s <= s1; ++s) {
              const T* kr = k + a.kv_row(b, s, g);
              const T* vr = v + a.kv_row(b, s, g);
              const T score = attn_score(qr, kr, a);
              const T prob = std::exp(score - L);
              T ds = prob * (dot(dor, vr, a.D) - delta);
              if (a.softcap > 0) {
                const T th = score / static_cast<T>(a.softcap);
                ds *= T(1) - th * th;
              }
              ds *= static_cast<T>(a.scale);
              T* dkr = dk + a.kv_row(b, s, g);
              T* dvr = dv + a.kv_row(b, s, g);
#pragma omp simd
              for (int64_t d = 0; d < a.D; ++d) {
                dqr[d] += ds * kr[d];
                dkr[d] += ds * qr[d];
                dvr[d] += prob * dor[d];
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace

Variable attention(const Variable& q, const Variable& k, const Variable& v, double scale,
                   int64_t window, double softcap) {
  EMBER_PROFILE_SCOPE(prof::Family::Attention);
  EMBER_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "attention: q, k, v must be [B, T, H, D], got ", shape_str(q.shape()), ", ",
              shape_str(k.shape()), ", ", shape_str(v.shape()));
  EMBER_CHECK(k.shape() == v.shape(), "attention: k ", shape_str(k.shape()), " and v ",
              shape_str(v.shape()), " differ");
  AttnShape a{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3), scale, window, softcap};
  EMBER_CHECK(k.size(0) == a.B && k.size(3) == a.D && a.Hq % a.Hkv == 0 && a.S >= a.T,
              "attention: q ", shape_str(q.shape()), " does not fit k/v ", shape_str(k.shape()),
              " (same B and D, kv heads dividing query heads, at least as many keys as queries)");
  EMBER_CHECK(q.dtype() == k.dtype() && k.dtype() == v.dtype(), "attention: q, k, v dtypes differ");
  EMBER_CHECK(window >= 0 && softcap >= 0, "attention: window and softcap must be >= 0");
  const Tensor qc = q.data().contiguous(), kc = k.data().contiguous(), vc = v.data().contiguous();
  Tensor out = Tensor::empty(q.shape(), q.dtype());
  Tensor lse = Tensor::empty({a.B, a.Hq, a.T}, q.dtype());
  dispatch_float(q.dtype(), "attention", [&](auto tag) {
    using T = decltype(tag);
    attention_forward<T>(qc.data<T>(), kc.data<T>(), vc.data<T>(), out.data<T>(), lse.data<T>(), a);
  });
  return record("attention", {q, k, v}, out,
                [qs = SavedTensor(qc), ks = SavedTensor(kc), vs = SavedTensor(vc),
                 os = SavedTensor(out), ls = SavedTensor(lse), a](const Tensor& g) -> Grads {
                  const Tensor& qv = qs.get();
                  const Tensor dout = g.contiguous();
                  Tensor dq = Tensor::empty(qv.shape(), qv.dtype());
                  Tensor dk = Tensor::empty(ks.get().shape(), qv.dtype());
                  Tensor dv = Tensor::empty(vs.get().shape(), qv.dtype());
                  dispatch_float(qv.dtype(), "attention backward", [&](auto tag) {
                    using T = decltype(tag);
                    attention_backward<T>(qv.data<T>(), ks.get().data<T>(), vs.get().data<T>(),
                                          os.get().data<T>(), ls.get().data<T>(), dout.data<T>(),
                                          dq.data<T>(), dk.data<T>(), dv.data<T>(), a);
                  });
                  return {dq, dk, dv};
                });
}

}  // namespace ember
