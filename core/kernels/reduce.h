// Reductions over any set of dimensions (negative dims count from the end;
// an empty dims list reduces over all), with keepdim as in PyTorch.
// Accumulation is in double for float32 and float64 alike.
#pragma once
#include <vector>

#include "core/tensor.h"

namespace ember::kernels {

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Largest value (NaN propagates).
Tensor amax(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// log(sum(exp(a))), computed stably around the max.
Tensor logsumexp(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Sums a broadcast gradient back to `shape` (the inverse of expand): leading
// dims are summed away, dims that were 1 in `shape` are summed with keepdim.
Tensor sum_to_shape(const Tensor& g, const Shape& shape);
// Index of the largest value along the last dim (ties: lower index), int64.
Tensor argmax_last(const Tensor& a);
// argmax_last's row: the first index of the largest of x[0, n), n > 0, a NaN counting as
// largest (so the first NaN when there is one). Defined for float, double, int32 and int64.
template <class T>
int64_t argmax_row(const T* x, int64_t n);
// sum of x[i]^2 over n contiguous values, accumulated in double lanes
// (vectorised, compiled per ISA): the row kernel of norms and gradient norms.
// Defined for float and double.
template <class T>
double sum_squares(const T* x, int64_t n);

}  // namespace ember::kernels
