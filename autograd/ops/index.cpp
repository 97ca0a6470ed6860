// Indexing ops. Index tensors (ids, indices) are plain int Tensors, never
// differentiated; they are saved as SavedTensor so an in-place edit before
// backward is caught. The pairs are each other's transposes:
// index_select <-> index_add, gather <-> scatter_add. The weighted gather-sum
// of the MoE combine step keeps its kernel here (its only op).
#include <omp.h>

#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/kernels/index.h"
#include "core/threads.h"

// Shapes: V vocab, C channels; I = index.shape; x [...] is the indexed input.

namespace ember {
namespace {

// y = x.index_select(dim, index) recorded under `name` (index_select, embedding):
//   dx = zeros(x) index_add'ed with g along dim (repeated indices sum);
//   g is [x before dim, I, x after dim], the shape index_add takes for src.
// Into a pending gradient P (a tied embedding's head gradient), P[v] += (sum of v's rows) in
// place: the same sums as P + dx, without the dense dx.
Variable record_index_select(const char* name, const Variable& a, int64_t dim,
                             const Tensor& index) {
  const SavedTensor si(index);
  return record(
      name, {a}, kernels::index_select(a.data(), dim, index),
      [in_shape = a.shape(), dim, si](const Tensor& g) -> Grads {
        Tensor dx = Tensor::zeros(in_shape, g.dtype());
        kernels::index_add_(dx, dim, si.get(), g);
        return {dx};
      },
      [in_shape = a.shape(), dim, si](const Tensor& g, Tensor& slot) {
        if (slot.shape() != in_shape || slot.dtype() != g.dtype()) return false;
        kernels::index_add_summed_(slot, dim, si.get(), g);
        return true;
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

namespace {

// --- weighted gather-sum: the combine step of a mixture of experts ---------------------------------
// Row slots[n, s] of src is token n's output from its s-th chosen expert:
//   out[n] = sum_s weights[n, s] src[slots[n, s]]
// Every src row belongs to at most one (n, s), so the gradients are gathers and
// scatters without collisions, parallel over tokens and independent of the
// thread count:
//   d_src[slots[n, s]] = weights[n, s] g[n]   (zero on rows no slot names)
//   d_weights[n, s]    = g[n] . src[slots[n, s]]
// Shapes: src [R, C], slots int64 (or int32) [N, S], weights [N, S], out and g [N, C].

struct GatherSumGrads {
  Tensor src, weights;  // undefined when not asked for
};

// Checks shapes, dtypes and that each slot names a distinct row of src;
// returns the slots as contiguous int64.
Tensor checked_slots(const Tensor& src, const Tensor& slots, const Tensor& weights) {
  EMBER_CHECK(src.defined() && slots.defined() && weights.defined(),
              "gather_weighted_sum: undefined tensor");
  EMBER_CHECK(src.dim() == 2, "gather_weighted_sum: src must be [R, C], got ", shape_str(src.shape()));
  EMBER_CHECK(slots.dim() == 2, "gather_weighted_sum: slots must be [N, S], got ",
              shape_str(slots.shape()));
  EMBER_CHECK(weights.shape() == slots.shape(), "gather_weighted_sum: weights ",
              shape_str(weights.shape()), " do not match slots ", shape_str(slots.shape()));
  EMBER_CHECK(weights.dtype() == src.dtype(), "gather_weighted_sum: weights are ",
              dtype_name(weights.dtype()), " but src is ", dtype_name(src.dtype()));
  EMBER_CHECK(slots.dtype() == DType::Int64 || slots.dtype() == DType::Int32,
              "gather_weighted_sum: slots must be int64 or int32, got ", dtype_name(slots.dtype()));
  const Tensor idx = slots.to(DType::Int64).contiguous();
  const int64_t R = src.size(0), n = idx.numel();
  const int64_t* p = idx.data<int64_t>();
  std::vector<char> taken(static_cast<size_t>(R), 0);
  for (int64_t i = 0; i < n; ++i) {
    EMBER_CHECK(p[i] >= 0 && p[i] < R, "gather_weighted_sum: slot ", p[i],
                " is out of range for src with ", R, " rows");
    EMBER_CHECK(!taken[p[i]], "gather_weighted_sum: row ", p[i], " of src is named by two slots");
    taken[p[i]] = 1;
  }
  return idx;
}

Tensor gather_weighted_sum_forward(const Tensor& src, const Tensor& slots, const Tensor& weights) {
  const Tensor idx = checked_slots(src, slots, weights);
  const int64_t N = slots.size(0), S = slots.size(1), C = src.size(1);
  Tensor out = Tensor::empty({N, C}, src.dtype());
  const Tensor sc = src.contiguous(), wc = weights.contiguous();
  dispatch_float(src.dtype(), "gather_weighted_sum", [&](auto tag) {
    using T = decltype(tag);
    const T *s = sc.data<T>(), *w = wc.data<T>();
    const int64_t* slot = idx.data<int64_t>();
    T* o = out.data<T>();
#pragma omp parallel for schedule(static) if (N * S * C > kParallelGrain && !omp_in_parallel())
    for (int64_t n = 0; n < N; ++n) {
      T* on = o + n * C;
      for (int64_t c = 0; c < C; ++c) on[c] = T(0);
      for (int64_t k = 0; k < S; ++k) {
        const T wk = w[n * S + k];
        const T* row = s + slot[n * S + k] * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) on[c] += wk * row[c];
      }
    }
  });
  return out;
}

GatherSumGrads gather_weighted_sum_backward(const Tensor& g, const Tensor& src, const Tensor& slots,
                                            const Tensor& weights, bool need_src, bool need_weights) {
  const Tensor idx = checked_slots(src, slots, weights);
  const int64_t N = slots.size(0), S = slots.size(1), R = src.size(0), C = src.size(1);
  EMBER_CHECK(g.shape() == Shape({N, C}), "gather_weighted_sum: gradient is ", shape_str(g.shape()),
              ", expected [", N, ", ", C, "]");
  GatherSumGrads out;
  // Rows no slot names get no gradient from the sum: start d_src at zero only then.
  if (need_src) out.src = N * S == R ? Tensor::empty(src.shape(), src.dtype()) : Tensor::zeros(src.shape(), src.dtype());
  if (need_weights) out.weights = Tensor::empty(slots.shape(), src.dtype());
  const Tensor gc = g.contiguous(), sc = src.contiguous(), wc = weights.contiguous();
  dispatch_float(src.dtype(), "gather_weighted_sum", [&](auto tag) {
    using T = decltype(tag);
    const T *gp = gc.data<T>(), *s = sc.data<T>(), *w = wc.data<T>();
    const int64_t* slot = idx.data<int64_t>();
    T* ds = need_src ? out.src.data<T>() : nullptr;
    T* dw = need_weights ? out.weights.data<T>() : nullptr;
#pragma omp parallel for schedule(static) if (N * S * C > kParallelGrain && !omp_in_parallel())
    for (int64_t n = 0; n < N; ++n) {
      const T* gn = gp + n * C;
      for (int64_t k = 0; k < S; ++k) {
        const int64_t r = slot[n * S + k];
        if (ds) {
          const T wk = w[n * S + k];
          T* d = ds + r * C;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) d[c] = wk * gn[c];
        }
        if (dw) {
          const T* row = s + r * C;
          T dot = 0;
#pragma omp simd reduction(+ : dot)
          for (int64_t c = 0; c < C; ++c) dot += gn[c] * row[c];
          dw[n * S + k] = dot;
        }
      }
    }
  });
  return out;
}

}  // namespace

// The gather-sum above, recorded with its backward.
Variable gather_weighted_sum(const Variable& src, const Tensor& slots, const Variable& weights) {
  const bool need_src = needs_grad(src), need_w = needs_grad(weights);
  return record(
      "gather_weighted_sum", {src, weights},
      gather_weighted_sum_forward(src.data(), slots, weights.data()),
      [need_src, need_w, ss = SavedTensor(src.data()), si = SavedTensor(slots),
       sw = SavedTensor(weights.data())](const Tensor& g) -> Grads {
        auto d = gather_weighted_sum_backward(g, ss.get(), si.get(), sw.get(), need_src, need_w);
        return {std::move(d.src), std::move(d.weights)};
      });
}

}  // namespace ember
