// Reading the per-token tensors of RL (docs/model.md#rl-from-a-reward) as doubles, with their
// checks: a [B, T] completion-token mask (0 or 1) and [B, T] or [B] values of a given shape,
// each refused in one line naming the function, the tensor and the shape it must have.
#pragma once
#include <vector>

#include "core/tensor.h"

namespace ember::nn {

// mask [B, T] (any B, T; or exactly `shape`), any dtype, every element 0 or 1 -> its values in
// row-major order.
std::vector<double> token_mask(const char* fn, const Tensor& mask);
std::vector<double> token_mask(const char* fn, const Tensor& mask, const Shape& shape);
// t of exactly `shape` (any numeric dtype) -> its values in row-major order.
std::vector<double> token_values(const char* fn, const char* name, const Tensor& t,
                                 const Shape& shape);
// B T values -> a [B, T] tensor of dtype.
Tensor tensor_of(const std::vector<double>& v, const Shape& shape, DType dtype);

}  // namespace ember::nn
