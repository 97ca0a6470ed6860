// Reference attention (see reference.h). Per batch b and query head h, with
// kv head g = h / (Hq / Hkv), Q = q[b, :, h, :] [T, D], K, V = k, v[b, :, g, :]
// [S, D], query t at position S - T + t seeing key s when s <= S - T + t and
// (window == 0 or S - T + t - s < window):
//   S = scale Q K^T,  with softcap c > 0: S = c tanh(S / c),  then masked (-inf)
//   P = softmax(S) by rows,  O = P V,  lse = log rowsum(exp S)
// Backward for dO, with delta = rowsum(dO * O):
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - delta)  (* (1 - tanh^2(scale Q K^T / c)) with softcap)
//   dQ = scale dS K,  dK = scale dS^T Q
// dK and dV of a kv head sum over the query heads that share it.
#include "core/kernels/attention/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"

namespace ember::kernels {
namespace {

struct Dims {
  int64_t B, T, S, Hq, Hkv, D;
};

Dims dims_of(const Tensor& q, const Tensor& k, const Tensor& v) {
  EMBER_CHECK(q.dim() == 4 && k.dim() == 4 && k.shape() == v.shape(),
              "attention reference: q [B, T, Hq, D], k and v [B, S, Hkv, D] expected");
  const Dims n{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3)};
  EMBER_CHECK(k.size(0) == n.B && k.size(3) == n.D && n.S >= n.T && n.Hkv > 0 && n.Hq % n.Hkv == 0,
              "attention reference: shapes of q and k, v do not fit");
  EMBER_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), "attention reference: dtypes differ");
  return n;
}

// One head's matrices, row-major: Q, dO [T, D]; K, V [S, D]; S, P, ... [T, S].
template <class T>
struct Head {
  std::vector<T> q, k, v, p, capgrad, out;
  std::vector<bool> visible;
};

// Copies head (b, h) of q and its kv head of k, v out of contiguous tensors.
template <class T>
void load_head(Head<T>& a, const Dims& n, const T* q, const T* k, const T* v, int64_t b, int64_t h) {
  const int64_t g = h / (n.Hq / n.Hkv);
  a.q.resize(n.T * n.D);
  a.k.resize(n.S * n.D);
  a.v.resize(n.S * n.D);
  for (int64_t t = 0; t < n.T; ++t)
    for (int64_t d = 0; d < n.D; ++d) a.q[t * n.D + d] = q[((b * n.T + t) * n.Hq + h) * n.D + d];
  for (int64_t s = 0; s < n.S; ++s)
    for (int64_t d = 0; d < n.D; ++d) {
      a.k[s * n.D + d] = k[((b * n.S + s) * n.Hkv + g) * n.D + d];
      a.v[s * n.D + d] = v[((b * n.S + s) * n.Hkv + g) * n.D + d];
    }
}

// P = softmax(mask(cap(scale Q K^T))), O = P V, and lse per row.
template <class T>
void head_forward(Head<T>& a, const Dims& n, const AttentionParams& prm, std::vector<T>& lse) {
  const T scale = static_cast<T>(prm.scale), cap = static_cast<T>(prm.softcap);
  a.p.assign(n.T * n.S, T(0));
  a.capgrad.assign(n.T * n.S, T(1));
  a.visible.assign(n.T * n.S, false);
  a.out.assign(n.T * n.D, T(0));
  lse.assign(n.T, T(0));
  for (int64_t t = 0; t < n.T; ++t) {
    const int64_t pos = n.S - n.T + t;
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t s = 0; s < n.S; ++s) {
      T x = 0;
      for (int64_t d = 0; d < n.D; ++d) x += a.q[t * n.D + d] * a.k[s * n.D + d];
      x *= scale;
      if (cap > 0) {
        const T th = std::tanh(x / cap);
        x = cap * th;
        a.capgrad[t * n.S + s] = 1 - th * th;
      }
      a.visible[t * n.S + s] = s <= pos && (prm.window == 0 || pos - s < prm.window);
      if (!a.visible[t * n.S + s]) continue;
      a.p[t * n.S + s] = x;
      m = std::max(m, x);
    }
    T z = 0;
    for (int64_t s = 0; s < n.S; ++s) {
      T& e = a.p[t * n.S + s];
      e = a.visible[t * n.S + s] ? std::exp(e - m) : T(0);
      z += e;
    }
    for (int64_t s = 0; s < n.S; ++s) a.p[t * n.S + s] /= z;
    lse[t] = m + std::log(z);
    for (int64_t s = 0; s < n.S; ++s)
      for (int64_t d = 0; d < n.D; ++d) a.out[t * n.D + d] += a.p[t * n.S + s] * a.v[s * n.D + d];
  }
}

template <class T>
void forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& prm, Tensor& out,
             Tensor& lse) {
  const Dims n = dims_of(q, k, v);
  const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  T* o = out.data<T>();
  T* l = lse.data<T>();
  Head<T> a;
  std::vector<T> row_lse;
  for (int64_t b = 0; b < n.B; ++b)
    for (int64_t h = 0; h < n.Hq; ++h) {
      load_head(a, n, qc.data<T>(), kc.data<T>(), vc.data<T>(), b, h);
      head_forward(a, n, prm, row_lse);
      for (int64_t t = 0; t < n.T; ++t) {
        for (int64_t d = 0; d < n.D; ++d) o[((b * n.T + t) * n.Hq + h) * n.D + d] = a.out[t * n.D + d];
        l[(b * n.Hq + h) * n.T + t] = row_lse[t];
      }
    }
}

// Adds head (b, h)'s gradients: dq of its rows, dk and dv of its kv head.
template <class T>
void head_backward(const Head<T>& a, const Dims& n, const AttentionParams& prm, const T* dout, int64_t b,
                   int64_t h, T* dq, T* dk, T* dv) {
  const T scale = static_cast<T>(prm.scale);
  const int64_t g = h / (n.Hq / n.Hkv);
  auto qrow = [&](int64_t t) { return ((b * n.T + t) * n.Hq + h) * n.D; };
  auto kvrow = [&](int64_t s) { return ((b * n.S + s) * n.Hkv + g) * n.D; };
  for (int64_t t = 0; t < n.T; ++t) {
    const T* go = dout + qrow(t);
    T delta = 0;  // rowsum(dO * O)
    for (int64_t d = 0; d < n.D; ++d) delta += go[d] * a.out[t * n.D + d];
    for (int64_t s = 0; s < n.S; ++s) {
      const T p = a.p[t * n.S + s];
      T dp = 0;  // (dO V^T)[t, s]
      for (int64_t d = 0; d < n.D; ++d) dp += go[d] * a.v[s * n.D + d];
      const T ds = p * (dp - delta) * a.capgrad[t * n.S + s];
      for (int64_t d = 0; d < n.D; ++d) {
        dq[qrow(t) + d] += scale * ds * a.k[s * n.D + d];
        dk[kvrow(s) + d] += scale * ds * a.q[t * n.D + d];
        dv[kvrow(s) + d] += p * go[d];
      }
    }
  }
}

template <class T>
void backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout, const AttentionParams& prm,
              AttentionGrads& r) {
  const Dims n = dims_of(q, k, v);
  EMBER_CHECK(dout.shape() == q.shape() && dout.dtype() == q.dtype(),
              "attention reference: dout must be shaped and typed like q");
  const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous(), gc = dout.contiguous();
  Head<T> a;
  std::vector<T> lse;
  for (int64_t b = 0; b < n.B; ++b)
    for (int64_t h = 0; h < n.Hq; ++h) {
      load_head(a, n, qc.data<T>(), kc.data<T>(), vc.data<T>(), b, h);
      head_forward(a, n, prm, lse);
      head_backward(a, n, prm, gc.data<T>(), b, h, r.dq.data<T>(), r.dk.data<T>(), r.dv.data<T>());
    }
}

}  // namespace

AttentionResult attention_reference_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const AttentionParams& p) {
  AttentionResult r;
  r.out = Tensor::empty(q.shape(), q.dtype());
  r.lse = Tensor::empty({q.size(0), q.size(2), q.size(1)}, q.dtype());
  dispatch_float(q.dtype(), "attention reference", [&](auto tag) {
    using T = decltype(tag);
    forward<T>(q, k, v, p, r.out, r.lse);
  });
  return r;
}

AttentionGrads attention_reference_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const Tensor& dout, const AttentionParams& p) {
  AttentionGrads r{Tensor::zeros(q.shape(), q.dtype()), Tensor::zeros(k.shape(), k.dtype()),
                   Tensor::zeros(v.shape(), v.dtype())};
  dispatch_float(q.dtype(), "attention reference", [&](auto tag) {
    using T = decltype(tag);
    backward<T>(q, k, v, dout, p, r);
  });
  return r;
}

}  // namespace ember::kernels
