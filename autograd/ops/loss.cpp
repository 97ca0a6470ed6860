// Fused cross-entropy with the PaLM z-loss over logits [N, V] and int targets
// [N], in one pass per row: lse = logsumexp(x), ce = lse - x[y], z = lse^2.
//   loss = mean(ce) + coef * mean(z)
//   dloss/dx = (softmax(x) - onehot(y)) / N + coef * 2 lse softmax(x) / N
// Weighted form, weights w [N] and a given normaliser M:
//   loss = sum_n w_n (ce_n + coef * z_n) / M
//   dloss/dx = w_n ((softmax(x) - onehot(y)) + coef * 2 lse softmax(x)) / M
// Only lse per row is saved; backward recomputes softmax from x and lse.
// Token log-probabilities (the same row pass, no log-softmax kept), weights w [N]:
//   out_n = w_n (x[n, y_n] - lse_n),   dx_n = g_n w_n (onehot(y_n) - softmax(x_n)).
#include <cmath>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/loss_rows.h"
#include "core/threads.h"

namespace ember {
namespace {

// log(sum_i exp(x_i)) of one row: max, then the shifted exponentials summed in double.
template <class T>
double row_logsumexp(const T* x, int64_t V) {
  const T m = loss_rows::row_max(x, V);
  return static_cast<double>(m) + std::log(loss_rows::row_sum_exp(x, m, V));
}

// Sums over the rows of w_n ce_n and w_n z_n (w null: every weight 1); a row
// with w_n = 0 is skipped and its lse left 0.
template <class T, class I>
void cross_entropy_forward(const T* x, const I* y, const double* w, T* lse, double& ce_sum,
                           double& z_sum, int64_t N, int64_t V) {
  double ce = 0, z = 0;
#pragma omp parallel for reduction(+ : ce, z) if (N * V > kParallelGrain)
  for (int64_t n = 0; n < N; ++n) {
    lse[n] = 0;
    if (w != nullptr && w[n] == 0) continue;
    const T* xr = x + n * V;
    const double l = row_logsumexp(xr, V);
    lse[n] = static_cast<T>(l);
    if (w == nullptr) {
      ce += l - static_cast<double>(xr[y[n]]);
      z += l * l;
    } else {
      ce += w[n] * (l - static_cast<double>(xr[y[n]]));
      z += w[n] * l * l;
    }
  }
  ce_sum = ce;
  z_sum = z;
}

// dx row n = grad_scale w_n (softmax (1 + 2 coef lse) - onehot(y)); 0 where w_n = 0.
template <class T, class I>
void cross_entropy_backward(const T* x, const I* y, const double* w, const T* lse, T* dx, int64_t N,
                            int64_t V, double grad_scale, double coef) {
#pragma omp parallel for if (N * V > kParallelGrain)
  for (int64_t n = 0; n < N; ++n) {
    T* d = dx + n * V;
    if (w != nullptr && w[n] == 0) {
      for (int64_t i = 0; i < V; ++i) d[i] = 0;
      continue;
    }
    const double s = w == nullptr ? grad_scale : grad_scale * w[n];
    const T l = lse[n];
    // d/dx of ce + coef * lse^2 is softmax * (1 + 2 coef lse) - onehot.
    const T k = static_cast<T>(s * (1.0 + 2.0 * coef * static_cast<double>(l)));
    loss_rows::row_scaled_softmax(x + n * V, l, k, d, V);
    d[y[n]] -= static_cast<T>(s);
  }
}

// out_n = w_n (x[n, y_n] - lse_n) with lse_n saved; rows with w_n = 0 give 0 and lse 0.
template <class T, class I>
void token_logprobs_forward(const T* x, const I* y, const double* w, T* out, T* lse, int64_t N,
                            int64_t V) {
#pragma omp parallel for if (N * V > kParallelGrain)
  for (int64_t n = 0; n < N; ++n) {
    out[n] = 0;
    lse[n] = 0;
    if (w[n] == 0) continue;
    const T* xr = x + n * V;
    const double l = row_logsumexp(xr, V);
    lse[n] = static_cast<T>(l);
    out[n] = static_cast<T>(w[n] * (static_cast<double>(xr[y[n]]) - l));
  }
}

// dx row n = g_n w_n (onehot(y_n) - softmax(x_n)); 0 where w_n = 0.
template <class T, class I>
void token_logprobs_backward(const T* x, const I* y, const double* w, const T* lse, const T* g,
                             T* dx, int64_t N, int64_t V) {
#pragma omp parallel for if (N * V > kParallelGrain)
  for (int64_t n = 0; n < N; ++n) {
    T* d = dx + n * V;
    if (w[n] == 0) {
      for (int64_t i = 0; i < V; ++i) d[i] = 0;
      continue;
    }
    const T s = static_cast<T>(static_cast<double>(g[n]) * w[n]);
    loss_rows::row_scaled_softmax(x + n * V, lse[n], static_cast<T>(-s), d, V);
    d[y[n]] += s;
  }
}

// Both forms: w (float64 [N], or undefined for every weight 1) and the normaliser.
CrossEntropyResult cross_entropy_impl(const Variable& logits, const Tensor& targets, const Tensor& w,
                                      double norm, double z_loss_coef) {
  const double* wp = w.defined() ? w.data<double>() : nullptr;
  const Tensor y = targets.contiguous();
  loss_rows::check_rows("cross_entropy", logits, y);
  const int64_t N = logits.size(0), V = logits.size(1);
  loss_rows::check_targets("cross_entropy", y, wp, V);
  const Tensor x = logits.data().contiguous();
  Tensor lse = Tensor::empty({N}, x.dtype());
  double ce_sum = 0, z_sum = 0;
  dispatch_float(x.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(y.dtype(), "cross_entropy targets", [&](auto itag) {
      using I = decltype(itag);
      cross_entropy_forward<T, I>(x.data<T>(), y.data<I>(), wp, lse.data<T>(), ce_sum, z_sum, N, V);
    });
  });
  CrossEntropyResult result;  // norm 0: no row is weighted (checked by the caller)
  result.ce = norm > 0 ? ce_sum / norm : 0.0;
  result.z = norm > 0 ? z_sum / norm : 0.0;
  const double total = result.ce + z_loss_coef * result.z;
  result.loss = record("cross_entropy", {logits}, Tensor::scalar(total, x.dtype()),
                       [xs = SavedTensor(x), y, w, ls = SavedTensor(lse), N, V, norm,
                        z_loss_coef](const Tensor& g) -> Grads {
                         const Tensor& xv = xs.get();
                         Tensor dx = Tensor::empty(xv.shape(), xv.dtype());
                         const double scale = norm > 0 ? g.item() / norm : 0.0;
                         const double* wv = w.defined() ? w.data<double>() : nullptr;
                         dispatch_float(xv.dtype(), "cross_entropy backward", [&](auto tag) {
                           using T = decltype(tag);
                           dispatch_index(y.dtype(), "cross_entropy targets", [&](auto itag) {
                             using I = decltype(itag);
                             cross_entropy_backward<T, I>(xv.data<T>(), y.data<I>(), wv,
                                                          ls.get().data<T>(), dx.data<T>(), N, V,
                                                          scale, z_loss_coef);
                           });
                         });
                         return {dx};
                       });
  return result;
}

}  // namespace

namespace loss_rows {

void check_rows(const char* op, const Variable& logits, const Tensor& targets) {
  EMBER_CHECK(logits.dim() == 2, op, ": logits must be [N, V], got ", shape_str(logits.shape()));
  EMBER_CHECK(targets.dim() == 1 && targets.size(0) == logits.size(0), op, ": targets of shape ",
              shape_str(targets.shape()), " do not match logits of shape ",
              shape_str(logits.shape()));
  EMBER_CHECK(logits.size(0) > 0 && logits.size(1) > 0, op, ": empty logits ",
              shape_str(logits.shape()));
}

void check_targets(const char* op, const Tensor& targets, const double* w, int64_t V) {
  dispatch_index(targets.dtype(), op, [&](auto itag) {
    using I = decltype(itag);
    const I* yp = targets.data<I>();
    for (int64_t n = 0; n < targets.numel(); ++n) {
      if (w != nullptr && w[n] == 0) continue;
      EMBER_CHECK(yp[n] >= 0 && yp[n] < V, op, ": target ", static_cast<int64_t>(yp[n]),
                  " at row ", n, " is outside the vocabulary [0, ", V, ")");
    }
  });
}

Tensor row_weights(const char* op, const Variable& logits, const Tensor& weight) {
  EMBER_CHECK(logits.dim() == 2 && weight.defined() && weight.numel() == logits.size(0), op,
              ": weight of shape ", shape_str(weight.shape()),
              " does not hold one value per row of logits of shape ", shape_str(logits.shape()));
  const Tensor w = weight.to(DType::Float64).contiguous();
  const double* wp = w.data<double>();
  for (int64_t n = 0; n < w.numel(); ++n)
    EMBER_CHECK(std::isfinite(wp[n]), op, ": weight ", wp[n], " at row ", n, " is not finite");
  return w;
}

double weighted_norm(const char* op, const Tensor& w, double norm) {
  const double* wp = w.data<double>();
  bool any = false;
  for (int64_t n = 0; n < w.numel(); ++n) any = any || wp[n] != 0;
  EMBER_CHECK(!any || norm > 0, op, ": the normaliser must be > 0 (got ", norm,
              ") when some weight is non-zero");
  return any ? norm : 0.0;
}

}  // namespace loss_rows

CrossEntropyResult cross_entropy(const Variable& logits, const Tensor& targets, double z_loss_coef) {
  EMBER_PROFILE_SCOPE(kLossFamily);
  EMBER_CHECK(logits.dim() == 2, "cross_entropy: logits must be [N, V], got ", shape_str(logits.shape()));
  return cross_entropy_impl(logits, targets, Tensor(), static_cast<double>(logits.size(0)), z_loss_coef);
}

CrossEntropyResult cross_entropy(const Variable& logits, const Tensor& targets,
                                 const Tensor& weight, double norm, double z_loss_coef) {
  EMBER_PROFILE_SCOPE(kLossFamily);
  const Tensor w = loss_rows::row_weights("cross_entropy", logits, weight);
  return cross_entropy_impl(logits, targets, w, loss_rows::weighted_norm("cross_entropy", w, norm),
                            z_loss_coef);
}

Variable token_logprobs(const Variable& logits, const Tensor& targets, const Tensor& weight) {
  EMBER_PROFILE_SCOPE(kLossFamily);
  const Tensor w = loss_rows::row_weights("token_logprobs", logits, weight);
  const Tensor y = targets.contiguous();
  loss_rows::check_rows("token_logprobs", logits, y);
  const int64_t N = logits.size(0), V = logits.size(1);
  loss_rows::check_targets("token_logprobs", y, w.data<double>(), V);
  const Tensor x = logits.data().contiguous();
  Tensor out = Tensor::empty({N}, x.dtype()), lse = Tensor::empty({N}, x.dtype());
  dispatch_float(x.dtype(), "token_logprobs", [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(y.dtype(), "token_logprobs targets", [&](auto itag) {
      using I = decltype(itag);
      token_logprobs_forward<T, I>(x.data<T>(), y.data<I>(), w.data<double>(), out.data<T>(),
                                   lse.data<T>(), N, V);
    });
  });
  return record("token_logprobs", {logits}, out,
                [xs = SavedTensor(x), y, w, ls = SavedTensor(lse), N, V](const Tensor& g) -> Grads {
                  const Tensor& xv = xs.get();
                  const Tensor gc = g.contiguous();
                  Tensor dx = Tensor::empty(xv.shape(), xv.dtype());
                  dispatch_float(xv.dtype(), "token_logprobs backward", [&](auto tag) {
                    using T = decltype(tag);
                    dispatch_index(y.dtype(), "token_logprobs targets", [&](auto itag) {
                      using I = decltype(itag);
                      token_logprobs_backward<T, I>(xv.data<T>(), y.data<I>(), w.data<double>(),
                                                    ls.get().data<T>(), gc.data<T>(),
                                                    dx.data<T>(), N, V);
                    });
                  });
                  return {dx};
                });
}

}  // namespace ember
