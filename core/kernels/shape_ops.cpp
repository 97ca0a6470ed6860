// Joining and splitting along a dim: cat and stack copy into one new tensor
// (each input lands in a narrow() view of the output), split and split_sizes
// return narrow() views that share the input's storage.
//   cat: out.narrow(dim, off_i, n_i) = t_i, off_i = n_0 + ... + n_{i-1}
#include "core/kernels/shape_ops.h"

#include <algorithm>

namespace ember::kernels {

namespace {
int64_t wrap(int64_t dim, int64_t ndim, const char* op, const Shape& shape) {
  EMBER_CHECK(dim >= -ndim && dim < ndim, op, ": dim ", dim, " is out of range for shape ",
              shape_str(shape));
  return dim < 0 ? dim + ndim : dim;
}
}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), "cat: expected at least one tensor");
  const Tensor& first = tensors.front();
  EMBER_CHECK(first.defined(), "cat: tensor 0 is undefined");
  EMBER_CHECK(first.dim() > 0, "cat: cannot concatenate 0-dim tensors");
  const int64_t d = wrap(dim, first.dim(), "cat", first.shape());
  Shape out_shape = first.shape();
  out_shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    EMBER_CHECK(t.defined(), "cat: tensor ", i, " is undefined");
    EMBER_CHECK(t.dtype() == first.dtype(), "cat: tensor ", i, " is ", dtype_name(t.dtype()),
                " but tensor 0 is ", dtype_name(first.dtype()));
    bool same = t.dim() == first.dim();
    for (int64_t k = 0; same && k < t.dim(); ++k) same = k == d || t.size(k) == first.size(k);
    EMBER_CHECK(same, "cat: tensor ", i, " has shape ", shape_str(t.shape()), " but tensor 0 has ",
                shape_str(first.shape()), " (only dim ", d, " may differ)");
    out_shape[d] += t.size(d);
  }
  Tensor out = Tensor::empty(out_shape, first.dtype());
  int64_t off = 0;
  for (const Tensor& t : tensors) {
    if (t.numel() > 0) out.narrow(d, off, t.size(d)).copy_(t);
    off += t.size(d);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), "stack: expected at least one tensor");
  EMBER_CHECK(tensors.front().defined(), "stack: tensor 0 is undefined");
  const Shape& shape = tensors.front().shape();
  const int64_t d = wrap(dim, tensors.front().dim() + 1, "stack", shape);
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EMBER_CHECK(tensors[i].defined() && tensors[i].shape() == shape, "stack: tensor ", i,
                " has shape ", tensors[i].defined() ? shape_str(tensors[i].shape()) : "(undefined)",
                " but tensor 0 has ", shape_str(shape));
    parts.push_back(tensors[i].unsqueeze(d));
  }
  return cat(parts, d);
}

std::vector<Tensor> split(const Tensor& a, int64_t size, int64_t dim) {
  const int64_t d = wrap(dim, a.dim(), "split", a.shape());
  const int64_t n = a.size(d);
  EMBER_CHECK(size > 0 || (size == 0 && n == 0), "split: piece size must be positive, got ", size,
              " for dim ", d, " of shape ", shape_str(a.shape()));
  std::vector<Tensor> out;
  if (n == 0) {
    out.push_back(a);
    return out;
  }
  for (int64_t start = 0; start < n; start += size) {
    out.push_back(a.narrow(d, start, std::min(size, n - start)));
  }
  return out;
}

std::vector<Tensor> split_sizes(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim) {
  const int64_t d = wrap(dim, a.dim(), "split_sizes", a.shape());
  int64_t total = 0;
  for (int64_t s : sizes) {
    EMBER_CHECK(s >= 0, "split_sizes: negative size ", s, " in ", shape_str(sizes));
    total += s;
  }
  EMBER_CHECK(total == a.size(d), "split_sizes: sizes ", shape_str(sizes), " sum to ", total,
              " but dim ", d, " of shape ", shape_str(a.shape()), " has size ", a.size(d));
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(a.narrow(d, start, s));
    start += s;
  }
  return out;
}

}  // namespace ember::kernels
