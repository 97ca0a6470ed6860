// Reductions over a set of dims (empty = all, negative counts from the end).
// Every backward first views g with the reduced dims kept as size 1 (gk),
// then broadcasts it back over the input: sum and mean return an expanded
// view (no copy); amax and logsumexp weight it per element.
#include "core/kernels/reduce.h"

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/kernels/elementwise.h"

// Shapes: x [...] reduced over dims R to y (R dropped, or kept as 1 with keepdim).

namespace ember {
namespace {

// x's shape with every reduced dim set to 1 (the keepdim shape of y).
Shape keepdim_shape(const Shape& shape, const std::vector<int64_t>& dims) {
  const int64_t n = static_cast<int64_t>(shape.size());
  Shape out = shape;
  if (dims.empty()) {
    for (int64_t& s : out) s = 1;
    return out;
  }
  for (int64_t d : dims) {
    EMBER_CHECK(d >= -n && d < n, "reduction: dimension ", d, " is out of range for shape ",
                shape_str(shape));
    out[d < 0 ? d + n : d] = 1;
  }
  return out;
}

// Number of elements each output element reduces over.
int64_t reduced_count(const Shape& shape, const Shape& kept) {
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d) n *= kept[d] == 1 ? shape[d] : 1;
  return n;
}

// t (y's shape, or a saved y) with the reduced dims kept as size 1.
Tensor keep_dims(const Tensor& t, const Shape& kept) { return t.reshape(kept); }

}  // namespace

// y = sum_R x:  dx = gk broadcast over x
Variable sum(const Variable& a, const std::vector<int64_t>& dims, bool keepdim) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  const Shape in_shape = a.shape(), kept = keepdim_shape(in_shape, dims);
  return record(
      "sum", {a}, kernels::sum(a.data(), dims, keepdim),
      [in_shape, kept](const Tensor& g) -> Grads { return {keep_dims(g, kept).expand(in_shape)}; });
}

// y = sum_R x / n:  dx = gk / n broadcast over x
Variable mean(const Variable& a, const std::vector<int64_t>& dims, bool keepdim) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  const Shape in_shape = a.shape(), kept = keepdim_shape(in_shape, dims);
  const double scale = 1.0 / static_cast<double>(reduced_count(in_shape, kept));
  return record("mean", {a}, kernels::mean(a.data(), dims, keepdim),
                [in_shape, kept, scale](const Tensor& g) -> Grads {
                  return {kernels::mul_scalar(keep_dims(g, kept), scale).expand(in_shape)};
                });
}

// y = max_R x:  dx = gk [x == yk] / count(x == yk)  (ties share the gradient)
Variable amax(const Variable& a, const std::vector<int64_t>& dims, bool keepdim) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  const Shape kept = keepdim_shape(a.shape(), dims);
  Tensor y = kernels::amax(a.data(), dims, keepdim);
  return record(
      "amax", {a}, y,
      [dims, kept, sx = SavedTensor(a.data()), sy = SavedTensor(y)](const Tensor& g) -> Grads {
        const Tensor& x = sx.get();
        Tensor mask = kernels::eq(x, keep_dims(sy.get(), kept)).to(g.dtype());
        Tensor count = kernels::sum(mask, dims, true);
        return {kernels::mul(mask, kernels::div(keep_dims(g, kept), count))};
      });
}

// y = log sum_R e^x:  dx = gk e^(x - yk)  (gk times the softmax over R)
Variable logsumexp(const Variable& a, const std::vector<int64_t>& dims, bool keepdim) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  const Shape kept = keepdim_shape(a.shape(), dims);
  Tensor y = kernels::logsumexp(a.data(), dims, keepdim);
  return record("logsumexp", {a}, y,
                [kept, sx = SavedTensor(a.data()), sy = SavedTensor(y)](const Tensor& g) -> Grads {
                  Tensor p = kernels::exp(kernels::sub(sx.get(), keep_dims(sy.get(), kept)));
                  return {kernels::mul(p, keep_dims(g, kept))};
                });
}

}  // namespace ember
