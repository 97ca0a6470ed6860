// The reward model's pieces (docs/model.md#reward-model): the score head `score.weight`
// [1, d_model] read on the final-norm output at each side's last token, and the
// Bradley-Terry loss with margin and centring over a step's pair count, with its metrics.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace ember::nn {

// r = w . h at a row's last token, w = score.weight [1, d_model] (no bias), drawn
// normal(0, 0.02) from gen like every Linear (nn/layers.h).
class ScoreHead : public Module {
 public:
  ScoreHead(int64_t d_model, Generator& gen, DType dtype = DType::Float32);
  // hidden [B, T, d_model] (Transformer::hidden_states), last [B] (int): the index in [0, T)
  // of each row's last token (after the cut) -> scores [B].
  Variable forward(const Variable& hidden, const Tensor& last) const;
  const Variable& weight() const { return score_->weight(); }
  // The bias-free Linear holding score.weight (a Transformer of a reward config registers it as
  // its child "score", so its parameter there is named `score.weight` too).
  const std::shared_ptr<Linear>& linear() const { return score_; }

 private:
  std::shared_ptr<Linear> score_;
};

// Sums over a micro-batch's pairs: add them over micro-steps and ranks, then means().
struct RewardMetrics {
  double loss = 0;     // per-pair losses, centring included
  double correct = 0;  // pairs with r_c > r_r
  double margin = 0;   // r_c - r_r
  double pairs = 0;
  RewardMetrics& operator+=(const RewardMetrics& o);
  // The metrics.jsonl keys: loss, accuracy, margin (each the sum over pairs / their number).
  std::vector<std::pair<std::string, double>> means() const;
};

struct RewardLossResult {
  Variable loss;
  RewardMetrics sums;
};

// Scores r_c, r_r [P] of the chosen and rejected sides, margin m [P] (undefined: 0),
// c = center_coef >= 0, norm = the step's pair count over its micro-steps and ranks (> 0):
//   loss = sum over pairs of (-log sigmoid(r_c - r_r - m) + c (r_c + r_r)^2) / norm
RewardLossResult reward_loss(const Variable& r_c, const Variable& r_r, const Tensor& margin,
                             double center_coef, double norm);

}  // namespace ember::nn
