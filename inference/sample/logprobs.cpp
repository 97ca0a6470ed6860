// Log-softmax of one logits row (divided by a temperature) in double and its top-n tokens
// (selection, then a sort of n).
#include "inference/sample/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace ember::inference {

TokenLogprob token_logprob(const float* logits, int64_t vocab, int64_t token, int64_t top_n,
                           double temperature) {
  // x / 1 and (x - m) / 1 are exact: at temperature 1 these are the raw logits' bits.
  const double t = temperature;
  double m = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) m = std::max(m, static_cast<double>(logits[i]));
  double s = 0;
  for (int64_t i = 0; i < vocab; ++i) s += std::exp((static_cast<double>(logits[i]) - m) / t);
  const double log_z = m / t + std::log(s);
  TokenLogprob out;
  out.token = token;
  out.logprob = static_cast<double>(logits[token]) / t - log_z;
  const int64_t n = std::min(top_n, vocab);
  if (n <= 0) return out;
  std::vector<int64_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), int64_t{0});
  const auto before = [logits](int64_t a, int64_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), before);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[static_cast<size_t>(i)];
    out.top.emplace_back(id, static_cast<double>(logits[id]) / t - log_z);
  }
  return out;
}

}  // namespace ember::inference
