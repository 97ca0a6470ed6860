// Gated linear units, fused: h = act(g) * u, with act = silu (SwiGLU) or
// exact GELU (GeGLU). One pass forward and one pass backward producing both
// gradients, instead of act, mul and their two backwards (four passes and two
// temporaries over [B, T, ffn_hidden]).
//   silu(g) = g s, s = sigmoid(g);          silu'(g) = s (1 + g (1 - s))
//   gelu(g) = g Phi(g);                      gelu'(g) = Phi(g) + g phi(g)
//   dg = dh * u * act'(g),   du = dh * act(g)
// Shapes: g, u, h [..., C] all the same (no broadcasting); dh = dL/dh.
#include <cmath>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/kernels/fast_math.h"
#include "autograd/profile_families.h"
#include "core/simd.h"
#include "core/strided_loop.h"

namespace ember {
namespace {

constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)

// act(g) and act'(g) for one element.
template <class T, bool Gelu>
inline void glu_act(T g, T& a, T& da) {
  if constexpr (Gelu) {
    const T cdf = kernels::fast::normal_cdf(g);
    a = g * cdf;
    da = cdf + g * T(kInvSqrt2Pi) * kernels::fast::exp(T(-0.5) * g * g);
  } else {
    T s, one_minus_s;
    kernels::fast::sigmoid_pair(g, s, one_minus_s);
    a = g * s;
    da = s * (T(1) + g * one_minus_s);
  }
}

template <class T, bool Gelu>
EMBER_TARGET_CLONES void glu_forward_span(const T* __restrict g, const T* __restrict u,
                                          T* __restrict h, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    T a, da;
    glu_act<T, Gelu>(g[i], a, da);
    h[i] = a * u[i];
  }
}

template <class T, bool Gelu>
EMBER_TARGET_CLONES void glu_backward_span(const T* __restrict g, const T* __restrict u,
                                           const T* __restrict dh, T* __restrict dg,
                                           T* __restrict du, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    T a, da;
    glu_act<T, Gelu>(g[i], a, da);
    dg[i] = dh[i] * u[i] * da;
    du[i] = dh[i] * a;
  }
}

// Runs body(begin, end) over [0, n) split evenly across threads when n is large.
template <class F>
void parallel_spans(int64_t n, F body) {
  if (n < kParallelGrain || omp_in_parallel() || omp_get_max_threads() == 1) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    // Chunks rounded to 16 elements so every thread starts on a vector boundary.
    const int64_t chunk = ((n + nt - 1) / nt + 15) / 16 * 16;
    const int64_t b = std::min(n, t * chunk), e = std::min(n, b + chunk);
    if (b < e) body(b, e);
  }
}

Variable glu(const char* name, bool gelu, const Variable& gate, const Variable& up) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  EMBER_CHECK(gate.shape() == up.shape(), name, ": gate and up must have the same shape, got ",
              shape_str(gate.shape()), " and ", shape_str(up.shape()));
  EMBER_CHECK(gate.dtype() == up.dtype(), name, ": gate and up must have the same dtype");
  const Tensor g = gate.data().contiguous(), u = up.data().contiguous();
  Tensor h = Tensor::empty(g.shape(), g.dtype());
  const int64_t n = g.numel();
  dispatch_float(g.dtype(), name, [&](auto tag) {
    using T = decltype(tag);
    const T *pg = g.data<T>(), *pu = u.data<T>();
    T* ph = h.data<T>();
    parallel_spans(n, [&](int64_t b, int64_t e) {
      if (gelu) {
        glu_forward_span<T, true>(pg + b, pu + b, ph + b, e - b);
      } else {
        glu_forward_span<T, false>(pg + b, pu + b, ph + b, e - b);
      }
    });
  });
  return record(name, {gate, up}, h,
                [name, gelu, sg = SavedTensor(g), su = SavedTensor(u)](const Tensor& grad) -> Grads {
                  const Tensor& g = sg.get();
                  const Tensor& u = su.get();
                  const Tensor dh = grad.contiguous();
                  Tensor dg = Tensor::empty(g.shape(), g.dtype());
                  Tensor du = Tensor::empty(g.shape(), g.dtype());
                  dispatch_float(g.dtype(), name, [&](auto tag) {
                    using T = decltype(tag);
                    const T *pg = g.data<T>(), *pu = u.data<T>(), *pdh = dh.data<T>();
                    T *pdg = dg.data<T>(), *pdu = du.data<T>();
                    parallel_spans(g.numel(), [&](int64_t b, int64_t e) {
                      if (gelu) {
                        glu_backward_span<T, true>(pg + b, pu + b, pdh + b, pdg + b, pdu + b, e - b);
                      } else {
                        glu_backward_span<T, false>(pg + b, pu + b, pdh + b, pdg + b, pdu + b, e - b);
                      }
                    });
                  });
                  return {dg, du};
                });
}

}  // namespace

Variable swiglu(const Variable& gate, const Variable& up) { return glu("swiglu", false, gate, up); }

Variable geglu(const Variable& gate, const Variable& up) { return glu("geglu", true, gate, up); }

}  // namespace ember
