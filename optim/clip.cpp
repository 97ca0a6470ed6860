// Global gradient norm (accumulated in double, one pass) and in-place scaling.
#include "optim/clip.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/kernels/elementwise.h"
#include "core/kernels/reduce.h"
#include "core/threads.h"
#include "optim/optimizer.h"

namespace ember::optim {

namespace {

// One gradient's elements, as float or double.
struct GradSpan {
  const void* data;
  int64_t n;
  bool is_double;
};

}  // namespace

// All gradients in one OpenMP region, the concatenated elements split evenly
// between threads (one pass over the gradients, small tensors not alone).
double grad_norm(const std::vector<Variable>& params) {
  EMBER_PROFILE_SCOPE(kOptimizerFamily);
  std::vector<Tensor> keep;
  std::vector<GradSpan> spans;
  int64_t total_n = 0;
  for (const Variable& p : params) {
    if (!p.grad().defined()) continue;
    keep.push_back(p.grad().contiguous());
    const Tensor& g = keep.back();
    dispatch_float(g.dtype(), "grad_norm", [&](auto tag) {
      using T = decltype(tag);
      spans.push_back({g.data<T>(), g.numel(), std::is_same_v<T, double>});
    });
    total_n += g.numel();
  }
  double total = 0;
#pragma omp parallel reduction(+ : total) if (total_n > kParallelGrain)
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t chunk = (total_n + nt - 1) / nt;
    const int64_t lo = std::min(total_n, t * chunk), hi = std::min(total_n, lo + chunk);
    int64_t base = 0;
    for (const GradSpan& sp : spans) {
      const int64_t b = std::max(lo, base), e = std::min(hi, base + sp.n);
      if (b < e) {
        total += sp.is_double ? kernels::sum_squares(static_cast<const double*>(sp.data) + (b - base), e - b)
                              : kernels::sum_squares(static_cast<const float*>(sp.data) + (b - base), e - b);
      }
      base += sp.n;
    }
  }
  return std::sqrt(total);
}

double clip_coefficient(double norm, double max_norm) {
  return max_norm > 0 ? std::min(1.0, max_norm / (norm + 1e-6)) : 1.0;
}

double clip_grad_norm(const std::vector<Variable>& params, double max_norm) {
  EMBER_PROFILE_SCOPE(kOptimizerFamily);
  const double norm = grad_norm(params);
  const double coef = clip_coefficient(norm, max_norm);
  if (coef < 1.0) {
    for (const Variable& p : params) {
      if (!p.grad().defined()) continue;
      Tensor g = p.grad();
      kernels::mul_scalar_(g, coef);
    }
  }
  return norm;
}

}  // namespace ember::optim
