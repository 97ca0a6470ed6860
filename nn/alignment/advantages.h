// The advantages of RL from a reward (docs/model.md#advantages): GRPO's group-normalised
// rewards, PPO's per-token rewards (-kl (logp_old - ref), the score on the last completion
// token), GAE with its returns, and the whitening of advantages over a step's completion tokens
// (from sums that add up over micro-batches and ranks). Plain tensors: nothing here is
// differentiated.
#pragma once
#include "core/tensor.h"

namespace ember::nn {

// Rewards [N G] of N prompts with G completions each, prompt-major (completion j of prompt i at
// i G + j), G >= 2 -> float64 [N G]:
//   A_i = (r_i - mean of its group) / (std of its group, unbiased, + 1e-4)
Tensor grpo_advantages(const Tensor& rewards, int64_t group_size);

// PPO's per-token rewards [B, T] (float64, 0 off the mask): -kl (logp_old - ref) at each
// completion token (mask [B, T], 1 at completion tokens; logp_old, ref [B, T]), plus scores[b]
// (scores [B]) on row b's last completion token. Every row must hold a completion token.
Tensor ppo_token_rewards(const Tensor& scores, const Tensor& logp_old, const Tensor& ref,
                         const Tensor& mask, double kl);

struct Gae {
  Tensor advantages;  // [B, T] float64, 0 off the mask
  Tensor returns;     // advantages + values_old, 0 off the mask
};

// GAE over each row's completion tokens in order (rewards, values_old [B, T]), the value after
// the last one 0:  delta_t = r_t + gamma V_next - V_t,  A_t = delta_t + gamma lambda A_next.
Gae gae(const Tensor& rewards, const Tensor& values_old, const Tensor& mask, double gamma = 1,
        double lambda = 0.95);

// The count, sum and sum of squares of values over completion tokens: add a step's micro-batches
// and ranks, then whiten each with the total.
struct MomentSums {
  double n = 0, sum = 0, sum_sq = 0;
  MomentSums& operator+=(const MomentSums& o);
  double mean() const;          // sum / n
  double unbiased_var() const;  // (sum_sq - sum^2 / n) / (n - 1); n >= 2
};
MomentSums moment_sums(const Tensor& values, const Tensor& mask);

// (x - mean) / sqrt(var + 1e-8) at the mask's completion tokens (mean and unbiased var of
// `step`, n >= 2), 0 elsewhere -> float64 [B, T].
Tensor whiten(const Tensor& values, const Tensor& mask, const MomentSums& step);

}  // namespace ember::nn
