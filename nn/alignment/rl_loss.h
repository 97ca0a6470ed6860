// The losses of RL from a reward (docs/model.md#rl-from-a-reward): the k3 estimator, GRPO's
// clipped surrogate with its k3 term and PPO's clipped surrogate with the clipped value loss,
// per completion token, each over the step's completion-token count, with the options of
// `ember rl` and the logged metrics (loss, kl, clip_fraction; value_loss for ppo).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "core/tensor.h"

namespace ember::nn {

enum class RlAlgo { Grpo, Ppo };

// "grpo", "ppo"; anything else is an Error naming --algo.
RlAlgo parse_rl_algo(const std::string& name);
const char* rl_algo_name(RlAlgo algo);

// The loss options of `ember rl` (--algo, --clip-ratio, --kl, --vf-coef).
struct RlOptions {
  RlAlgo algo = RlAlgo::Grpo;
  double clip_ratio = 0.2;  // eps: rho is clipped to [1 - eps, 1 + eps]
  double kl = 0.04;      // grpo: the weight of k3; ppo: of the per-token reward -(logp_old - ref)
  double vf_coef = 0.1;  // ppo: the weight of the value loss
};
// One-line Errors naming the option: --clip-ratio outside (0, 1), --kl < 0, --vf-coef < 0 (or
// any of them not finite).
void check_rl_options(const RlOptions& options);

// PPO's value clipping: V is clipped to [V_old - 0.2, V_old + 0.2].
inline constexpr double kValueClip = 0.2;

// The per-token inputs of a micro-batch, all [B, T] (position t of row b is a completion token
// where mask is 1; elsewhere nothing is read). Tensors are converted to logp's dtype.
struct PolicyTokens {
  Variable logp;    // log-probabilities under the policy being trained (completion_logprobs)
  Tensor logp_old;  // under the policy that sampled the completions (not differentiated)
  Tensor ref;       // under the reference model
  Tensor mask;      // 1 at completion tokens, 0 elsewhere
};

// k3 = exp(ref - logp) - (ref - logp) - 1, elementwise (>= 0, 0 where logp = ref).
Variable k3(const Variable& logp, const Tensor& ref);

// Sums over a micro-batch's completion tokens: add them over micro-steps and ranks, then means().
struct RlMetrics {
  double loss = 0;        // per-token losses (ppo: the value term included)
  double value_loss = 0;  // ppo: 0.5 max((V - R)^2, (V_clipped - R)^2)
  double kl = 0;          // logp_old - ref
  double clipped = 0;     // tokens whose clipped surrogate is taken with a different value
  double tokens = 0;
  bool has_value = false;  // ppo
  RlMetrics& operator+=(const RlMetrics& o);
  // The metrics.jsonl keys: loss, kl, clip_fraction (and value_loss for ppo), each the sum over
  // completion tokens divided by their number.
  std::vector<std::pair<std::string, double>> means() const;
};

struct RlLossResult {
  Variable loss;  // sum over the micro-batch's completion tokens of the per-token loss / norm
  RlMetrics sums;
};

// GRPO: advantages [B] (grpo_advantages of each row's completion), eps = clip_ratio,
// rho = exp(logp - logp_old), per token
//   -min(rho A, clip(rho, 1 - eps, 1 + eps) A) + kl k3(logp, ref)
// summed over the completion tokens and divided by norm = the step's completion-token count
// over all its micro-steps and ranks (> 0), so micro-batches' gradients add up to the step's.
RlLossResult grpo_loss(const PolicyTokens& tokens, const Tensor& advantages,
                       const RlOptions& options, double norm);

// PPO's value inputs, [B, T]: the value head's output (differentiable, read at the position
// whose logits predict the token), its output when the completions were sampled, and the
// returns (gae(...).returns).
struct ValueTokens {
  Variable values;
  Tensor values_old;
  Tensor returns;
};

// PPO: advantages [B, T] (gae, then whiten), per token
//   -min(rho A, clip(rho, 1 - eps, 1 + eps) A)
//   + 0.5 vf_coef max((V - R)^2, (clip(V, V_old - 0.2, V_old + 0.2) - R)^2)
// summed over the completion tokens and divided by norm as grpo_loss.
RlLossResult ppo_loss(const PolicyTokens& tokens, const Tensor& advantages,
                      const ValueTokens& values, const RlOptions& options, double norm);

}  // namespace ember::nn
