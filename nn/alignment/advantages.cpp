// GRPO's group advantages, PPO's per-token rewards, GAE and whitening
// (docs/model.md#advantages), in double over plain tensors.
#include "nn/alignment/advantages.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "nn/alignment/token_values.h"

namespace ember::nn {

Tensor grpo_advantages(const Tensor& rewards, int64_t group_size) {
  EMBER_CHECK(group_size >= 2, "grpo_advantages: the group size must be >= 2 (a completion's ",
              "advantage compares it with the others of its prompt), got ", group_size);
  EMBER_CHECK(rewards.defined() && rewards.dim() == 1 && rewards.numel() >= group_size &&
                  rewards.numel() % group_size == 0,
              "grpo_advantages: rewards must be [N G] (N prompts x G = ", group_size,
              " completions, prompt-major), got ",
              rewards.defined() ? shape_str(rewards.shape()) : std::string("none"));
  const std::vector<double> r = rewards.to(DType::Float64).to_vector<double>();
  std::vector<double> a(r.size());
  const size_t G = static_cast<size_t>(group_size);
  for (size_t i0 = 0; i0 < r.size(); i0 += G) {
    double mean = 0;
    for (size_t j = 0; j < G; ++j) {
      EMBER_CHECK(std::isfinite(r[i0 + j]), "grpo_advantages: reward ", i0 + j, " is ", r[i0 + j],
                  "; every reward must be a finite number");
      mean += r[i0 + j];
    }
    mean /= static_cast<double>(G);
    double ss = 0;
    for (size_t j = 0; j < G; ++j) ss += (r[i0 + j] - mean) * (r[i0 + j] - mean);
    const double std = std::sqrt(ss / static_cast<double>(G - 1));
    for (size_t j = 0; j < G; ++j) a[i0 + j] = (r[i0 + j] - mean) / (std + 1e-4);
  }
  return Tensor::from_vector<double>(a);
}

Tensor ppo_token_rewards(const Tensor& scores, const Tensor& logp_old, const Tensor& ref,
                         const Tensor& mask, double kl) {
  const char* fn = "ppo_token_rewards";
  const std::vector<double> m = token_mask(fn, mask);
  const Shape shape = mask.shape();
  const int64_t B = shape[0], T = shape[1];
  const std::vector<double> old = token_values(fn, "logp_old", logp_old, shape);
  const std::vector<double> rf = token_values(fn, "ref", ref, shape);
  const std::vector<double> s = token_values(fn, "scores", scores, {B});
  std::vector<double> r(m.size(), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    int64_t last = -1;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t i = b * T + t;
      if (m[i] == 0) continue;
      r[i] = -kl * (old[i] - rf[i]);
      last = i;
    }
    EMBER_CHECK(last >= 0, fn, ": row ", b, " has no completion token to receive its score");
    r[last] += s[b];
  }
  return tensor_of(r, shape, DType::Float64);
}

Gae gae(const Tensor& rewards, const Tensor& values_old, const Tensor& mask, double gamma,
        double lambda) {
  const char* fn = "gae";
  const std::vector<double> m = token_mask(fn, mask);
  const Shape shape = mask.shape();
  const int64_t B = shape[0], T = shape[1];
  const std::vector<double> r = token_values(fn, "rewards", rewards, shape);
  const std::vector<double> v = token_values(fn, "values_old", values_old, shape);
  std::vector<double> adv(m.size(), 0.0), ret(m.size(), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    double next_value = 0, next_adv = 0;  // after the last completion token
    for (int64_t t = T - 1; t >= 0; --t) {
      const int64_t i = b * T + t;
      if (m[i] == 0) continue;
      const double delta = r[i] + gamma * next_value - v[i];
      adv[i] = delta + gamma * lambda * next_adv;
      ret[i] = adv[i] + v[i];
      next_value = v[i];
      next_adv = adv[i];
    }
  }
  return {tensor_of(adv, shape, DType::Float64), tensor_of(ret, shape, DType::Float64)};
}

MomentSums& MomentSums::operator+=(const MomentSums& o) {
  n += o.n;
  sum += o.sum;
  sum_sq += o.sum_sq;
  return *this;
}

double MomentSums::mean() const {
  return n > 0 ? sum / n : 0;
}

double MomentSums::unbiased_var() const {
  EMBER_CHECK(n >= 2, "whitening needs at least 2 completion tokens in the step, got ", n);
  return std::max(0.0, (sum_sq - sum * sum / n) / (n - 1));
}

MomentSums moment_sums(const Tensor& values, const Tensor& mask) {
  const std::vector<double> m = token_mask("moment_sums", mask);
  const std::vector<double> x = token_values("moment_sums", "values", values, mask.shape());
  MomentSums s;
  for (size_t i = 0; i < m.size(); ++i) {
    if (m[i] == 0) continue;
    s.n += 1;
    s.sum += x[i];
    s.sum_sq += x[i] * x[i];
  }
  return s;
}

Tensor whiten(const Tensor& values, const Tensor& mask, const MomentSums& step) {
  const std::vector<double> m = token_mask("whiten", mask);
  std::vector<double> x = token_values("whiten", "values", values, mask.shape());
  const double mean = step.mean(), scale = 1 / std::sqrt(step.unbiased_var() + 1e-8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = m[i] == 0 ? 0 : (x[i] - mean) * scale;
  return tensor_of(x, mask.shape(), DType::Float64);
}

}  // namespace ember::nn
