// LoRA (docs/model.md#lora): a frozen projection W plus a trained low-rank update,
// y = x W^T (+ b) + (alpha / r) * dropout(x) A^T B^T, A [r, in], B [out, r].
// The base is a Linear or an NF4 Nf4Linear (QLoRA). The base tensors keep their
// names (`<target>.weight`, `.bias`); the adapters are `<target>.lora_A.weight`
// and `<target>.lora_B.weight`, as in PEFT. LoRAAdapter is the update alone (the
// head of tied embeddings, whose base is the embedding matrix).
#pragma once
#include <memory>

#include "core/rng.h"
#include "nn/layers.h"
#include "nn/adapters/nf4_linear.h"
#include "nn/tensor_parallel.h"

namespace ember::nn {

// While one lives on this thread, every adapter is switched off: a LoRALinear computes its base
// alone and a LoRAAdapter adds nothing, so the model is its base (the reference model of
// preference optimisation, docs/model.md#lora) without a second copy of it.
class AdaptersOffGuard {
 public:
  AdaptersOffGuard();
  ~AdaptersOffGuard();
  AdaptersOffGuard(const AdaptersOffGuard&) = delete;
  AdaptersOffGuard& operator=(const AdaptersOffGuard&) = delete;
  static bool active();

 private:
  bool previous_;
};

struct LoRAOptions {
  int64_t r = 8;
  double alpha = 16;
  double dropout = 0;
};

// The whole [out, in] of a base that holds a tensor-parallel shard (0: the base's own size): A
// and B are drawn at it, as one rank draws them; add_adapters then keeps their shards.
struct LoRAWholeSize {
  int64_t out = 0, in = 0;
};

// How an adapter runs under tensor parallelism (nn/tensor_parallel.h). Column: its base's
// output rows are split and its input is whole: A whole, used through copy_to_group (its
// gradient summed over the group), B this rank's rows. Row: its base's input columns are
// split: A this rank's columns, the low-rank product x_t A_t^T summed over the group, then B,
// whole, applied once; dropout takes this rank's columns of the whole input's mask.
enum class LoRAParallel { None, Column, Row };

// delta(x) = (alpha / r) * dropout(x) A^T B^T; x [..., in] -> [..., out].
class LoRAAdapter : public UnaryModule {
 public:
  // A uniform in (-1/sqrt(in), 1/sqrt(in)) drawn from gen, B = 0, both of dtype. dropout_gen
  // feeds the dropout on x (train mode only; required when dropout > 0).
  LoRAAdapter(int64_t in, int64_t out, const LoRAOptions& options, Generator& gen, DType dtype,
              std::shared_ptr<Generator> dropout_gen = nullptr);
  // The update alone (zeros under an AdaptersOffGuard).
  Variable forward(const Variable& x) const override;
  // dropout(x) as the update sees it (x itself in eval mode or with dropout 0).
  Variable dropout_input(const Variable& x) const;
  // (alpha / r) B A [out, in] (no graph).
  Tensor delta_weight() const;
  // Tensor parallelism over group (the adapters hold their shards already); whole_in: the
  // whole input width (Row: what the dropout mask is drawn for).
  void set_tensor_parallel(const ParallelGroup* group, LoRAParallel mode, int64_t whole_in);

  double scale() const { return options_.alpha / static_cast<double>(options_.r); }
  const LoRAOptions& options() const { return options_; }
  const Variable& lora_A() const { return lora_a_->weight(); }
  const Variable& lora_B() const { return lora_b_->weight(); }

 private:
  LoRAOptions options_;
  std::shared_ptr<Linear> lora_a_, lora_b_;
  std::shared_ptr<Dropout> dropout_;
  std::shared_ptr<Generator> dropout_gen_;
  const ParallelGroup* tp_ = nullptr;
  LoRAParallel mode_ = LoRAParallel::None;
  int64_t whole_in_ = 0;
  // Row: dropout of this rank's columns x_t of the whole input, as the whole's mask has them.
  Variable row_dropout(const Variable& x) const;
};

// base(x) + delta(x) (base(x) alone under an AdaptersOffGuard). The base's parameters are shared under this module's own names (the
// base is not a child, so no extra name level); its weight and bias are frozen
// (requires_grad false), its added rows (nn/adapters/adapters.h add_vocab_rows) are not.
class LoRALinear : public LoRAAdapter, public RowParallelModule {
 public:
  LoRALinear(std::shared_ptr<Linear> base, const LoRAOptions& options, Generator& gen,
             std::shared_ptr<Generator> dropout_gen = nullptr, LoRAWholeSize whole = {});
  // Over an NF4 base: the adapters are of dtype.
  LoRALinear(std::shared_ptr<Nf4Linear> base, const LoRAOptions& options, Generator& gen,
             std::shared_ptr<Generator> dropout_gen = nullptr, DType dtype = DType::Float32,
             LoRAWholeSize whole = {});
  Variable forward(const Variable& x) const override;
  // The row-parallel base (its partial products summed over g, its bias once), then the update.
  Variable row_parallel_forward(const Variable& x, const ParallelGroup& g) const override;

  // W' = W + (alpha / r) B A (no graph); an NF4 W dequantized, added rows included.
  Tensor merged_weight() const;
  // A plain Linear over W' and the base's bias: the forward of this module in eval mode.
  std::shared_ptr<Linear> merge() const;
  // The base's bias (undefined when it has none).
  const Variable& base_bias() const;

  // The base: a Linear, or (QLoRA) an Nf4Linear; the other pointer is null.
  const std::shared_ptr<Linear>& base() const { return linear_; }
  const std::shared_ptr<Nf4Linear>& nf4_base() const { return nf4_; }
  const UnaryModule& base_module() const;

 private:
  std::shared_ptr<Linear> linear_;
  std::shared_ptr<Nf4Linear> nf4_;
};

}  // namespace ember::nn
