// LoRA (SPEC.md section 9): a frozen Linear W plus a trained low-rank update,
// y = x W^T (+ b) + (alpha / r) * dropout(x) A^T B^T, A [r, in], B [out, r].
// The base tensors keep their names (`<target>.weight`, `.bias`); the adapters
// are `<target>.lora_A.weight` and `<target>.lora_B.weight`, as in PEFT.
#pragma once
#include <memory>

#include "core/rng.h"
#include "nn/layers.h"

namespace ember::nn {

struct LoRAOptions {
  int64_t r = 8;
  double alpha = 16;
  double dropout = 0;
};

class LoRALinear : public UnaryModule {
 public:
  // Freezes base (requires_grad false on its weight and bias) and adds A
  // uniform in (-1/sqrt(in), 1/sqrt(in)) drawn from gen, B = 0. dropout_gen
  // feeds the dropout on x (train mode only; required when dropout > 0).
  LoRALinear(std::shared_ptr<Linear> base, const LoRAOptions& options, Generator& gen,
             std::shared_ptr<Generator> dropout_gen = nullptr);
  Variable forward(const Variable& x) const override;

  // W' = W + (alpha / r) B A (no graph).
  Tensor merged_weight() const;
  // A plain Linear over W' and the base's bias: the forward of this module in eval mode.
  std::shared_ptr<Linear> merge() const;

  double scale() const { return options_.alpha / static_cast<double>(options_.r); }
  const LoRAOptions& options() const { return options_; }
  const std::shared_ptr<Linear>& base() const { return base_; }
  const Variable& lora_A() const { return lora_a_->weight(); }
  const Variable& lora_B() const { return lora_b_->weight(); }

 private:
  std::shared_ptr<Linear> base_;
  LoRAOptions options_;
  std::shared_ptr<Linear> lora_a_, lora_b_;
  std::shared_ptr<Dropout> dropout_;
};

}  // namespace ember::nn
