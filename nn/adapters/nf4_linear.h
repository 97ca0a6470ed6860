// Nf4Linear: a frozen projection whose weight W [out, in] is stored in NF4
// (QLoRA, docs/model.md#nf4-qlora; core/kernels/nf4.h): y = x W^T (+ b), W
// dequantized tile by tile inside the nf4_linear op. The NF4 weight is not a
// parameter (nothing to train or save); the optional float bias is one, frozen.
#pragma once
#include <memory>

#include "core/kernels/nf4.h"
#include "nn/layers.h"
#include "nn/tensor_parallel.h"

namespace ember::nn {

class Nf4Linear : public UnaryModule, public RowParallelModule {
 public:
  explicit Nf4Linear(std::shared_ptr<const kernels::Nf4Tensor> weight,
                     const Tensor& bias = Tensor());
  // The NF4 form of a Linear's weight (nf4-dq when double_quant), sharing its bias; keeps no
  // reference to the float weight. The Linear must have no added rows.
  static std::shared_ptr<Nf4Linear> quantize(const Linear& linear, bool double_quant);
  // Tensor rank `rank`'s shard (split Rows or Columns over T ranks) of the NF4 form of the whole
  // float weight `whole`, quantized whole as one rank quantizes it and cut (kernels::nf4_rows,
  // nf4_columns: an Error naming `name` and T when its blocks do not align with the split);
  // bias: this rank's (frozen) bias, shared, or undefined.
  static std::shared_ptr<Nf4Linear> quantize_shard(const Tensor& whole, const Variable& bias,
                                                   bool double_quant, TensorSplit split,
                                                   int64_t rank, int64_t T, const std::string& name);
  Variable forward(const Variable& x) const override;
  // This rank's input columns: the products summed over g, then the bias once.
  Variable row_parallel_forward(const Variable& x, const ParallelGroup& g) const override;

  const std::shared_ptr<const kernels::Nf4Tensor>& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }
  int64_t in_features() const { return weight_->shape[1]; }
  int64_t out_features() const { return weight_->shape[0]; }
  // The dequantized W (code * absmax) in dtype.
  Tensor dequantized_weight(DType dtype) const;

 private:
  std::shared_ptr<const kernels::Nf4Tensor> weight_;
  Variable bias_;
};

}  // namespace ember::nn
