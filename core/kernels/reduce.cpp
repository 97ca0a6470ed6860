// Reductions over any set of dims (sum, mean, amax, logsumexp), sum_to_shape
// and argmax_last. The input is read as rows [M, K] (kept x reduced, the
// reduced elements contiguous) or columns [K, M] (kept contiguous), copying
// only when neither layout fits. Work is cut in chunks fixed by the shape and
// partials are combined in chunk order: results do not depend on thread count.
#include "core/kernels/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>

#include "core/kernels/elementwise_impl.h"
#include "core/kernels/fast_math.h"
#include "core/simd.h"
#include "core/strided_loop.h"

namespace ember::kernels {
namespace {

constexpr int64_t kRowChunk = 32768;  // reduced elements per task in row form
constexpr int64_t kColBlock = 1024;   // kept columns per task in column form
constexpr int64_t kLanes = 8;         // independent accumulators per row (vectorizable)

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct ReducePlan {
  Shape out_shape;       // keepdim applied
  int64_t M = 1, K = 1;  // kept and reduced element counts
  bool columns = false;  // memory is [K, M] rather than [M, K]
  Tensor data;           // the tensor whose memory is read (a copy in the fallback case)
};

ReducePlan plan_reduce(const char* op, const Tensor& a, const std::vector<int64_t>& dims,
                       bool keepdim) {
  impl::check_defined(op, a);
  const int64_t nd = a.dim();
  std::vector<bool> reduced(nd, dims.empty());
  for (int64_t d : dims) {
    const int64_t n = std::max<int64_t>(nd, 1);  // a 0-dim tensor accepts dim 0 / -1
    EMBER_CHECK(d >= -n && d < n, op, ": dimension ", d, " is out of range for a tensor of shape ",
                shape_str(a.shape()));
    if (nd == 0) continue;
    const int64_t w = d < 0 ? d + n : d;
    EMBER_CHECK(!reduced[w], op, ": dimension ", w, " appears more than once in dims ",
                shape_str(dims));
    reduced[w] = true;
  }
  ReducePlan p;
  std::vector<int64_t> kept_dims, red_dims;
  for (int64_t d = 0; d < nd; ++d) {
    if (reduced[d]) {
      red_dims.push_back(d);
      p.K *= a.size(d);
      if (keepdim) p.out_shape.push_back(1);
    } else {
      kept_dims.push_back(d);
      p.M *= a.size(d);
      p.out_shape.push_back(a.size(d));
    }
  }
  // The order reduced elements are visited in is free: follow memory.
  std::stable_sort(red_dims.begin(), red_dims.end(),
                   [&](int64_t x, int64_t y) { return a.stride(x) > a.stride(y); });
  std::vector<int64_t> rows = kept_dims, cols = red_dims;
  rows.insert(rows.end(), red_dims.begin(), red_dims.end());
  cols.insert(cols.end(), kept_dims.begin(), kept_dims.end());
  const Tensor as_rows = a.permute(rows);
  if (as_rows.is_contiguous()) {
    p.data = a;
  } else if (a.permute(cols).is_contiguous()) {
    p.data = a;
    p.columns = true;
  } else {
    p.data = as_rows.contiguous();
  }
  return p;
}

// Row folds, compiled per ISA. fold_lanes folds x[0..n) into kLanes
// independent accumulators combined in a fixed tree, so the loop vectorizes
// and the order is fixed (the same for every clone).
template <class T, class Acc, class Step, class Combine>
EMBER_TARGET_CLONES Acc fold_lanes(const T* __restrict x, int64_t n, int64_t m, Acc init,
                                   Step step, Combine combine) {
  Acc lane[kLanes];
  for (int64_t j = 0; j < kLanes; ++j) lane[j] = init;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lane[j] = step(lane[j], x[i + j], m);
  for (; i < n; ++i) lane[0] = step(lane[0], x[i], m);
  for (int64_t w = kLanes / 2; w >= 1; w /= 2)
    for (int64_t j = 0; j < w; ++j) lane[j] = combine(lane[j], lane[j + w]);
  return lane[0];
}

// Largest of x[0..n) (n >= 1), NaN if there is one: an OpenMP max reduction
// and a separate NaN flag vectorize where a NaN-aware select does not.
template <class T>
EMBER_TARGET_CLONES T fold_max(const T* __restrict x, int64_t n) {
  T m = x[0];
  int any_nan = 0;
#pragma omp simd reduction(max : m) reduction(| : any_nan)
  for (int64_t i = 0; i < n; ++i) {
    m = x[i] > m ? x[i] : m;
    any_nan |= impl::is_nan(x[i]);
  }
  return any_nan ? std::numeric_limits<T>::quiet_NaN() : m;
}

// out[j] = fold of x[k * ld + j] over k < rows, for j < width <= kColBlock
// (columns m0 + j of a [K, M] block, ld = M).
template <class T, class Acc, class Step>
EMBER_TARGET_CLONES void reduce_columns(const T* __restrict x, int64_t ld, int64_t rows,
                                        int64_t width, int64_t m0, Acc init, Step step,
                                        Acc* __restrict out) {
  Acc buf[kColBlock];
  for (int64_t j = 0; j < width; ++j) buf[j] = init;
  for (int64_t k = 0; k < rows; ++k) {
    const T* row = x + k * ld;
    for (int64_t j = 0; j < width; ++j) buf[j] = step(buf[j], row[j], m0 + j);
  }
  for (int64_t j = 0; j < width; ++j) out[j] = buf[j];
}

// acc[m] = fold over the K reduced elements of output m of step(acc, x, m),
// starting from init; combine merges two partial accumulators; fold_row(x,
// n, m) folds a contiguous run of a row (the same result as the steps).
template <class T, class Acc, class Step, class Combine, class FoldRow>
std::vector<Acc> reduce_engine(const ReducePlan& p, Acc init, Step step, Combine combine,
                               FoldRow fold_row) {
  const int64_t M = p.M, K = p.K;
  std::vector<Acc> acc(M, init);
  if (M == 0 || K == 0) return acc;
  const T* x = p.data.data<T>();
  const bool par = M * K >= kParallelGrain && !omp_in_parallel();
  if (!p.columns) {
    const int64_t nchunk = ceil_div(K, kRowChunk);
    const int64_t tasks = M * nchunk;
    std::vector<Acc> part(nchunk > 1 ? tasks : 0);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t m = t / nchunk, k0 = (t % nchunk) * kRowChunk;
      const Acc r = fold_row(x + m * K + k0, std::min(kRowChunk, K - k0), m);
      if (nchunk == 1) {
        acc[m] = r;
      } else {
        part[t] = r;
      }
    }
    if (nchunk > 1) {
      for (int64_t m = 0; m < M; ++m) {
        Acc r = part[m * nchunk];
        for (int64_t c = 1; c < nchunk; ++c) r = combine(r, part[m * nchunk + c]);
        acc[m] = r;
      }
    }
    return acc;
  }
  // Columns: tasks are (block of kColBlock columns) x (chunk of rows); the rows
  // are split only when there are few blocks, into chunks of at least 64 rows.
  const int64_t nblk = ceil_div(M, kColBlock);
  const int64_t want = std::max<int64_t>(1, 32 / nblk);
  const int64_t krows = ceil_div(K, std::min(ceil_div(K, 64), want));
  const int64_t nk = ceil_div(K, krows);
  std::vector<Acc> part(nk > 1 ? nk * M : 0);
  Acc* dst = nk > 1 ? part.data() : acc.data();
#pragma omp parallel for schedule(static) if (par)
  for (int64_t t = 0; t < nblk * nk; ++t) {
    const int64_t m0 = (t % nblk) * kColBlock, mw = std::min(kColBlock, M - m0);
    const int64_t c = t / nblk, k0 = c * krows, k1 = std::min(K, k0 + krows);
    reduce_columns(x + k0 * M + m0, M, k1 - k0, mw, m0, init, step, dst + c * M + m0);
  }
  if (nk > 1) {
    for (int64_t m = 0; m < M; ++m) {
      Acc r = part[m];
      for (int64_t c = 1; c < nk; ++c) r = combine(r, part[c * M + m]);
      acc[m] = r;
    }
  }
  return acc;
}

// A tensor of p.out_shape holding fin(acc[m], m).
template <class T, class Acc, class Fin>
Tensor finish(const ReducePlan& p, const std::vector<Acc>& acc, Fin fin) {
  Tensor out = Tensor::empty(p.out_shape, dtype_of<T>());
  T* o = out.data<T>();
  for (int64_t m = 0; m < p.M; ++m) o[m] = fin(acc[m], m);
  return out;
}

// Accumulator of a sum: double for floats, int64 for integers.
template <class T>
using SumAcc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

// reduce_engine whose rows fold in lanes with the same step and combine.
template <class T, class Acc, class Step, class Combine>
std::vector<Acc> lanes_engine(const ReducePlan& p, Acc init, Step step, Combine combine) {
  return reduce_engine<T>(p, init, step, combine, [&](const T* x, int64_t n, int64_t m) {
    return fold_lanes(x, n, m, init, step, combine);
  });
}

template <class T>
std::vector<SumAcc<T>> sum_engine(const ReducePlan& p) {
  using Acc = SumAcc<T>;
  return lanes_engine<T>(
      p, Acc(0), [](Acc a, T x, int64_t) { return a + static_cast<Acc>(x); },
      [](Acc a, Acc b) { return a + b; });
}

// Largest value; a NaN wins and stays.
template <class T>
T max_step(T a, T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return blend(std::isnan(x) | (x > a), x, a);  // a bit mask, not a branch
  } else {
    return x > a ? x : a;
  }
}

template <class T>
std::vector<T> max_engine(const char* op, const ReducePlan& p) {
  EMBER_CHECK(p.K > 0 || p.M == 0, op, ": cannot reduce over an empty dimension (output shape ",
              shape_str(p.out_shape), ")");
  const T lowest = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                        : std::numeric_limits<T>::lowest();
  return reduce_engine<T>(
      p, lowest, [](T a, T x, int64_t) { return max_step(a, x); },
      [](T a, T b) { return max_step(a, b); },
      [](const T* x, int64_t n, int64_t) { return fold_max(x, n); });
}

}  // namespace

// out = sum of a over dims (same dtype as a; accumulated in double / int64)
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  const ReducePlan p = plan_reduce("sum", a, dims, keepdim);
  return dispatch_all(a.dtype(), [&](auto tag) -> Tensor {
    using T = decltype(tag);
    return finish<T>(p, sum_engine<T>(p), [](SumAcc<T> s, int64_t) { return static_cast<T>(s); });
  });
}

// out = sum / K, K the number of reduced elements (NaN when K = 0)
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  const ReducePlan p = plan_reduce("mean", a, dims, keepdim);
  return dispatch_float(a.dtype(), "mean", [&](auto tag) -> Tensor {
    using T = decltype(tag);
    const double k = static_cast<double>(p.K);
    return finish<T>(p, sum_engine<T>(p), [k](double s, int64_t) { return static_cast<T>(s / k); });
  });
}

Tensor amax(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  const ReducePlan p = plan_reduce("amax", a, dims, keepdim);
  return dispatch_all(a.dtype(), [&](auto tag) -> Tensor {
    using T = decltype(tag);
    return finish<T>(p, max_engine<T>("amax", p), [](T v, int64_t) { return v; });
  });
}

// out = c + log(sum(exp(a - c))), c = max over the reduced elements (0 when
// the max is not finite: an all -inf row gives -inf, a +inf gives +inf)
Tensor logsumexp(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  const ReducePlan p = plan_reduce("logsumexp", a, dims, keepdim);
  return dispatch_float(a.dtype(), "logsumexp", [&](auto tag) -> Tensor {
    using T = decltype(tag);
    std::vector<T> shift = p.K > 0 ? max_engine<T>("logsumexp", p) : std::vector<T>(p.M, T(0));
    for (T& c : shift) c = std::isfinite(c) ? c : T(0);
    const T* c = shift.data();
    const std::vector<double> s = lanes_engine<T>(
        p, 0.0,
        [c](double acc, T x, int64_t m) { return acc + static_cast<double>(fast::exp(x - c[m])); },
        [](double x, double y) { return x + y; });
    return finish<T>(p, s, [c](double v, int64_t m) {
      return static_cast<T>(std::log(v) + static_cast<double>(c[m]));
    });
  });
}

// Sum over the leading dims g has in excess and over dims that are 1 in shape.
Tensor sum_to_shape(const Tensor& g, const Shape& shape) {
  impl::check_defined("sum_to_shape", g);
  if (g.shape() == shape) return g;
  bool ok = shape.size() <= g.shape().size();
  try {
    ok = ok && broadcast_shapes(shape, g.shape()) == g.shape();
  } catch (const Error&) {
    ok = false;
  }
  EMBER_CHECK(ok, "sum_to_shape: shape ", shape_str(shape),
              " does not broadcast to the gradient's shape ", shape_str(g.shape()));
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < lead; ++d) dims.push_back(d);
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t d = lead + static_cast<int64_t>(i);
    if (shape[i] == 1 && g.size(d) != 1) dims.push_back(d);
  }
  if (dims.empty()) return g.reshape(shape);  // only size-1 dims differ
  return sum(g, dims, true).reshape(shape);
}

// Two vector-friendly passes instead of a branch per element: the lane-wise maxima (and
// whether a NaN occurs), then the first element equal to their maximum (or the first NaN).
template <class T>
int64_t argmax_row(const T* x, int64_t n) {
  constexpr int kLanes = 16;
  T lane[kLanes];
  std::fill(lane, lane + kLanes, x[0]);
  bool nan = false;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
      nan |= impl::is_nan(x[i + j]);
    }
  }
  T mx = lane[0];
  for (int j = 1; j < kLanes; ++j) mx = lane[j] > mx ? lane[j] : mx;
  for (; i < n; ++i) {
    mx = x[i] > mx ? x[i] : mx;
    nan |= impl::is_nan(x[i]);
  }
  if (nan) return std::find_if(x, x + n, [](T v) { return impl::is_nan(v); }) - x;
  return std::find(x, x + n, mx) - x;
}

template int64_t argmax_row<float>(const float*, int64_t);
template int64_t argmax_row<double>(const double*, int64_t);
template int64_t argmax_row<int32_t>(const int32_t*, int64_t);
template int64_t argmax_row<int64_t>(const int64_t*, int64_t);

// Index of the first largest value along the last dim (a NaN counts as largest).
Tensor argmax_last(const Tensor& a) {
  impl::check_defined("argmax_last", a);
  if (a.dim() == 0) return Tensor::scalar(0, DType::Int64);
  const int64_t K = a.size(-1);
  EMBER_CHECK(K > 0, "argmax_last: the last dimension of shape ", shape_str(a.shape()),
              " is empty");
  Shape out_shape = a.shape();
  out_shape.pop_back();
  Tensor out = Tensor::empty(out_shape, DType::Int64);
  const Tensor x = a.contiguous();
  const int64_t M = x.numel() / K;
  int64_t* o = out.data<int64_t>();
  dispatch_all(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
#pragma omp parallel for schedule(static) if (M * K >= kParallelGrain && !omp_in_parallel())
    for (int64_t m = 0; m < M; ++m) o[m] = argmax_row(px + m * K, K);
  });
  return out;
}

namespace {

template <class T>
EMBER_TARGET_CLONES double sum_squares_cloned(const T* __restrict x, int64_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return s;
}

}  // namespace

template <class T>
double sum_squares(const T* x, int64_t n) {
  return sum_squares_cloned(x, n);
}

template double sum_squares<float>(const float*, int64_t);
template double sum_squares<double>(const double*, int64_t);

}  // namespace ember::kernels
