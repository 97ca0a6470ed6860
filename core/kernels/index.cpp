// Index kernels (see index.h): index_select / index_add along a dim, gather /
// scatter_add element-wise along a dim, topk over the last dim. Every result
// is deterministic and independent of the thread count: scatters run each
// output element's contributions in ascending source order on one thread.
#include "core/kernels/index.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "core/strided_loop.h"

namespace ember::kernels {
namespace {

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op, const Shape& shape) {
  EMBER_CHECK(dim >= -ndim && dim < ndim, op, ": dim ", dim, " is out of range for shape ",
              shape_str(shape));
  return dim < 0 ? dim + ndim : dim;
}

int64_t prod(const Shape& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= s[i];
  return n;
}

// The index as a contiguous int64 tensor, every value checked against [0, size).
Tensor checked_index(const Tensor& index, int64_t size, const char* op, int64_t dim) {
  EMBER_CHECK(index.defined(), op, ": index is undefined");
  dispatch_index(index.dtype(), op, [](auto) {});
  const Tensor idx = index.to(DType::Int64).contiguous();
  const int64_t* p = idx.data<int64_t>();
  for (int64_t i = 0, n = idx.numel(); i < n; ++i) {
    EMBER_CHECK(p[i] >= 0 && p[i] < size, op, ": index ", p[i], " is out of range for dim ", dim,
                " of size ", size);
  }
  return idx;
}

// Calls line(off) in parallel for every position of `shape` with coordinate 0
// along dim; off[k] is that position's element offset in operand k.
template <class F>
void for_each_line(const Shape& shape, int64_t dim, const std::array<Shape, 3>& strides, F&& line) {
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, 3>> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (static_cast<int64_t>(d) == dim) continue;
    sizes.push_back(shape[d]);
    st.push_back({strides[0][d], strides[1][d], strides[2][d]});
  }
  const int64_t lines = shape_numel(sizes);
  const int64_t work = lines * shape[dim];
  if (work == 0) return;
#pragma omp parallel for schedule(static) if (work > kParallelGrain && !omp_in_parallel())
  for (int64_t p = 0; p < lines; ++p) {
    std::array<int64_t, 3> off{};
    int64_t rem = p;
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      const int64_t c = rem % sizes[d];
      rem /= sizes[d];
      for (size_t k = 0; k < 3; ++k) off[k] += c * st[d][k];
    }
    line(off);
  }
}

}  // namespace

// out[o, i, r] = a[o, index[i], r]   (o: dims before dim, r: dims after, i: index elements)
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  EMBER_CHECK(a.defined() && a.dim() > 0, "index_select: expected a tensor with at least 1 dim");
  const int64_t d = wrap_dim(dim, a.dim(), "index_select", a.shape());
  const Tensor idx = checked_index(index, a.size(d), "index_select", d);
  Shape out_shape(a.shape().begin(), a.shape().begin() + d);
  out_shape.insert(out_shape.end(), index.shape().begin(), index.shape().end());
  out_shape.insert(out_shape.end(), a.shape().begin() + d + 1, a.shape().end());
  Tensor out = Tensor::empty(out_shape, a.dtype());
  const Tensor ac = a.contiguous();
  const int64_t outer = prod(a.shape(), 0, d), size = a.size(d), n = idx.numel();
  const int64_t inner = prod(a.shape(), d + 1, a.shape().size());
  const size_t row_bytes = static_cast<size_t>(inner) * dtype_size(a.dtype());
  const char* src = static_cast<const char*>(ac.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  const int64_t* ip = idx.data<int64_t>();
  const int64_t rows = outer * n;
#pragma omp parallel for schedule(static) if (rows * inner > kParallelGrain && !omp_in_parallel())
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r / n, i = r % n;
    std::memcpy(dst + r * row_bytes, src + (o * size + ip[i]) * row_bytes, row_bytes);
  }
  return out;
}

namespace {

// base[o, index[i], r] += src[o, i, r], index of any shape I and src [before dim, I, after dim].
// Sources are bucketed by target row (stable counting sort), so each row sums
// its sources in ascending i on one thread, whatever the thread count.
// summed: base[o, v, r] += (0 + src[o, i1, r] + src[o, i2, r] + ...) over the i with
// index[i] == v: the contributions are summed first and the sum is added once.
void scatter_rows(Tensor& base, int64_t dim, const Tensor& index, const Tensor& src, bool summed) {
  EMBER_CHECK(base.defined() && base.dim() > 0 && src.defined(),
              "index_add: expected defined tensors, base with at least 1 dim");
  const int64_t d = wrap_dim(dim, base.dim(), "index_add", base.shape());
  EMBER_CHECK(src.dtype() == base.dtype(), "index_add: src is ", dtype_name(src.dtype()),
              " but base is ", dtype_name(base.dtype()));
  Shape want(base.shape().begin(), base.shape().begin() + d);
  want.insert(want.end(), index.shape().begin(), index.shape().end());
  want.insert(want.end(), base.shape().begin() + d + 1, base.shape().end());
  EMBER_CHECK(src.shape() == want, "index_add: src has shape ", shape_str(src.shape()),
              " but base ", shape_str(base.shape()), " with index ", shape_str(index.shape()),
              " along dim ", d, " needs ", shape_str(want));
  const int64_t size = base.size(d);
  const Tensor idx = checked_index(index, size, "index_add", d);
  const int64_t outer = prod(base.shape(), 0, d), n = idx.numel();
  const int64_t inner = prod(base.shape(), d + 1, base.shape().size());
  const int64_t* ip = idx.data<int64_t>();

  // Bucket sources by target: order[start[v] .. start[v+1]) are the i with index[i] == v.
  std::vector<int64_t> start(size + 1, 0), order(n), targets;
  for (int64_t i = 0; i < n; ++i) ++start[ip[i] + 1];
  for (int64_t v = 0; v < size; ++v) {
    if (start[v + 1] > 0) targets.push_back(v);
    start[v + 1] += start[v];
  }
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < n; ++i) order[fill[ip[i]]++] = i;

  base.bump_version();
  const Tensor out = base.is_contiguous() ? base : base.clone();
  const Tensor sc = src.contiguous();
  // Jobs: (outer, target row, piece of <= kPieceColumns columns), dynamically scheduled,
  // so a hot row (a frequent token) is spread over threads too.
  constexpr int64_t kPieceColumns = 256;
  const int64_t rows = outer * static_cast<int64_t>(targets.size());
  const int64_t chunks = (inner + kPieceColumns - 1) / kPieceColumns;
  const int64_t chunk = chunks == 0 ? 0 : (inner + chunks - 1) / chunks;
  const int64_t jobs = rows * chunks;
  dispatch_float(base.dtype(), "index_add", [&](auto tag) {
    using T = decltype(tag);
    T* o_base = out.data<T>();
    const T* s_base = sc.data<T>();
#pragma omp parallel for schedule(dynamic, \
                                  4) if (n * inner * outer > kParallelGrain && !omp_in_parallel())
    for (int64_t job = 0; job < jobs; ++job) {
      const int64_t row = job / chunks, c0 = (job % chunks) * chunk;
      const int64_t c1 = std::min(inner, c0 + chunk);
      const int64_t o = row / static_cast<int64_t>(targets.size());
      const int64_t v = targets[row % static_cast<int64_t>(targets.size())];
      T* dst = o_base + (o * size + v) * inner + c0;
      T sum[kPieceColumns];
      T* acc = summed ? sum : dst;  // columns c0 .. c1 of the row
      const int64_t w = c1 - c0;
      if (summed) std::fill(sum, sum + w, T(0));
      for (int64_t q = start[v]; q < start[v + 1]; ++q) {
        const T* s = s_base + (o * n + order[q]) * inner + c0;
        for (int64_t k = 0; k < w; ++k) acc[k] += s[k];
      }
      if (summed) {
        for (int64_t k = 0; k < w; ++k) dst[k] += sum[k];
      }
    }
  });
  if (!base.is_contiguous()) base.copy_(out);
}

}  // namespace

void index_add_(Tensor& base, int64_t dim, const Tensor& index, const Tensor& src) {
  scatter_rows(base, dim, index, src, false);
}

void index_add_summed_(Tensor& base, int64_t dim, const Tensor& index, const Tensor& src) {
  scatter_rows(base, dim, index, src, true);
}

Tensor index_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src) {
  EMBER_CHECK(base.defined(), "index_add: base is undefined");
  Tensor out = base.clone();
  index_add_(out, dim, index, src);
  return out;
}

// out[p] = a[p with coordinate dim replaced by index[p]], out shaped like index.
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  EMBER_CHECK(a.defined() && index.defined(), "gather: undefined tensor");
  EMBER_CHECK(a.dim() > 0 && index.dim() == a.dim(), "gather: index ", shape_str(index.shape()),
              " must have the rank of a ", shape_str(a.shape()));
  const int64_t d = wrap_dim(dim, a.dim(), "gather", a.shape());
  for (int64_t k = 0; k < a.dim(); ++k) {
    EMBER_CHECK(k == d || index.size(k) <= a.size(k), "gather: index ", shape_str(index.shape()),
                " is larger than a ", shape_str(a.shape()), " in dim ", k);
  }
  const Tensor idx = checked_index(index, a.size(d), "gather", d);
  Tensor out = Tensor::empty(index.shape(), a.dtype());
  const int64_t len = index.size(d), a_step = a.stride(d), i_step = idx.stride(d);
  dispatch_all(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* ap = a.data<T>();
    T* op = out.data<T>();
    const int64_t* ip = idx.data<int64_t>();
    for_each_line(index.shape(), d, {idx.strides(), a.strides(), out.strides()}, [&](auto off) {
      for (int64_t j = 0; j < len; ++j) {
        op[off[2] + j * i_step] = ap[off[1] + ip[off[0] + j * i_step] * a_step];
      }
    });
  });
  return out;
}

// out = base; out[p with coordinate dim replaced by index[p]] += src[p] for p over index.shape.
// Parallel over the positions off dim (they never collide); serial along dim.
Tensor scatter_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src) {
  EMBER_CHECK(base.defined() && index.defined() && src.defined(), "scatter_add: undefined tensor");
  EMBER_CHECK(src.dtype() == base.dtype(), "scatter_add: src is ", dtype_name(src.dtype()),
              " but base is ", dtype_name(base.dtype()));
  EMBER_CHECK(base.dim() > 0 && index.dim() == base.dim() && src.dim() == base.dim(),
              "scatter_add: base ", shape_str(base.shape()), ", index ", shape_str(index.shape()),
              " and src ", shape_str(src.shape()), " must have the same rank");
  const int64_t d = wrap_dim(dim, base.dim(), "scatter_add", base.shape());
  for (int64_t k = 0; k < base.dim(); ++k) {
    EMBER_CHECK(index.size(k) <= src.size(k) && (k == d || index.size(k) <= base.size(k)),
                "scatter_add: index ", shape_str(index.shape()), " does not fit src ",
                shape_str(src.shape()), " and base ", shape_str(base.shape()), " in dim ", k);
  }
  const Tensor idx = checked_index(index, base.size(d), "scatter_add", d);
  Tensor out = base.clone();
  const int64_t len = index.size(d), o_step = out.stride(d), s_step = src.stride(d);
  const int64_t i_step = idx.stride(d);
  dispatch_float(base.dtype(), "scatter_add", [&](auto tag) {
    using T = decltype(tag);
    const T* sp = src.data<T>();
    T* op = out.data<T>();
    const int64_t* ip = idx.data<int64_t>();
    for_each_line(index.shape(), d, {idx.strides(), src.strides(), out.strides()}, [&](auto off) {
      for (int64_t j = 0; j < len; ++j) {
        op[off[2] + ip[off[0] + j * i_step] * o_step] += sp[off[1] + j * s_step];
      }
    });
  });
  return out;
}

// values[r, :] = the k largest of a[r, :], descending; ties to the lower index;
// NaN counts as larger than every number (as in torch).
std::pair<Tensor, Tensor> topk(const Tensor& a, int64_t k) {
  EMBER_CHECK(a.defined() && a.dim() > 0, "topk: expected a tensor with at least 1 dim");
  const int64_t n = a.size(-1);
  EMBER_CHECK(k >= 0 && k <= n, "topk: k = ", k, " is out of range for the last dim of shape ",
              shape_str(a.shape()));
  Shape out_shape = a.shape();
  out_shape.back() = k;
  Tensor values = Tensor::empty(out_shape, a.dtype());
  Tensor indices = Tensor::empty(out_shape, DType::Int64);
  const int64_t rows = n == 0 ? 0 : a.numel() / n;
  if (k == 0 || rows == 0) return {values, indices};
  const Tensor ac = a.contiguous();
  dispatch_all(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* ap = ac.data<T>();
    T* vp = values.data<T>();
    int64_t* ixp = indices.data<int64_t>();
    auto greater = [](T x, T y) {
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(x)) return !std::isnan(y);
        if (std::isnan(y)) return false;
      }
      return x > y;
    };
#pragma omp parallel if (rows * n > kParallelGrain && rows > 1 && !omp_in_parallel())
    {
      std::vector<int64_t> order(n);
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = ap + r * n;
        // Strict total order: larger value first, then lower index.
        auto before = [&](int64_t i, int64_t j) {
          return greater(row[i], row[j]) || (!greater(row[j], row[i]) && i < j);
        };
        if (k * 16 < n) {
          // Small k: a heap of the best k so far, its top the worst of them. A
          // later index enters only with a strictly greater value (ties keep the lower).
          std::iota(order.begin(), order.begin() + k, int64_t{0});
          std::make_heap(order.begin(), order.begin() + k, before);
          for (int64_t i = k; i < n; ++i) {
            if (!greater(row[i], row[order.front()])) continue;
            std::pop_heap(order.begin(), order.begin() + k, before);
            order[k - 1] = i;
            std::push_heap(order.begin(), order.begin() + k, before);
          }
        } else {
          std::iota(order.begin(), order.end(), int64_t{0});
          if (k < n) std::nth_element(order.begin(), order.begin() + k, order.end(), before);
        }
        std::sort(order.begin(), order.begin() + k, before);
        for (int64_t j = 0; j < k; ++j) {
          vp[r * k + j] = row[order[j]];
          ixp[r * k + j] = order[j];
        }
      }
    }
  });
  return {values, indices};
}

}  // namespace ember::kernels
