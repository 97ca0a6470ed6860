// Nf4Linear: the nf4_linear op plus an optional frozen bias.
#include "nn/adapters/nf4_linear.h"

#include "autograd/ops.h"
#include "autograd/parallel_ops.h"

namespace ember::nn {

Nf4Linear::Nf4Linear(std::shared_ptr<const kernels::Nf4Tensor> weight, const Tensor& bias)
    : weight_(std::move(weight)) {
  EMBER_CHECK(weight_ && weight_->shape.size() == 2,
              "Nf4Linear: the weight must be a 2-D NF4 tensor");
  EMBER_CHECK(!bias.defined() || bias.shape() == Shape{weight_->shape[0]},
              "Nf4Linear: bias must be [", weight_->shape[0], "], got ", shape_str(bias.shape()));
  if (bias.defined()) bias_ = register_parameter("bias", bias, false);
}

std::shared_ptr<Nf4Linear> Nf4Linear::quantize(const Linear& linear, bool double_quant) {
  EMBER_CHECK(!linear.added_rows().defined(),
              "Nf4Linear: cannot quantize a Linear with added rows");
  auto w = std::make_shared<const kernels::Nf4Tensor>(
      kernels::nf4_quantize(linear.weight().data().to(DType::Float32), double_quant));
  auto q = std::make_shared<Nf4Linear>(std::move(w));
  if (linear.bias().defined()) {
    q->bias_ = q->share_parameter("bias", linear.bias());
    q->bias_.set_requires_grad(false);
  }
  return q;
}

std::shared_ptr<Nf4Linear> Nf4Linear::quantize_shard(const Tensor& whole, const Variable& bias,
                                                     bool double_quant, TensorSplit split,
                                                     int64_t rank, int64_t T,
                                                     const std::string& name) {
  EMBER_CHECK(whole.dim() == 2 && (split == TensorSplit::Rows || split == TensorSplit::Columns),
              name, ": only a projection split by rows or columns is quantized as a shard");
  const kernels::Nf4Tensor q = kernels::nf4_quantize(whole.to(DType::Float32), double_quant);
  const int64_t dim = split == TensorSplit::Rows ? 0 : 1, n = whole.size(dim) / T;
  const std::string what = "--tp " + std::to_string(T) + ": " + name;
  auto w = std::make_shared<const kernels::Nf4Tensor>(
      dim == 0 ? kernels::nf4_rows(q, rank * n, n, what) : kernels::nf4_columns(q, rank * n, n, what));
  auto out = std::make_shared<Nf4Linear>(std::move(w));
  if (bias.defined()) {
    out->bias_ = out->share_parameter("bias", bias);
    out->bias_.set_requires_grad(false);
  }
  return out;
}

Variable Nf4Linear::row_parallel_forward(const Variable& x, const ParallelGroup& g) const {
  const Variable y = reduce_from_group(nf4_linear(x, weight_), g);
  return bias_.defined() ? add(y, bias_) : y;
}

Variable Nf4Linear::forward(const Variable& x) const {
  Variable y = nf4_linear(x, weight_);
  return bias_.defined() ? add(y, bias_) : y;
}

Tensor Nf4Linear::dequantized_weight(DType dtype) const {
  return kernels::nf4_dequantize(*weight_, dtype);
}

}  // namespace ember::nn
