// First non-finite parameter (see finite_parameters.h).
#include "apps/train/finite_parameters.h"

#include <cmath>

#include "core/threads.h"

namespace ember::apps {

std::string first_non_finite_parameter(const std::vector<std::pair<std::string, Variable>>& named) {
  for (const auto& [name, p] : named) {
    const Tensor t = p.data().contiguous();
    if (t.dtype() == DType::Float64) {
      for (double v : t.to_vector<double>()) {
        if (!std::isfinite(v)) return name;
      }
      continue;
    }
    if (t.dtype() != DType::Float32) continue;
    const float* x = t.data<float>();
    const int64_t n = t.numel();
    float sum = 0;  // x * 0 is 0 for finite x and NaN for NaN or +-inf
#pragma omp parallel for simd reduction(+ : sum) if (n > 2 * kParallelGrain)
    for (int64_t i = 0; i < n; ++i) sum += x[i] * 0.0f;
    if (sum != 0.0f) return name;
  }
  return "";
}

}  // namespace ember::apps
