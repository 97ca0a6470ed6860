// What the fused cross-entropy (autograd/ops/loss.cpp) and its vocab-parallel form
// (autograd/ops/vocab_parallel_loss.cpp) share: the per-row max, sum of shifted exponentials
// and scaled softmax, vectorised (fast::exp) and compiled per ISA, and the checks of their
// targets and weights, so that both compute the same numbers.
#pragma once
#include <cmath>
#include <cstdint>

#include "autograd/variable.h"
#include "core/kernels/fast_math.h"
#include "core/simd.h"
#include "core/tensor.h"

namespace ember::loss_rows {

// max_i x[i] of one row, V >= 1.
template <class T>
EMBER_TARGET_CLONES T row_max(const T* __restrict x, int64_t V) {
  T m = x[0];
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < V; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// sum_i exp(x[i] - m) of one row, summed in double.
template <class T>
EMBER_TARGET_CLONES double row_sum_exp(const T* __restrict x, T m, int64_t V) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < V; ++i) s += static_cast<double>(kernels::fast::exp(x[i] - m));
  return s;
}

// d[i] = exp(x[i] - lse) * k: the softmax scaled, one row.
template <class T>
EMBER_TARGET_CLONES void row_scaled_softmax(const T* __restrict x, T lse, T k, T* __restrict d,
                                            int64_t V) {
#pragma omp simd
  for (int64_t i = 0; i < V; ++i) d[i] = kernels::fast::exp(x[i] - lse) * k;
}

// logits [N, C] and targets [N] with N, C > 0, else an Error naming op.
void check_rows(const char* op, const Variable& logits, const Tensor& targets);
// Every target (of a row with a non-zero weight when w is given) inside [0, V).
void check_targets(const char* op, const Tensor& targets, const double* w, int64_t V);
// weight as float64 [N], every value finite, N = logits' rows.
Tensor row_weights(const char* op, const Variable& logits, const Tensor& weight);
// The normaliser of the weighted form: norm, or 0 when every weight is 0 (the loss is then 0);
// an Error when norm <= 0 and some weight is not.
double weighted_norm(const char* op, const Tensor& w, double norm);

}  // namespace ember::loss_rows
