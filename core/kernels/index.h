// Index kernels. Index tensors are int32 or int64; an index out of range is an
// Error naming the index and the size.
#pragma once
#include <utility>

#include "core/tensor.h"

namespace ember::kernels {

// out[...] = a.select(dim, index[...]): shape a.shape with dim replaced by index.shape.
// With dim = 0 on a [V, D] table this is the embedding lookup.
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
// out = base + scatter: out.select(dim, index[i]) += src.select(dim, i) (repeated indices sum).
// Its own transpose is index_select; it is the backward of embedding.
Tensor index_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src);
void index_add_(Tensor& base, int64_t dim, const Tensor& index, const Tensor& src);
// base.select(dim, v) += (the src slices with index v summed first, in ascending order). On a
// zero base it equals index_add_; on a pending gradient it equals adding the gradient index_add_
// builds on zeros, without that dense temporary (the embedding's backward into a tied table).
void index_add_summed_(Tensor& base, int64_t dim, const Tensor& index, const Tensor& src);
// torch.gather: out[i][j] = a[i][index[i][j]] along dim; index has a's rank.
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
// torch.scatter_add: out = base; out[i][index[i][j]] += src[i][j] along dim.
Tensor scatter_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src);
// The k largest values along the last dim, sorted descending; ties go to the
// lower index first. Returns (values, int64 indices), both [..., k].
std::pair<Tensor, Tensor> topk(const Tensor& a, int64_t k);

}  // namespace ember::kernels
