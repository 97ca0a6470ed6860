// Joining and splitting: cat and stack copy, split returns views.
#pragma once
#include <vector>

#include "core/tensor.h"

namespace ember::kernels {

// Concatenates along dim; all other sizes and the dtype must match.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
// Joins along a new dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
// Views of consecutive pieces along dim, each `size` long (the last may be shorter).
std::vector<Tensor> split(const Tensor& a, int64_t size, int64_t dim);
// Views of pieces of the given sizes along dim (they must sum to the size).
std::vector<Tensor> split_sizes(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim);

}  // namespace ember::kernels
