// Linear, Embedding, norms and dropout: thin wrappers over autograd ops.
#include "nn/layers.h"

#include "autograd/ops.h"

namespace ember::nn {

Linear::Linear(int64_t in, int64_t out, bool bias, Generator& gen, double init_std, DType dtype) {
  weight_ = register_parameter("weight", Tensor::randn({out, in}, gen, dtype, 0, init_std));
  if (bias) bias_ = register_parameter("bias", Tensor::zeros({out}, dtype));
}

Linear::Linear(const Tensor& weight, const Tensor& bias, bool requires_grad) {
  EMBER_CHECK(weight.dim() == 2, "Linear: weight must be 2-D [out, in], got ", shape_str(weight.shape()));
  EMBER_CHECK(!bias.defined() || bias.shape() == Shape{weight.size(0)}, "Linear: bias must be [",
              weight.size(0), "], got ", shape_str(bias.shape()));
  weight_ = register_parameter("weight", weight, requires_grad);
  if (bias.defined()) bias_ = register_parameter("bias", bias, requires_grad);
}

Variable Linear::forward(const Variable& x) const {
  Variable y = matmul(x, weight_, false, true);
  return bias_.defined() ? add(y, bias_) : y;
}

Embedding::Embedding(int64_t num, int64_t dim, Generator& gen, double init_std, DType dtype) {
  weight_ = register_parameter("weight", Tensor::randn({num, dim}, gen, dtype, 0, init_std));
}

Variable Embedding::forward(const Tensor& ids) const { return embedding(weight_, ids); }

RMSNorm::RMSNorm(int64_t dim, double eps, DType dtype) : eps_(eps) {
  weight_ = register_parameter("weight", Tensor::ones({dim}, dtype));
}

Variable RMSNorm::forward(const Variable& x) const { return rms_norm(x, weight_, eps_); }

LayerNorm::LayerNorm(int64_t dim, double eps, bool bias, DType dtype) : eps_(eps) {
  weight_ = register_parameter("weight", Tensor::ones({dim}, dtype));
  if (bias) bias_ = register_parameter("bias", Tensor::zeros({dim}, dtype));
}

Variable LayerNorm::forward(const Variable& x) const { return layer_norm(x, weight_, bias_, eps_); }

std::shared_ptr<UnaryModule> make_norm(const std::string& kind, int64_t dim, double eps,
                                       DType dtype) {
  if (kind == "rmsnorm") return std::make_shared<RMSNorm>(dim, eps, dtype);
  if (kind == "layernorm") return std::make_shared<LayerNorm>(dim, eps, true, dtype);
  throw Error("norm must be \"rmsnorm\" or \"layernorm\", got \"" + kind + "\"");
}

Variable Dropout::forward(const Variable& x) const {
  if (!is_training() || p_ == 0) return x;
  const uint64_t offset = gen_->advance(static_cast<uint64_t>(x.numel()));
  return dropout(x, p_, gen_->seed, offset);
}

}  // namespace ember::nn
