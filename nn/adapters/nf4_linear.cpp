// Nf4Linear: the nf4_linear op plus an optional frozen bias.
#include "nn/adapters/nf4_linear.h"

#include "autograd/ops.h"

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

Variable Nf4Linear::forward(const Variable& x) const {
  Variable y = nf4_linear(x, weight_);
  return bias_.defined() ? add(y, bias_) : y;
}

Tensor Nf4Linear::dequantized_weight(DType dtype) const {
  return kernels::nf4_dequantize(*weight_, dtype);
}

}  // namespace ember::nn
