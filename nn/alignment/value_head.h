// PPO's value head (docs/model.md#value-head): `value.weight` [1, d_model], no bias, read on the
// final-norm output at every position, so the value of a completion token comes from the
// position whose logits predict it; drawn like the score head or copied from a reward model's.
#pragma once
#include <memory>

#include "core/rng.h"
#include "nn/alignment/reward_model.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace ember::nn {

// V = w . h at each position, w = value.weight [1, d_model].
class ValueHead : public Module {
 public:
  // Drawn normal(0, 0.02) from gen, as ScoreHead (nn/alignment/reward_model.h).
  ValueHead(int64_t d_model, Generator& gen, DType dtype = DType::Float32);
  // A copy of a score head's weight [1, d_model] (a reward model's score.weight), in its dtype.
  explicit ValueHead(const Tensor& score_weight);
  explicit ValueHead(const ScoreHead& score) : ValueHead(score.weight().data()) {}
  // hidden [B, T, d_model] (Transformer::hidden_states) -> values [B, T]: values[b, t] is read
  // at position t, whose logits predict targets[b, t].
  Variable forward(const Variable& hidden) const;
  const Variable& weight() const { return value_->weight(); }
  // The bias-free Linear holding value.weight (registered as a child "value" of a model, its
  // parameter is named `value.weight`).
  const std::shared_ptr<Linear>& linear() const { return value_; }

 private:
  std::shared_ptr<Linear> value_;
};

}  // namespace ember::nn
