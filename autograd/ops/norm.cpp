// Fused normalisations over the last dim: RMSNorm and LayerNorm, forward and
// backward side by side. Rows are independent and run in parallel; the weight
// (and bias) gradients are summed per thread and combined in thread order.
// Shapes: x [N, C] after flattening the leading dims; w, b [C].
#include <omp.h>

#include <cmath>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/kernels/reduce.h"
#include "core/simd.h"
#include "core/threads.h"

namespace ember {
namespace {

// Sums per-thread partial vectors [threads, C] into out [C] in thread order.
template <class T>
void sum_partials(const std::vector<double>& partial, int threads, int64_t C, T* out) {
  for (int64_t c = 0; c < C; ++c) {
    double s = 0;
    for (int t = 0; t < threads; ++t) s += partial[t * C + c];
    out[c] = static_cast<T>(s);
  }
}

// Row kernels, vectorised (reductions in double lanes) and compiled per ISA.

// y = x * r * w
template <class T>
EMBER_TARGET_CLONES void row_scale(const T* __restrict x, T r, const T* __restrict w, T* __restrict y,
                                   int64_t C) {
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) y[c] = x[c] * r * w[c];
}

// sum of dy * w * x
template <class T>
EMBER_TARGET_CLONES double row_dot3(const T* __restrict dy, const T* __restrict w,
                                    const T* __restrict x, int64_t C) {
  double d = 0;
#pragma omp simd reduction(+ : d)
  for (int64_t c = 0; c < C; ++c) d += static_cast<double>(dy[c]) * w[c] * x[c];
  return d;
}

// dx = r * (dy * w - x * k)
template <class T>
EMBER_TARGET_CLONES void row_rms_dx(const T* __restrict dy, const T* __restrict w,
                                    const T* __restrict x, T r, T k, T* __restrict dx, int64_t C) {
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) dx[c] = r * (dy[c] * w[c] - x[c] * k);
}

// acc += dy * (x - m) * r (m = 0 for RMSNorm), or acc += dy when plain (a bias).
template <class T>
EMBER_TARGET_CLONES void row_accumulate_dw(const T* __restrict dy, const T* __restrict x, T m, T r,
                                           double* __restrict acc, int64_t C, bool plain = false) {
  if (plain) {
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) acc[c] += static_cast<double>(dy[c]);
    return;
  }
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) acc[c] += static_cast<double>(dy[c]) * ((x[c] - m) * r);
}

template <class T>
EMBER_TARGET_CLONES double row_sum(const T* __restrict x, int64_t C) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t c = 0; c < C; ++c) s += static_cast<double>(x[c]);
  return s;
}

// sum of (x - mu)^2, in double
template <class T>
EMBER_TARGET_CLONES double row_centered_sum_squares(const T* __restrict x, double mu, int64_t C) {
  double v = 0;
#pragma omp simd reduction(+ : v)
  for (int64_t c = 0; c < C; ++c) v += (x[c] - mu) * (x[c] - mu);
  return v;
}

// sg = sum of dy * w,  sgx = sum of dy * w * (x - m) * r
template <class T>
EMBER_TARGET_CLONES void row_layer_norm_dots(const T* __restrict dy, const T* __restrict w,
                                             const T* __restrict x, T m, T r, double& sg_out,
                                             double& sgx_out, int64_t C) {
  double sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
  for (int64_t c = 0; c < C; ++c) {
    const double g = static_cast<double>(dy[c]) * w[c];
    sg += g;
    sgx += g * (x[c] - m) * r;
  }
  sg_out = sg;
  sgx_out = sgx;
}

// RMSNorm forward: r = 1 / sqrt(mean(x^2) + eps); y = x * r * w.
template <class T>
void rms_norm_forward(const T* x, const T* w, T* y, T* rstd, int64_t N, int64_t C, double eps) {
#pragma omp parallel for if (N * C > kParallelGrain)
  for (int64_t n = 0; n < N; ++n) {
    const T r = static_cast<T>(1.0 / std::sqrt(kernels::sum_squares(x + n * C, C) / C + eps));
    rstd[n] = r;
    row_scale(x + n * C, r, w, y + n * C, C);
  }
}

// RMSNorm backward with g = dy * w:
//   dx = r * (g - x * r^2 * mean(g * x)),   dw = sum over rows of dy * x * r.
template <class T>
void rms_norm_backward(const T* dy, const T* x, const T* w, const T* rstd, T* dx, T* dw,
                       int64_t N, int64_t C) {
  const int threads = omp_get_max_threads();
  std::vector<double> partial(static_cast<size_t>(threads) * C, 0.0);
#pragma omp parallel if (N * C > kParallelGrain)
  {
    double* my = partial.data() + omp_get_thread_num() * C;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const T* dyr = dy + n * C;
      const T* xr = x + n * C;
      const T r = rstd[n];
      const T k = static_cast<T>(row_dot3(dyr, w, xr, C) / C) * r * r;
      if (dx) row_rms_dx(dyr, w, xr, r, k, dx + n * C, C);
      if (dw) row_accumulate_dw(dyr, xr, T(0), r, my, C);
    }
  }
  if (dw) sum_partials(partial, threads, C, dw);
}

// LayerNorm forward: mu = mean(x), r = 1 / sqrt(var(x) + eps) (biased var);
// y = (x - mu) * r * w + b.
template <class T>
void layer_norm_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t N,
                        int64_t C, double eps) {
#pragma omp parallel for if (N * C > kParallelGrain)
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    T* yr = y + n * C;
    const double mu = row_sum(xr, C) / C;
    const double v = row_centered_sum_squares(xr, mu, C);
    const T r = static_cast<T>(1.0 / std::sqrt(v / C + eps));
    const T m = static_cast<T>(mu);
    mean[n] = m;
    rstd[n] = r;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) yr[c] = (xr[c] - m) * r * w[c] + (b ? b[c] : T(0));
  }
}

// LayerNorm backward with xhat = (x - mu) r and g = dy * w:
//   dx = r * (g - mean(g) - xhat * mean(g * xhat)),  dw = sum dy * xhat,  db = sum dy.
template <class T>
void layer_norm_backward(const T* dy, const T* x, const T* w, const T* mean, const T* rstd, T* dx,
                         T* dw, T* db, int64_t N, int64_t C) {
  const int threads = omp_get_max_threads();
  std::vector<double> partial(static_cast<size_t>(threads) * C * 2, 0.0);
#pragma omp parallel if (N * C > kParallelGrain)
  {
    double* my_w = partial.data() + omp_get_thread_num() * C;
    double* my_b = partial.data() + (threads + omp_get_thread_num()) * C;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const T* dyr = dy + n * C;
      const T* xr = x + n * C;
      const T m = mean[n], r = rstd[n];
      double sg = 0, sgx = 0;
      row_layer_norm_dots(dyr, w, xr, m, r, sg, sgx, C);
      const T mg = static_cast<T>(sg / C), mgx = static_cast<T>(sgx / C);
      if (dx) {
        T* dxr = dx + n * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) dxr[c] = r * (dyr[c] * w[c] - mg - (xr[c] - m) * r * mgx);
      }
      if (dw) row_accumulate_dw(dyr, xr, m, r, my_w, C);
      if (db) row_accumulate_dw(dyr, xr, T(0), T(0), my_b, C, /*plain=*/true);
    }
  }
  if (dw) sum_partials(partial, threads, C, dw);
  if (db) {
    std::vector<double> pb(partial.begin() + threads * C, partial.end());
    sum_partials(pb, threads, C, db);
  }
}

void check_norm_inputs(const char* op, const Variable& x, const Variable& w) {
  EMBER_CHECK(x.dim() >= 1, op, ": input must have at least one dimension");
  const int64_t C = x.size(-1);
  EMBER_CHECK(w.dim() == 1 && w.size(0) == C, op, ": weight of shape ", shape_str(w.shape()),
              " does not match input of shape ", shape_str(x.shape()), " (expected [", C, "])");
  EMBER_CHECK(w.dtype() == x.dtype(), op, ": weight is ", dtype_name(w.dtype()), " but input is ",
              dtype_name(x.dtype()));
}

}  // namespace

Variable rms_norm(const Variable& x, const Variable& w, double eps) {
  EMBER_PROFILE_SCOPE(kNormFamily);
  check_norm_inputs("rms_norm", x, w);
  const int64_t C = x.size(-1), N = x.numel() / std::max<int64_t>(C, 1);
  const Tensor xc = x.data().contiguous(), wc = w.data().contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor rstd = Tensor::empty({N}, x.dtype());
  dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
    using T = decltype(tag);
    rms_norm_forward<T>(xc.data<T>(), wc.data<T>(), y.data<T>(), rstd.data<T>(), N, C, eps);
  });
  const bool need_x = needs_grad(x), need_w = needs_grad(w);
  return record("rms_norm", {x, w}, y,
                [xs = SavedTensor(xc), ws = SavedTensor(wc), rs = SavedTensor(rstd), N, C, need_x,
                 need_w](const Tensor& g) -> Grads {
                  const Tensor& xv = xs.get();
                  const Tensor dy = g.contiguous();
                  Tensor dx = need_x ? Tensor::empty(xv.shape(), xv.dtype()) : Tensor();
                  Tensor dw = need_w ? Tensor::empty({C}, xv.dtype()) : Tensor();
                  dispatch_float(xv.dtype(), "rms_norm backward", [&](auto tag) {
                    using T = decltype(tag);
                    rms_norm_backward<T>(dy.data<T>(), xv.data<T>(), ws.get().data<T>(),
                                         rs.get().data<T>(), need_x ? dx.data<T>() : nullptr,
                                         need_w ? dw.data<T>() : nullptr, N, C);
                  });
                  return {dx, dw};
                });
}

Variable layer_norm(const Variable& x, const Variable& w, const Variable& b, double eps) {
  EMBER_PROFILE_SCOPE(kNormFamily);
  check_norm_inputs("layer_norm", x, w);
  if (b.defined()) check_norm_inputs("layer_norm (bias)", x, b);
  const int64_t C = x.size(-1), N = x.numel() / std::max<int64_t>(C, 1);
  const Tensor xc = x.data().contiguous(), wc = w.data().contiguous();
  const Tensor bc = b.defined() ? b.data().contiguous() : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = Tensor::empty({N}, x.dtype()), rstd = Tensor::empty({N}, x.dtype());
  dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    layer_norm_forward<T>(xc.data<T>(), wc.data<T>(), bc.defined() ? bc.data<T>() : nullptr,
                          y.data<T>(), mean.data<T>(), rstd.data<T>(), N, C, eps);
  });
  const bool need_x = needs_grad(x), need_w = needs_grad(w), need_b = b.defined() && needs_grad(b);
  std::vector<Variable> inputs{x, w};
  if (b.defined()) inputs.push_back(b);
  return record("layer_norm", inputs, y,
                [xs = SavedTensor(xc), ws = SavedTensor(wc), ms = SavedTensor(mean),
                 rs = SavedTensor(rstd), N, C, need_x, need_w, need_b,
                 has_b = b.defined()](const Tensor& g) -> Grads {
                  const Tensor& xv = xs.get();
                  const Tensor dy = g.contiguous();
                  Tensor dx = need_x ? Tensor::empty(xv.shape(), xv.dtype()) : Tensor();
                  Tensor dw = need_w ? Tensor::empty({C}, xv.dtype()) : Tensor();
                  Tensor db = need_b ? Tensor::empty({C}, xv.dtype()) : Tensor();
                  dispatch_float(xv.dtype(), "layer_norm backward", [&](auto tag) {
                    using T = decltype(tag);
                    layer_norm_backward<T>(dy.data<T>(), xv.data<T>(), ws.get().data<T>(),
                                           ms.get().data<T>(), rs.get().data<T>(),
                                           need_x ? dx.data<T>() : nullptr,
                                           need_w ? dw.data<T>() : nullptr,
                                           need_b ? db.data<T>() : nullptr, N, C);
                  });
                  Grads out{dx, dw};
                  if (has_b) out.push_back(db);
                  return out;
                });
}

}  // namespace ember
