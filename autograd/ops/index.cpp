// Indexing ops. Index tensors (ids, indices) are plain int Tensors, never
// differentiated; they are saved as SavedTensor so an in-place edit before
// backward is caught. The pairs are each other's transposes:
// index_select <-> index_add, gather <-> scatter_add.
#include "core/kernels/gather_sum.h"
#include "core/kernels/index.h"

#include "autograd/node.h"
#include "autograd/ops.h"

// Shapes: V vocab, C channels; I = index.shape; x [...] is the indexed input.

namespace ember {
namespace {

// y = x.index_select(dim, index) recorded under `name` (index_select, embedding):
//   dx = zeros(x) index_add'ed with g along dim (repeated indices sum);
//   g is [x before dim, I, x after dim], the shape index_add takes for src.
Variable record_index_select(const char* name, const Variable& a, int64_t dim,
                             const Tensor& index) {
  return record(name, {a}, kernels::index_select(a.data(), dim, index),
                [in_shape = a.shape(), dim, si = SavedTensor(index)](const Tensor& g) -> Grads {
                  Tensor dx = Tensor::zeros(in_shape, g.dtype());
                  kernels::index_add_(dx, dim, si.get(), g);
                  return {dx};
                });
}

}  // namespace

// y[..., c] = weight[ids[...], c]:  dweight[v] = sum of g rows whose id is v
Variable embedding(const Variable& weight, const Tensor& ids) {
  EMBER_PROFILE_SCOPE(kEmbeddingFamily);
  EMBER_CHECK(weight.dim() == 2, "embedding: weight must be [V, C], got shape ",
              shape_str(weight.shape()));
  return record_index_select("embedding", weight, 0, ids);
}

// y = x.index_select(dim, index), index [I]
Variable index_select(const Variable& a, int64_t dim, const Tensor& index) {
  return record_index_select("index_select", a, dim, index);
}

// y = base; y.select(dim, index[i]) += src.select(dim, i):
//   dbase = g, dsrc = g.index_select(dim, index)
Variable index_add(const Variable& base, int64_t dim, const Tensor& index, const Variable& src) {
  const bool need_src = needs_grad(src);
  return record("index_add", {base, src}, kernels::index_add(base.data(), dim, index, src.data()),
                [need_src, dim, si = SavedTensor(index)](const Tensor& g) -> Grads {
                  return {g, need_src ? kernels::index_select(g, dim, si.get()) : Tensor()};
                });
}

// y[i][j] = x[i][index[i][j]] along dim:  dx = zeros(x) scatter_add'ed with g
Variable gather(const Variable& a, int64_t dim, const Tensor& index) {
  return record(
      "gather", {a}, kernels::gather(a.data(), dim, index),
      [in_shape = a.shape(), dim, si = SavedTensor(index)](const Tensor& g) -> Grads {
        return {kernels::scatter_add(Tensor::zeros(in_shape, g.dtype()), dim, si.get(), g)};
      });
}

// y = base; y[i][index[i][j]] += src[i][j] along dim:
//   dbase = g, dsrc = g.gather(dim, index) (zero where src reaches past index)
Variable scatter_add(const Variable& base, int64_t dim, const Tensor& index, const Variable& src) {
  const bool need_src = needs_grad(src);
  return record(
      "scatter_add", {base, src}, kernels::scatter_add(base.data(), dim, index, src.data()),
      [need_src, dim, src_shape = src.shape(), si = SavedTensor(index)](const Tensor& g) -> Grads {
        if (!need_src) return {g, Tensor()};
        const Tensor& idx = si.get();
        Tensor dsrc = kernels::gather(g, dim, idx);
        if (dsrc.shape() != src_shape) {  // index smaller than src: pad with zeros
          Tensor full = Tensor::zeros(src_shape, g.dtype());
          Tensor part = full;
          for (int64_t d = 0; d < idx.dim(); ++d) part = part.narrow(d, 0, idx.size(d));
          part.copy_(dsrc);
          dsrc = full;
        }
        return {g, dsrc};
      });
}

// values = x.gather(-1, indices) for the k largest along the last dim:
//   dx = zeros(x) scatter_add'ed with g at indices
std::pair<Variable, Tensor> topk(const Variable& a, int64_t k) {
  auto [values, indices] = kernels::topk(a.data(), k);
  Variable v =
      record("topk", {a}, std::move(values),
             [in_shape = a.shape(), si = SavedTensor(indices)](const Tensor& g) -> Grads {
               return {kernels::scatter_add(Tensor::zeros(in_shape, g.dtype()), -1, si.get(), g)};
             });
  return {std::move(v), std::move(indices)};
}

// out[n] = sum_s w[n, s] src[slots[n, s]]:
//   dsrc[slots[n, s]] = w[n, s] g[n],  dw[n, s] = g[n] . src[slots[n, s]]
Variable gather_weighted_sum(const Variable& src, const Tensor& slots, const Variable& weights) {
  const bool need_src = needs_grad(src), need_w = needs_grad(weights);
  return record(
      "gather_weighted_sum", {src, weights},
      kernels::gather_weighted_sum(src.data(), slots, weights.data()),
      [need_src, need_w, ss = SavedTensor(src.data()), si = SavedTensor(slots),
       sw = SavedTensor(weights.data())](const Tensor& g) -> Grads {
        auto d = kernels::gather_weighted_sum_backward(g, ss.get(), si.get(), sw.get(), need_src,
                                                       need_w);
        return {std::move(d.src), std::move(d.weights)};
      });
}

}  // namespace ember
