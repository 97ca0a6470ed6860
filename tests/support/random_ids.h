// Token ids for model tests: [B, T] int64, uniform in [0, V), drawn from `seed`.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace ember::testing {

inline Tensor random_ids(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  return Tensor::rand({B, T}, seed, 0, DType::Float64, 0, static_cast<double>(V)).to(DType::Int64);
}

}  // namespace ember::testing
