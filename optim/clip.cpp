// Global gradient norm (accumulated in double) and in-place scaling.
#include "optim/clip.h"

#include <cmath>

#include "core/kernels/elementwise.h"
#include "core/profiler.h"

namespace ember::optim {

double grad_norm(const std::vector<Variable>& params) {
  EMBER_PROFILE_SCOPE(prof::Family::Optimizer);
  double total = 0;
  for (const Variable& p : params) {
    if (!p.grad().defined()) continue;
    const Tensor g = p.grad().contiguous();
    dispatch_float(g.dtype(), "grad_norm", [&](auto tag) {
      using T = decltype(tag);
      const T* d = g.data<T>();
      const int64_t n = g.numel();
      double s = 0;
#pragma omp parallel for reduction(+ : s) if (n > 32768)
      for (int64_t i = 0; i < n; ++i) s += static_cast<double>(d[i]) * d[i];
      total += s;
    });
  }
  return std::sqrt(total);
}

double clip_grad_norm(const std::vector<Variable>& params, double max_norm) {
  EMBER_PROFILE_SCOPE(prof::Family::Optimizer);
  const double norm = grad_norm(params);
  if (max_norm <= 0) return norm;
  const double coef = max_norm / (norm + 1e-6);
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
