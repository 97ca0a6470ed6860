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

int64_t TokenSampler::filter(const Tensor& logits, const std::vector<int64_t>& history) const {
  EMBER_CHECK(logits.dim() >= 1 && logits.numel() == logits.size(-1) && logits.numel() > 0,
              "sampling: logits must be one row [..., V], got ", shape_str(logits.shape()));
  const int64_t V = opt_.vocab_limit > 0 ? std::min(logits.numel(), opt_.vocab_limit) : logits.numel();
  const Tensor row = logits.contiguous();
  if (opt_.temperature == 0 && opt_.repetition_penalty == 1) {  // greedy: no copy to double
    // The first maximum (converting to double keeps the order, so it is the general path's).
    int64_t best = -1;
    dispatch_float(row.dtype(), "sampling", [&](auto tag) {
      using T = decltype(tag);
      const T* p = row.data<T>();
      const int64_t at = kernels::argmax_row(p, V);  // a NaN's index if there is one
      if (std::isfinite(p[at])) best = at;
    });
    if (best >= 0) {
      order_.resize(static_cast<size_t>(V));
      w_.resize(static_cast<size_t>(V));
      order_[0] = best;
      w_[best] = 1;
      return 1;
    }  // a NaN or no finite logit: the general path below names which
  }
  z_.resize(static_cast<size_t>(V));
  bool nan = false;
  dispatch_float(row.dtype(), "sampling", [&](auto tag) {
    using T = decltype(tag);
    const T* p = row.data<T>();
    for (int64_t i = 0; i < V; ++i) {
      z_[i] = static_cast<double>(p[i]);
      nan |= z_[i] != z_[i];
    }
  });
  if (opt_.repetition_penalty != 1) {  // each distinct seen token once
    seen_.assign(static_cast<size_t>(V), 0);
    for (const int64_t t : history) {
      EMBER_CHECK(t >= 0 && t < V, "sampling: token ", t,
                  " in the history is outside the vocab of ", V);
      if (seen_[t]) continue;
      seen_[t] = 1;
      z_[t] = z_[t] > 0 ? z_[t] / opt_.repetition_penalty : z_[t] * opt_.repetition_penalty;
    }
  }
  const int64_t best = std::max_element(z_.begin(), z_.end()) - z_.begin();  // first max
  EMBER_CHECK(!nan && std::isfinite(z_[best]), "sampling: the logits hold ",
              nan ? "NaN" : "no finite value", " (the model's output is not finite)");
  order_.resize(static_cast<size_t>(V));
  w_.resize(static_cast<size_t>(V));
  if (opt_.temperature == 0) {
    order_[0] = best;
    w_[best] = 1;
    return 1;
  }
  const double zmax = z_[best], inv_t = 1.0 / opt_.temperature;
  int64_t n = V;
  if (opt_.top_k > 0 && opt_.top_k < V) {
    // The k-th largest logit t by selection on a copy; keep z > t, then ties at t by lower id:
    // the kept set comes out in id order.
    n = opt_.top_k;
    tmp_.assign(z_.begin(), z_.end());
    std::nth_element(tmp_.begin(), tmp_.begin() + (n - 1), tmp_.end(), std::greater<double>());
    const double t = tmp_[n - 1];
    int64_t ties = n - std::count_if(z_.begin(), z_.end(), [t](double z) { return z > t; });
    int64_t j = 0;
    for (int64_t id = 0; id < V; ++id) {
      if (z_[id] > t || (z_[id] == t && ties-- > 0)) order_[j++] = id;
    }
  } else {
    std::iota(order_.begin(), order_.end(), int64_t{0});
  }
  for (int64_t i = 0; i < n; ++i) w_[order_[i]] = std::exp((z_[order_[i]] - zmax) * inv_t);
  // `before` is a strict total order: larger logit first, ties: lower id.
  auto before = [&](int64_t a, int64_t b) { return z_[a] > z_[b] || (z_[a] == z_[b] && a < b); };
  auto mass = [&](int64_t from, int64_t to) {
    double m = 0;
    for (int64_t i = from; i < to; ++i) m += w_[order_[i]];
    return m;
  };
  const auto first = order_.begin();
  if (opt_.top_p < 1) {
    // Bisect on the count: invariant mass(best lo) < need <= mass(best hi), where "best m"
    // are the m first tokens in `before` order. nth_element splits [lo, hi) at mid, so the
    // work is O(n) on average and nothing is fully sorted.
    const double need = opt_.top_p * mass(0, n) * (1 - 1e-12);
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
    n = hi;
  }
  if (opt_.top_p < 1 && n < V / 16) {  // back to id order: sort a small set, sweep a large one
    std::sort(first, first + n);
  } else if (opt_.top_p < 1) {
    seen_.assign(static_cast<size_t>(V), 0);
    for (int64_t i = 0; i < n; ++i) seen_[order_[i]] = 1;
    int64_t j = 0;
    for (int64_t id = 0; id < V; ++id) {
      if (seen_[id]) order_[j++] = id;
    }
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
