// Cross-entropy with z-loss over logits split by vocabulary across a ParallelGroup
// (docs/model.md#tensor-parallel-loss): cross_entropy's math (autograd/ops/loss.cpp) with the
// row max, the sum of exponentials and the target logit each combined over the group:
//   m = max_group(max of the shard's real logits),  S = sum_group(sum exp(x - m)),
//   x_y = sum_group(the target's logit where the shard holds it, else 0),  lse = m + log S,
//   loss = sum_n w_n (lse_n - x_y + coef lse_n^2) / M   (w_n = 1, M = N unweighted)
//   dx (local columns) = w_n / M (softmax(x) (1 + 2 coef lse) - onehot(y)),  0 in padding.
#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/node.h"
#include "autograd/ops/loss_rows.h"
#include "autograd/parallel_ops.h"
#include "core/threads.h"

namespace ember {
namespace {

using loss_rows::row_max;
using loss_rows::row_scaled_softmax;
using loss_rows::row_sum_exp;

// This rank's columns: local column j is the vocabulary row lo + j; j < real are real rows,
// the rest padding. N rows, Vs columns.
struct Shard {
  int64_t N = 0, Vs = 0, lo = 0, real = 0;
};

bool skipped(const double* w, int64_t n) {
  return w != nullptr && w[n] == 0;
}

// Per row kept: the maximum of the shard's real logits, -inf without one.
template <class T>
void shard_row_max(const T* x, const double* w, double* m, const Shard& s) {
#pragma omp parallel for if (s.N * s.Vs > kParallelGrain)
  for (int64_t n = 0; n < s.N; ++n) {
    m[n] = -std::numeric_limits<double>::infinity();
    if (skipped(w, n) || s.real == 0) continue;
    m[n] = static_cast<double>(row_max(x + n * s.Vs, s.real));
  }
}

// Per row kept, into sums [2, N]: sum exp(x - m) over the shard's real logits, and the
// target's logit where this shard holds it (0 elsewhere, so the group's sum is that logit).
template <class T, class I>
void shard_row_sums(const T* x, const I* y, const double* w, const double* m, double* sums,
                    const Shard& s) {
#pragma omp parallel for if (s.N * s.Vs > kParallelGrain)
  for (int64_t n = 0; n < s.N; ++n) {
    sums[n] = 0;
    sums[s.N + n] = 0;
    if (skipped(w, n) || s.real == 0) continue;
    const T* xr = x + n * s.Vs;
    sums[n] = row_sum_exp(xr, static_cast<T>(m[n]), s.real);
    const int64_t j = static_cast<int64_t>(y[n]) - s.lo;
    if (j >= 0 && j < s.real) sums[s.N + n] = static_cast<double>(xr[j]);
  }
}

// lse_n = m_n + log S_n per row kept (0 for a skipped row); the sums of w_n ce_n and w_n z_n.
template <class T>
void combine_rows(const double* m, const double* sums, const double* w, T* lse, double& ce_sum,
                  double& z_sum, int64_t N) {
  double ce = 0, z = 0;
  for (int64_t n = 0; n < N; ++n) {
    lse[n] = 0;
    if (skipped(w, n)) continue;
    const double l = m[n] + std::log(sums[n]);
    lse[n] = static_cast<T>(l);
    const double wn = w == nullptr ? 1.0 : w[n];
    ce += wn * (l - sums[N + n]);
    z += wn * l * l;
  }
  ce_sum = ce;
  z_sum = z;
}

// dx row n = grad_scale w_n (softmax (1 + 2 coef lse) - onehot(y)) on the real local columns;
// 0 on padding columns and rows with w_n = 0.
template <class T, class I>
void shard_backward(const T* x, const I* y, const double* w, const T* lse, T* dx, const Shard& s,
                    double grad_scale, double coef) {
#pragma omp parallel for if (s.N * s.Vs > kParallelGrain)
  for (int64_t n = 0; n < s.N; ++n) {
    T* d = dx + n * s.Vs;
    const bool kept = !skipped(w, n);
    const int64_t real = kept ? s.real : 0;
    for (int64_t j = real; j < s.Vs; ++j) d[j] = 0;
    if (real == 0) continue;
    const double sc = w == nullptr ? grad_scale : grad_scale * w[n];
    const T l = lse[n];
    const T k = static_cast<T>(sc * (1.0 + 2.0 * coef * static_cast<double>(l)));
    row_scaled_softmax(x + n * s.Vs, l, k, d, real);
    const int64_t j = static_cast<int64_t>(y[n]) - s.lo;
    if (j >= 0 && j < real) d[j] -= static_cast<T>(sc);
  }
}

// The shard's columns, after checking the shapes and that the shard is Vp / T wide.
Shard shard_of(const Variable& logits, const Tensor& y, int64_t V, const ParallelGroup& group) {
  const char* op = "vocab_parallel_cross_entropy";
  loss_rows::check_rows(op, logits, y);
  EMBER_CHECK(V > 0, op, ": the vocabulary size must be > 0, got ", V);
  const int64_t T = group.size(), Vs = (V + T - 1) / T;
  EMBER_CHECK(logits.size(1) == Vs, op, ": logits of shape ", shape_str(logits.shape()),
              " are not this rank's share of a vocabulary of ", V, " padded to ", Vs * T, " over ",
              T, " ranks (", Vs, " columns each)");
  Shard s;
  s.N = logits.size(0);
  s.Vs = Vs;
  s.lo = group.rank() * Vs;
  s.real = std::min(Vs, std::max<int64_t>(0, V - s.lo));
  return s;
}

// The forward over the group: lse per row (x's dtype) and the weighted sums of ce and z.
Tensor forward(const Tensor& x, const Tensor& y, const double* w, const Shard& s,
               const ParallelGroup& group, double& ce_sum, double& z_sum) {
  const char* op = "vocab_parallel_cross_entropy";
  Tensor m = Tensor::empty({s.N}, DType::Float64), sums = Tensor::empty({2, s.N}, DType::Float64);
  Tensor lse = Tensor::empty({s.N}, x.dtype());
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    shard_row_max<T>(x.data<T>(), w, m.data<double>(), s);
  });
  group.all_reduce_max(m);
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(y.dtype(), op, [&](auto itag) {
      using I = decltype(itag);
      shard_row_sums<T, I>(x.data<T>(), y.data<I>(), w, m.data<double>(), sums.data<double>(), s);
    });
  });
  group.all_reduce_sum(sums);
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    combine_rows<T>(m.data<double>(), sums.data<double>(), w, lse.data<T>(), ce_sum, z_sum, s.N);
  });
  return lse;
}

// Both forms: w (float64 [N], or undefined for every weight 1) and the normaliser.
CrossEntropyResult vocab_parallel_impl(const Variable& logits, const Tensor& targets,
                                       int64_t vocab_size, const Tensor& w, double norm,
                                       const ParallelGroup& group, double z_loss_coef) {
  const double* wp = w.defined() ? w.data<double>() : nullptr;
  const Tensor y = targets.contiguous();
  const Shard s = shard_of(logits, y, vocab_size, group);
  loss_rows::check_targets("vocab_parallel_cross_entropy", y, wp, vocab_size);
  const Tensor x = logits.data().contiguous();
  double ce_sum = 0, z_sum = 0;
  const Tensor lse = forward(x, y, wp, s, group, ce_sum, z_sum);
  CrossEntropyResult result;
  result.ce = norm > 0 ? ce_sum / norm : 0.0;
  result.z = norm > 0 ? z_sum / norm : 0.0;
  const double total = result.ce + z_loss_coef * result.z;
  result.loss = record(
      "vocab_parallel_cross_entropy", {logits}, Tensor::scalar(total, x.dtype()),
      [xs = SavedTensor(x), y, w, ls = SavedTensor(lse), s, norm, z_loss_coef](const Tensor& g) {
        const Tensor& xv = xs.get();
        Tensor dx = Tensor::empty(xv.shape(), xv.dtype());
        const double scale = norm > 0 ? g.item() / norm : 0.0;
        const double* wv = w.defined() ? w.data<double>() : nullptr;
        const char* op = "vocab_parallel_cross_entropy backward";
        dispatch_float(xv.dtype(), op, [&](auto tag) {
          using T = decltype(tag);
          dispatch_index(y.dtype(), op, [&](auto itag) {
            using I = decltype(itag);
            shard_backward<T, I>(xv.data<T>(), y.data<I>(), wv, ls.get().data<T>(), dx.data<T>(), s,
                                 scale, z_loss_coef);
          });
        });
        return Grads{dx};
      });
  return result;
}

}  // namespace

CrossEntropyResult vocab_parallel_cross_entropy(const Variable& logits, const Tensor& targets,
                                                int64_t vocab_size, const ParallelGroup& group,
                                                double z_loss_coef) {
  EMBER_PROFILE_SCOPE(kLossFamily);
  EMBER_CHECK(logits.dim() == 2, "vocab_parallel_cross_entropy: logits must be [N, Vs], got ",
              shape_str(logits.shape()));
  return vocab_parallel_impl(logits, targets, vocab_size, Tensor(),
                             static_cast<double>(logits.size(0)), group, z_loss_coef);
}

CrossEntropyResult vocab_parallel_cross_entropy(const Variable& logits, const Tensor& targets,
                                                int64_t vocab_size, const Tensor& weight,
                                                double norm, const ParallelGroup& group,
                                                double z_loss_coef) {
  EMBER_PROFILE_SCOPE(kLossFamily);
  const char* op = "vocab_parallel_cross_entropy";
  const Tensor w = loss_rows::row_weights(op, logits, weight);
  return vocab_parallel_impl(logits, targets, vocab_size, w, loss_rows::weighted_norm(op, w, norm),
                             group, z_loss_coef);
}

}  // namespace ember
