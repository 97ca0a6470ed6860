// Softmax and log-softmax over the last dim and their backward. Inputs are
// made contiguous and seen as rows [R, C]; rows run in parallel (OpenMP), each
// in two or three vectorized passes (per-ISA clones), row sums accumulated in
// double. Like PyTorch, a row that is all -inf gives NaN.
#include "core/kernels/softmax.h"

#include <cmath>

#include "core/kernels/elementwise_impl.h"
#include "core/kernels/fast_math.h"
#include "core/simd.h"
#include "core/strided_loop.h"

namespace ember::kernels {
namespace {

// x contiguous, seen as R rows of C.
struct Rows {
  Tensor x;
  int64_t R = 0, C = 1;
};

Rows as_rows(const Tensor& t) {
  Rows r;
  r.x = t.contiguous();
  r.C = t.dim() == 0 ? 1 : t.size(-1);
  r.R = r.C == 0 ? 0 : t.numel() / r.C;
  return r;
}

// y and dy of one dtype and one shape.
void check_backward(const char* op, const Tensor& y, const Tensor& dy) {
  impl::check_same_dtype(op, y, dy);
  EMBER_CHECK(y.shape() == dy.shape(), op, ": y of shape ", shape_str(y.shape()),
              " and dy of shape ", shape_str(dy.shape()), " differ");
}

// Calls f(r) for every row, in parallel when there is enough work.
template <class F>
void for_rows(int64_t R, int64_t C, F f) {
#pragma omp parallel for schedule(static) if (R > 1 && R * C >= kParallelGrain && !omp_in_parallel())
  for (int64_t r = 0; r < R; ++r) f(r);
}

// Largest value of x[0..n) (n >= 1); NaNs are skipped (they make the row NaN
// through exp anyway).
template <class T>
inline T row_max(const T* x, int64_t n) {
  T m = x[0];
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// One row of each kernel; compiled per ISA (exp is the hot part).

// y = exp(x - m) / sum(exp(x - m)), m = row max
template <class T>
EMBER_TARGET_CLONES void softmax_row(const T* __restrict x, T* __restrict y, int64_t C) {
  const T m = row_max(x, C);
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < C; ++i) {
    const T e = fast::exp(x[i] - m);
    y[i] = e;
    s += static_cast<double>(e);
  }
  const T inv = static_cast<T>(1.0 / s);
#pragma omp simd
  for (int64_t i = 0; i < C; ++i) y[i] *= inv;
}

// y = (x - m) - log(sum(exp(x - m))), m = row max
template <class T>
EMBER_TARGET_CLONES void log_softmax_row(const T* __restrict x, T* __restrict y, int64_t C) {
  const T m = row_max(x, C);
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < C; ++i) s += static_cast<double>(fast::exp(x[i] - m));
  const T ls = static_cast<T>(std::log(s));
#pragma omp simd
  for (int64_t i = 0; i < C; ++i) y[i] = (x[i] - m) - ls;
}

// dx = y * (dy - sum(dy * y))
template <class T>
EMBER_TARGET_CLONES void softmax_backward_row(const T* __restrict y, const T* __restrict dy,
                                              T* __restrict dx, int64_t C) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < C; ++i) s += static_cast<double>(dy[i]) * static_cast<double>(y[i]);
  const T dot = static_cast<T>(s);
#pragma omp simd
  for (int64_t i = 0; i < C; ++i) dx[i] = y[i] * (dy[i] - dot);
}

// dx = dy - exp(y) * sum(dy)
template <class T>
EMBER_TARGET_CLONES void log_softmax_backward_row(const T* __restrict y, const T* __restrict dy,
                                                  T* __restrict dx, int64_t C) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < C; ++i) s += static_cast<double>(dy[i]);
  const T sum = static_cast<T>(s);
#pragma omp simd
  for (int64_t i = 0; i < C; ++i) dx[i] = dy[i] - fast::exp(y[i]) * sum;
}

// out[r] = row(x[r]) for every row of x (softmax, log_softmax).
template <class RowFn>
Tensor forward_rows(const char* op, const Tensor& x, RowFn row) {
  impl::check_defined(op, x);
  return dispatch_float(x.dtype(), op, [&](auto tag) -> Tensor {
    using T = decltype(tag);
    const Rows rows = as_rows(x);
    Tensor out = Tensor::empty(x.shape(), x.dtype());
    const T* px = rows.x.data<T>();
    T* py = out.data<T>();
    const int64_t C = rows.C;
    for_rows(rows.R, C, [&](int64_t r) { row(px + r * C, py + r * C, C); });
    return out;
  });
}

// dx[r] = row(y[r], dy[r]) for every row (the backward kernels).
template <class RowFn>
Tensor backward_rows(const char* op, const Tensor& y, const Tensor& dy, RowFn row) {
  check_backward(op, y, dy);
  return dispatch_float(y.dtype(), op, [&](auto tag) -> Tensor {
    using T = decltype(tag);
    const Rows ry = as_rows(y), rg = as_rows(dy);
    Tensor out = Tensor::empty(y.shape(), y.dtype());
    const T* py = ry.x.data<T>();
    const T* pg = rg.x.data<T>();
    T* pd = out.data<T>();
    const int64_t C = ry.C;
    for_rows(ry.R, C, [&](int64_t r) { row(py + r * C, pg + r * C, pd + r * C, C); });
    return out;
  });
}

}  // namespace

Tensor softmax(const Tensor& x) {
  return forward_rows("softmax", x, [](const auto* in, auto* out, int64_t C) {
    softmax_row(in, out, C);
  });
}

Tensor log_softmax(const Tensor& x) {
  return forward_rows("log_softmax", x, [](const auto* in, auto* out, int64_t C) {
    log_softmax_row(in, out, C);
  });
}

Tensor softmax_backward(const Tensor& y, const Tensor& dy) {
  return backward_rows("softmax_backward", y, dy,
                       [](const auto* yr, const auto* gr, auto* dr, int64_t C) {
                         softmax_backward_row(yr, gr, dr, C);
                       });
}

Tensor log_softmax_backward(const Tensor& y, const Tensor& dy) {
  return backward_rows("log_softmax_backward", y, dy,
                       [](const auto* yr, const auto* gr, auto* dr, int64_t C) {
                         log_softmax_backward_row(yr, gr, dr, C);
                       });
}

}  // namespace ember::kernels
