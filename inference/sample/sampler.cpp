// Token sampling. With z the (penalised) logits and T the temperature,
//   p_i = exp((z_i - max z) / T) / sum_{j in K} exp((z_j - max z) / T)  over the top-k set K,
// top-p keeps the shortest prefix of K in decreasing p whose mass reaches top_p, the kept
// probabilities are renormalised, and a uniform u in [0, 1) picks the first token (in id
// order) whose cumulative probability exceeds u. Selection, not sorting: O(V) per draw.
#include "inference/sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "core/kernels/reduce.h"

namespace ember::inference {

void check_sampling_options(const SamplingOptions& opt) {
  EMBER_CHECK(opt.max_tokens >= 0, "sampling: max_tokens must be >= 0, got ", opt.max_tokens);
  EMBER_CHECK(opt.temperature >= 0 && std::isfinite(opt.temperature),
              "sampling: temperature must be >= 0 (0 is greedy), got ", opt.temperature);
  EMBER_CHECK(opt.top_k >= 0, "sampling: top_k must be >= 0 (0 is off), got ", opt.top_k);
  EMBER_CHECK(opt.top_p > 0 && opt.top_p <= 1, "sampling: top_p must be in (0, 1] (1 is off), got ",
              opt.top_p);
  EMBER_CHECK(opt.repetition_penalty > 0 && std::isfinite(opt.repetition_penalty),
              "sampling: repetition_penalty must be > 0 (1 is off), got ", opt.repetition_penalty);
  EMBER_CHECK(opt.vocab_limit >= 0, "sampling: vocab_limit must be >= 0 (0 is off), got ", opt.vocab_limit);
}

TokenSampler::TokenSampler(const SamplingOptions& opt) : opt_(opt), gen_(opt.seed) {
  check_sampling_options(opt);
}

namespace {

// The index of the first maximum of the first V logits of row, or -1 when it is NaN or not finite
// (converting to double keeps the order, so it is the general path's maximum).
int64_t finite_first_max(const Tensor& row, int64_t V) {
  int64_t best = -1;
  dispatch_float(row.dtype(), "sampling", [&](auto tag) {
    using T = decltype(tag);
    const T* p = row.data<T>();
    const int64_t at = kernels::argmax_row(p, V);  // a NaN's index if there is one
    if (std::isfinite(p[at])) best = at;
  });
  return best;
}

// Keeps token best alone (weight 1) in order (ids) and w (weights by id), both sized V; returns 1.
int64_t keep_only(int64_t best, int64_t V, std::vector<int64_t>& order, std::vector<double>& w) {
  order.resize(static_cast<size_t>(V));
  w.resize(static_cast<size_t>(V));
  order[0] = best;
  w[best] = 1;
  return 1;
}

// Copies the first V logits of row into z as double; returns whether one is NaN.
bool logits_to_double(const Tensor& row, int64_t V, std::vector<double>& z) {
  z.resize(static_cast<size_t>(V));
  bool nan = false;
  dispatch_float(row.dtype(), "sampling", [&](auto tag) {
    using T = decltype(tag);
    const T* p = row.data<T>();
    for (int64_t i = 0; i < V; ++i) {
      z[i] = static_cast<double>(p[i]);
      nan |= z[i] != z[i];
    }
  });
  return nan;
}

// Divides a positive logit of each distinct token of history by penalty (multiplies a negative
// one), each token once; seen is scratch.
void penalize_repeats(std::vector<double>& z, const std::vector<int64_t>& history, double penalty,
                      std::vector<unsigned char>& seen) {
  const int64_t V = static_cast<int64_t>(z.size());
  seen.assign(static_cast<size_t>(V), 0);
  for (const int64_t t : history) {
    EMBER_CHECK(t >= 0 && t < V, "sampling: token ", t, " in the history is outside the vocab of ",
                V);
    if (seen[t]) continue;
    seen[t] = 1;
    z[t] = z[t] > 0 ? z[t] / penalty : z[t] * penalty;
  }
}

// Puts the ids top-k keeps (every id when k is 0 or >= V) into order[0, n) in id order; returns n.
// The k-th largest logit t comes by selection on tmp, a copy; z > t is kept, then ties at t by
// lower id.
int64_t keep_top_k(const std::vector<double>& z, int64_t k, std::vector<double>& tmp,
                   std::vector<int64_t>& order) {
  const int64_t V = static_cast<int64_t>(z.size());
  if (k <= 0 || k >= V) {
    std::iota(order.begin(), order.end(), int64_t{0});
    return V;
  }
  tmp.assign(z.begin(), z.end());
  std::nth_element(tmp.begin(), tmp.begin() + (k - 1), tmp.end(), std::greater<double>());
  const double t = tmp[k - 1];
  int64_t ties = k - std::count_if(z.begin(), z.end(), [t](double x) { return x > t; });
  int64_t j = 0;
  for (int64_t id = 0; id < V; ++id) {
    if (z[id] > t || (z[id] == t && ties-- > 0)) order[j++] = id;
  }
  return k;
}

// The count top-p keeps of the n ids in order, leaving them first in order (not in id order).
// Bisects on the count: invariant mass(best lo) < need <= mass(best hi), where "best m" are the
// m first tokens in `before` order. nth_element splits [lo, hi) at mid, so the work is O(n) on
// average and nothing is fully sorted.
int64_t cut_top_p(const std::vector<double>& z, const std::vector<double>& w, double top_p,
                  int64_t n, std::vector<int64_t>& order) {
  // `before` is a strict total order: larger logit first, ties: lower id.
  auto before = [&](int64_t a, int64_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };
  auto mass = [&](int64_t from, int64_t to) {
    double m = 0;
    for (int64_t i = from; i < to; ++i) m += w[order[i]];
    return m;
  };
  const auto first = order.begin();
  const double need = top_p * mass(0, n) * (1 - 1e-12);
  int64_t lo = 0, hi = n;
  double below = 0;  // mass(best lo)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    std::nth_element(first + lo, first + mid, first + hi, before);
    const double m = mass(lo, mid);
    if (below + m >= need) {
      hi = mid;
    } else {
      below += m;
      lo = mid;
    }
  }
  return hi;
}

// Puts order[0, n) back in id order: sorts a small set, sweeps a large one (seen is scratch).
void restore_id_order(std::vector<int64_t>& order, int64_t n, std::vector<unsigned char>& seen) {
  const int64_t V = static_cast<int64_t>(order.size());
  if (n < V / 16) {
    std::sort(order.begin(), order.begin() + n);
    return;
  }
  seen.assign(static_cast<size_t>(V), 0);
  for (int64_t i = 0; i < n; ++i) seen[order[i]] = 1;
  int64_t j = 0;
  for (int64_t id = 0; id < V; ++id) {
    if (seen[id]) order[j++] = id;
  }
}

}  // namespace

int64_t TokenSampler::filter(const Tensor& logits, const std::vector<int64_t>& history) const {
  EMBER_CHECK(logits.dim() >= 1 && logits.numel() == logits.size(-1) && logits.numel() > 0,
              "sampling: logits must be one row [..., V], got ", shape_str(logits.shape()));
  const int64_t V = opt_.vocab_limit > 0 ? std::min(logits.numel(), opt_.vocab_limit) : logits.numel();
  const Tensor row = logits.contiguous();
  if (opt_.temperature == 0 && opt_.repetition_penalty == 1) {  // greedy: no copy to double
    const int64_t best = finite_first_max(row, V);
    if (best >= 0) return keep_only(best, V, order_, w_);
    // a NaN or no finite logit: the general path below names which
  }
  const bool nan = logits_to_double(row, V, z_);
  if (opt_.repetition_penalty != 1) penalize_repeats(z_, history, opt_.repetition_penalty, seen_);
  const int64_t best = std::max_element(z_.begin(), z_.end()) - z_.begin();  // first max
  EMBER_CHECK(!nan && std::isfinite(z_[best]), "sampling: the logits hold ",
              nan ? "NaN" : "no finite value", " (the model's output is not finite)");
  if (opt_.temperature == 0) return keep_only(best, V, order_, w_);
  order_.resize(static_cast<size_t>(V));
  w_.resize(static_cast<size_t>(V));
  const double zmax = z_[best], inv_t = 1.0 / opt_.temperature;
  int64_t n = keep_top_k(z_, opt_.top_k, tmp_, order_);
  for (int64_t i = 0; i < n; ++i) w_[order_[i]] = std::exp((z_[order_[i]] - zmax) * inv_t);
  if (opt_.top_p < 1) {
    n = cut_top_p(z_, w_, opt_.top_p, n, order_);
    restore_id_order(order_, n, seen_);
  }
  return n;
}

Candidates TokenSampler::candidates(const Tensor& logits,
                                    const std::vector<int64_t>& history) const {
  const int64_t n = filter(logits, history);
  Candidates c;
  c.tokens.assign(order_.begin(), order_.begin() + n);
  c.probs.resize(static_cast<size_t>(n));
  double kept = 0;
  for (int64_t i = 0; i < n; ++i) kept += c.probs[i] = w_[c.tokens[i]];
  for (double& p : c.probs) p /= kept;
  return c;
}

int64_t TokenSampler::sample(const Tensor& logits, const std::vector<int64_t>& history) {
  const int64_t n = filter(logits, history);    // in scratch: no allocation per draw
  if (opt_.temperature == 0) return order_[0];  // greedy: no draw
  const auto bits = philox4x32(gen_.seed, gen_.advance(1));
  double kept = 0;
  for (int64_t i = 0; i < n; ++i) kept += w_[order_[i]];
  const double target = uniform_double(bits[0], bits[1]) * kept;
  double cumulative = 0;
  for (int64_t i = 0; i < n; ++i) {
    cumulative += w_[order_[i]];
    if (target < cumulative) return order_[i];
  }
  return order_[n - 1];  // target above the rounded total
}

}  // namespace ember::inference
