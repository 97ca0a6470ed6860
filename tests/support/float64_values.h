// float64 tensors from and to plain vectors, for tests that state their expected
// numbers as lists (worked by hand or by an independent float64 computation).
#pragma once
#include <vector>

#include "core/tensor.h"

namespace ember::testing {

inline Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return Tensor::from_vector<double>(v, shape);
}

// Any tensor's elements as float64, in row-major order.
inline std::vector<double> values(const Tensor& t) {
  return t.contiguous().to(DType::Float64).to_vector<double>();
}

}  // namespace ember::testing
