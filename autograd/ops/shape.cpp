// Views (no copy; the output shares the input's storage), joins and dtype
// casts. A view's backward maps g back onto the input: reshape for shape
// changes, the inverse permutation for permutes, and for views that pick a
// part of the input (narrow, slice, select, split) a zero tensor of the input's
// shape with g copied into the same part.
#include <algorithm>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/kernels/reduce.h"
#include "core/kernels/shape_ops.h"

// Shapes: x [...] is the input, y the output, g = dL/dy has y's shape.

namespace ember {
namespace {

// dx for a view that picks part of x: zeros of x's shape, g written into `part`.
template <class PartFn>
Tensor scatter_into_zeros(const Tensor& g, const Shape& in_shape, PartFn part) {
  Tensor dx = Tensor::zeros(in_shape, g.dtype());
  Tensor view = part(dx);
  view.copy_(g);
  return dx;
}

// x.narrow(dim, start, length) recorded under `name` (narrow, split).
Variable record_narrow(const char* name, const Variable& a, int64_t dim, int64_t start,
                       int64_t length) {
  return record(name, {a}, a.data().narrow(dim, start, length),
                [in_shape = a.shape(), dim, start, length](const Tensor& g) -> Grads {
                  return {scatter_into_zeros(g, in_shape, [&](const Tensor& dx) {
                    return dx.narrow(dim, start, length);
                  })};
                });
}

}  // namespace

// y = x with a new shape:  dx = g reshaped to x's shape
Variable view(const Variable& a, const Shape& shape) {
  return record("view", {a}, a.data().view(shape),
                [in_shape = a.shape()](const Tensor& g) -> Grads { return {g.reshape(in_shape)}; });
}

Variable reshape(const Variable& a, const Shape& shape) {
  return record("reshape", {a}, a.data().reshape(shape),
                [in_shape = a.shape()](const Tensor& g) -> Grads { return {g.reshape(in_shape)}; });
}

Variable flatten(const Variable& a) {
  return reshape(a, {a.numel()});
}

// y = x.permute(p):  dx = g.permute(p^-1)
Variable permute(const Variable& a, const std::vector<int64_t>& dims) {
  Tensor y = a.data().permute(dims);  // checks dims
  const int64_t n = a.dim();
  std::vector<int64_t> inverse(dims.size());
  for (int64_t i = 0; i < n; ++i) inverse[dims[i] < 0 ? dims[i] + n : dims[i]] = i;
  return record("permute", {a}, std::move(y),
                [inverse](const Tensor& g) -> Grads { return {g.permute(inverse)}; });
}

// y = x with d0, d1 swapped:  dx = g with d1, d0 swapped
Variable transpose(const Variable& a, int64_t d0, int64_t d1) {
  return record("transpose", {a}, a.data().transpose(d0, d1),
                [d0, d1](const Tensor& g) -> Grads { return {g.transpose(d0, d1)}; });
}

// y = x[start : start + length] along dim
Variable narrow(const Variable& a, int64_t dim, int64_t start, int64_t length) {
  return record_narrow("narrow", a, dim, start, length);
}

// y = x[start : end : step] along dim
Variable slice(const Variable& a, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return record("slice", {a}, a.data().slice(dim, start, end, step),
                [in_shape = a.shape(), dim, start, end, step](const Tensor& g) -> Grads {
                  return {scatter_into_zeros(g, in_shape, [&](const Tensor& dx) {
                    return dx.slice(dim, start, end, step);
                  })};
                });
}

// y = x[index] along dim (dim removed)
Variable select(const Variable& a, int64_t dim, int64_t index) {
  return record("select", {a}, a.data().select(dim, index),
                [in_shape = a.shape(), dim, index](const Tensor& g) -> Grads {
                  return {scatter_into_zeros(
                      g, in_shape, [&](const Tensor& dx) { return dx.select(dim, index); })};
                });
}

// y = x broadcast to shape (stride 0):  dx = g summed over the broadcast dims
Variable expand(const Variable& a, const Shape& shape) {
  return record("expand", {a}, a.data().expand(shape),
                [in_shape = a.shape()](const Tensor& g) -> Grads {
                  return {kernels::sum_to_shape(g, in_shape)};
                });
}

// y = x without / with a size-1 dim:  dx = g reshaped to x's shape
Variable squeeze(const Variable& a, int64_t dim) {
  return record("squeeze", {a}, a.data().squeeze(dim),
                [in_shape = a.shape()](const Tensor& g) -> Grads { return {g.reshape(in_shape)}; });
}

Variable unsqueeze(const Variable& a, int64_t dim) {
  return record("unsqueeze", {a}, a.data().unsqueeze(dim),
                [in_shape = a.shape()](const Tensor& g) -> Grads { return {g.reshape(in_shape)}; });
}

// y = x laid out contiguously (x itself when it already is):  dx = g
Variable contiguous(const Variable& a) {
  return record("contiguous", {a}, a.data().contiguous(),
                [](const Tensor& g) -> Grads { return {g}; });
}

// y = [x_0, x_1, ...] along dim:  dx_i = the i-th piece of g along dim (a view)
Variable cat(const std::vector<Variable>& xs, int64_t dim) {
  std::vector<Tensor> data;
  std::vector<int64_t> sizes;
  data.reserve(xs.size());
  for (const Variable& x : xs) data.push_back(x.data());
  Tensor y = kernels::cat(data, dim);
  for (const Variable& x : xs) sizes.push_back(x.size(dim));
  return record("cat", xs, std::move(y), [sizes, dim](const Tensor& g) -> Grads {
    return kernels::split_sizes(g, sizes, dim);
  });
}

// y = x_0, x_1, ... joined along a new dim:  dx_i = g.select(dim, i)
Variable stack(const std::vector<Variable>& xs, int64_t dim) {
  std::vector<Tensor> data;
  data.reserve(xs.size());
  for (const Variable& x : xs) data.push_back(x.data());
  Tensor y = kernels::stack(data, dim);
  const int64_t new_dim = dim < 0 ? dim + y.dim() : dim;
  return record("stack", xs, std::move(y), [n = xs.size(), new_dim](const Tensor& g) -> Grads {
    Grads out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) out.push_back(g.select(new_dim, static_cast<int64_t>(i)));
    return out;
  });
}

// Pieces of `size` along dim, each a narrow view recorded on its own.
std::vector<Variable> split(const Variable& a, int64_t size, int64_t dim) {
  EMBER_CHECK(size > 0, "split: piece size must be positive, got ", size);
  const int64_t n = a.size(dim);
  std::vector<Variable> pieces;
  for (int64_t start = 0; start < n; start += size) {
    pieces.push_back(record_narrow("split", a, dim, start, std::min(size, n - start)));
  }
  return pieces;
}

// y = x cast to dtype:  dx = g cast back
Variable to_dtype(const Variable& a, DType dtype) {
  EMBER_CHECK(is_floating(a.dtype()) && is_floating(dtype), "to_dtype: casts between float32 and ",
              "float64 only, got ", dtype_name(a.dtype()), " to ", dtype_name(dtype));
  return record("to_dtype", {a}, a.data().to(dtype),
                [in_dtype = a.dtype()](const Tensor& g) -> Grads { return {g.to(in_dtype)}; });
}

}  // namespace ember
