// strided_rows: the one loop nest behind every elementwise kernel. It walks N
// operands that share an iteration shape (each with its own element strides,
// 0 for broadcast dims), merges dimensions that are contiguous in all
// operands, and hands the innermost run to a row function:
//   row(offsets, n, inner_strides)   offsets[k] = element offset of operand k
// Rows are split across OpenMP threads when there is enough work.
#pragma once
#include <omp.h>

#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "core/threads.h"

namespace ember {

template <size_t N, class RowFn>
void strided_rows(const Shape& shape, const std::array<Shape, N>& strides, RowFn&& row) {
  // Collapse: drop size-1 dims, merge dims contiguous in every operand.
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, N>> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return;
    if (shape[d] == 1) continue;
    std::array<int64_t, N> s;
    for (size_t k = 0; k < N; ++k) s[k] = strides[k][d];
    if (!sizes.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < N; ++k) mergeable &= st.back()[k] == s[k] * shape[d];
      if (mergeable) {
        sizes.back() *= shape[d];
        st.back() = s;
        continue;
      }
    }
    sizes.push_back(shape[d]);
    st.push_back(s);
  }
  if (sizes.empty()) {  // a single element
    std::array<int64_t, N> zero{};
    row(zero, int64_t{1}, zero);
    return;
  }
  const int64_t inner = sizes.back();
  const std::array<int64_t, N> inner_st = st.back();
  const int64_t outer_dims = static_cast<int64_t>(sizes.size()) - 1;
  int64_t rows = 1;
  for (int64_t d = 0; d < outer_dims; ++d) rows *= sizes[d];

  auto run_rows = [&](int64_t r0, int64_t r1) {
    if (r0 >= r1) return;
    std::vector<int64_t> idx(outer_dims);
    std::array<int64_t, N> off{};
    int64_t rem = r0;
    for (int64_t d = outer_dims - 1; d >= 0; --d) {
      idx[d] = rem % sizes[d];
      rem /= sizes[d];
      for (size_t k = 0; k < N; ++k) off[k] += idx[d] * st[d][k];
    }
    for (int64_t r = r0; r < r1; ++r) {
      row(off, inner, inner_st);
      for (int64_t d = outer_dims - 1; d >= 0; --d) {  // odometer increment
        ++idx[d];
        for (size_t k = 0; k < N; ++k) off[k] += st[d][k];
        if (idx[d] < sizes[d]) break;
        for (size_t k = 0; k < N; ++k) off[k] -= st[d][k] * sizes[d];
        idx[d] = 0;
      }
    }
  };

  const int64_t total = rows * inner;
  if (total < kParallelGrain || omp_in_parallel() || omp_get_max_threads() == 1) {
    run_rows(0, rows);
    return;
  }
  if (rows == 1) {  // one long row: split it
#pragma omp parallel
    {
      const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t chunk = (inner + nt - 1) / nt;
      const int64_t i0 = std::min(inner, t * chunk), i1 = std::min(inner, i0 + chunk);
      if (i0 < i1) {
        std::array<int64_t, N> off;
        for (size_t k = 0; k < N; ++k) off[k] = i0 * inner_st[k];
        row(off, i1 - i0, inner_st);
      }
    }
    return;
  }
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t chunk = (rows + nt - 1) / nt;
    run_rows(std::min(rows, t * chunk), std::min(rows, (t + 1) * chunk));
  }
}

}  // namespace ember
