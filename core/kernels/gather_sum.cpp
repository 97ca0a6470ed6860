// Weighted gather-sum and its gradients (see gather_sum.h).
#include "core/kernels/gather_sum.h"

#include <omp.h>

#include <vector>

#include "core/strided_loop.h"

namespace ember::kernels {
namespace {

// Checks shapes, dtypes and that each slot names a distinct row of src;
// returns the slots as contiguous int64.
Tensor checked_slots(const Tensor& src, const Tensor& slots, const Tensor& weights) {
  EMBER_CHECK(src.defined() && slots.defined() && weights.defined(),
              "gather_weighted_sum: undefined tensor");
  EMBER_CHECK(src.dim() == 2, "gather_weighted_sum: src must be [R, C], got ", shape_str(src.shape()));
  EMBER_CHECK(slots.dim() == 2, "gather_weighted_sum: slots must be [N, S], got ",
              shape_str(slots.shape()));
  EMBER_CHECK(weights.shape() == slots.shape(), "gather_weighted_sum: weights ",
              shape_str(weights.shape()), " do not match slots ", shape_str(slots.shape()));
  EMBER_CHECK(weights.dtype() == src.dtype(), "gather_weighted_sum: weights are ",
              dtype_name(weights.dtype()), " but src is ", dtype_name(src.dtype()));
  EMBER_CHECK(slots.dtype() == DType::Int64 || slots.dtype() == DType::Int32,
              "gather_weighted_sum: slots must be int64 or int32, got ", dtype_name(slots.dtype()));
  const Tensor idx = slots.to(DType::Int64).contiguous();
  const int64_t R = src.size(0), n = idx.numel();
  const int64_t* p = idx.data<int64_t>();
  std::vector<char> taken(static_cast<size_t>(R), 0);
  for (int64_t i = 0; i < n; ++i) {
    EMBER_CHECK(p[i] >= 0 && p[i] < R, "gather_weighted_sum: slot ", p[i],
                " is out of range for src with ", R, " rows");
    EMBER_CHECK(!taken[p[i]], "gather_weighted_sum: row ", p[i], " of src is named by two slots");
    taken[p[i]] = 1;
  }
  return idx;
}

}  // namespace

Tensor gather_weighted_sum(const Tensor& src, const Tensor& slots, const Tensor& weights) {
  const Tensor idx = checked_slots(src, slots, weights);
  const int64_t N = slots.size(0), S = slots.size(1), C = src.size(1);
  Tensor out = Tensor::empty({N, C}, src.dtype());
  const Tensor sc = src.contiguous(), wc = weights.contiguous();
  dispatch_float(src.dtype(), "gather_weighted_sum", [&](auto tag) {
    using T = decltype(tag);
    const T *s = sc.data<T>(), *w = wc.data<T>();
    const int64_t* slot = idx.data<int64_t>();
    T* o = out.data<T>();
#pragma omp parallel for schedule(static) if (N * S * C > kParallelGrain && !omp_in_parallel())
    for (int64_t n = 0; n < N; ++n) {
      T* on = o + n * C;
      for (int64_t c = 0; c < C; ++c) on[c] = T(0);
      for (int64_t k = 0; k < S; ++k) {
        const T wk = w[n * S + k];
        const T* row = s + slot[n * S + k] * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) on[c] += wk * row[c];
      }
    }
  });
  return out;
}

GatherSumGrads gather_weighted_sum_backward(const Tensor& g, const Tensor& src, const Tensor& slots,
                                            const Tensor& weights, bool need_src,
                                            bool need_weights) {
  const Tensor idx = checked_slots(src, slots, weights);
  const int64_t N = slots.size(0), S = slots.size(1), R = src.size(0), C = src.size(1);
  EMBER_CHECK(g.shape() == Shape({N, C}), "gather_weighted_sum: gradient is ", shape_str(g.shape()),
              ", expected [", N, ", ", C, "]");
  GatherSumGrads out;
  // Rows no slot names get no gradient from the sum: start d_src at zero only then.
  if (need_src) out.src = N * S == R ? Tensor::empty(src.shape(), src.dtype()) : Tensor::zeros(src.shape(), src.dtype());
  if (need_weights) out.weights = Tensor::empty(slots.shape(), src.dtype());
  const Tensor gc = g.contiguous(), sc = src.contiguous(), wc = weights.contiguous();
  dispatch_float(src.dtype(), "gather_weighted_sum", [&](auto tag) {
    using T = decltype(tag);
    const T *gp = gc.data<T>(), *s = sc.data<T>(), *w = wc.data<T>();
    const int64_t* slot = idx.data<int64_t>();
    T* ds = need_src ? out.src.data<T>() : nullptr;
    T* dw = need_weights ? out.weights.data<T>() : nullptr;
#pragma omp parallel for schedule(static) if (N * S * C > kParallelGrain && !omp_in_parallel())
    for (int64_t n = 0; n < N; ++n) {
      const T* gn = gp + n * C;
      for (int64_t k = 0; k < S; ++k) {
        const int64_t r = slot[n * S + k];
        if (ds) {
          const T wk = w[n * S + k];
          T* d = ds + r * C;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) d[c] = wk * gn[c];
        }
        if (dw) {
          const T* row = s + r * C;
          T dot = 0;
#pragma omp simd reduction(+ : dot)
          for (int64_t c = 0; c < C; ++c) dot += gn[c] * row[c];
          dw[n * S + k] = dot;
        }
      }
    }
  });
  return out;
}

}  // namespace ember::kernels
