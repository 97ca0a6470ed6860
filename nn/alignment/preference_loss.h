// The pair losses of preference optimisation
// (docs/model.md#preference-optimisation-and-reward-models): dpo, ipo, simpo and orpo, each a
// small function of the per-side sums (nn/alignment/sequence_logprobs.h), the optional SFT
// term, the loss of a step over its pair count and the logged metrics (rewards/chosen,
// rewards/rejected, rewards/margins, rewards/accuracy).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "core/tensor.h"

namespace ember::nn {

enum class PreferenceLossKind { Dpo, Ipo, Simpo, Orpo };

// The options of `ember align` (--loss, --beta, --label-smoothing, --simpo-gamma, --sft-weight).
struct PreferenceOptions {
  PreferenceLossKind loss = PreferenceLossKind::Dpo;
  double beta = 0.1;             // dpo, ipo, orpo 0.1; simpo 2
  double label_smoothing = 0;    // e of dpo, in [0, 0.5)
  double simpo_gamma = 0.5;      // gamma of simpo
  double sft_weight = 0;         // a: adds a * (-l_c) to every loss
};

// "dpo", "ipo", "simpo", "orpo"; anything else is an Error naming --loss.
PreferenceLossKind parse_preference_loss(const std::string& name);
const char* preference_loss_name(PreferenceLossKind loss);
// The defaults of a loss (beta resolved: simpo's 2, the others' 0.1).
PreferenceOptions preference_defaults(PreferenceLossKind loss);
// One-line Errors naming the option: --beta <= 0 (or not finite), --label-smoothing outside
// [0, 0.5), --simpo-gamma not finite, --sft-weight < 0 (or not finite).
void check_preference_options(const PreferenceOptions& options);

// The per-side sums of P pairs: policy log-probabilities (differentiable), scored-token counts
// and the reference model's log-probabilities (undefined for simpo and orpo), all [P] in the
// policy's dtype (ref and n are converted to it).
struct PairLogprobs {
  Variable logp_c, logp_r;  // sums over the scored tokens of the chosen / rejected side
  Tensor n_c, n_r;          // their numbers of scored tokens (>= 1)
  Tensor ref_c, ref_r;      // the reference's sums
};

// Per-pair losses [P] (docs/model.md#dpo and below), h = (logp_c - ref_c) - (logp_r - ref_r):
//   dpo:   -(1 - e) log sigmoid(beta h) - e log sigmoid(-beta h)
//   ipo:   (h' - 1 / (2 beta))^2,  h' = (logp_c - ref_c) / n_c - (logp_r - ref_r) / n_r
//   simpo: -log sigmoid(beta (l_c - l_r) - gamma),  l = logp / n
//   orpo:  -l_c - beta log sigmoid((l_c - l_r) - (log(1 - e^l_c) - log(1 - e^l_r)))
Variable dpo_loss(const PairLogprobs& p, double beta, double label_smoothing);
Variable ipo_loss(const PairLogprobs& p, double beta);
Variable simpo_loss(const PairLogprobs& p, double beta, double gamma);
Variable orpo_loss(const PairLogprobs& p, double beta);

// Sums over a micro-batch's pairs: add them over micro-steps and ranks, then divide by the
// step's pair count (means()). Rewards: beta (logp - ref) (dpo, ipo); beta l (simpo, orpo).
struct PreferenceMetrics {
  double loss = 0;      // per-pair losses, the SFT term included
  double chosen = 0;    // chosen rewards
  double rejected = 0;  // rejected rewards
  double correct = 0;   // pairs whose chosen reward is strictly greater
  double pairs = 0;
  PreferenceMetrics& operator+=(const PreferenceMetrics& o);
  // The metrics.jsonl keys: loss, rewards/chosen, rewards/rejected, rewards/margins,
  // rewards/accuracy, each the sum over pairs divided by their number.
  std::vector<std::pair<std::string, double>> means() const;
};

struct PreferenceLossResult {
  Variable loss;  // sum over the pairs of (pair loss + sft_weight (-l_c)) / norm
  PreferenceMetrics sums;
};

// The loss of the P pairs of a micro-batch with norm = the step's pair count over all its
// micro-steps and ranks (docs/model.md#loss-of-an-alignment-step): summing the micro-batches'
// gradients gives the gradient of the mean over the whole step. norm must be > 0.
PreferenceLossResult preference_loss(const PreferenceOptions& options, const PairLogprobs& pairs,
                                     double norm);

}  // namespace ember::nn
