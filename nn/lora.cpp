// LoRALinear: the base Linear's parameters shared under this module's own
// names (the base is not a child, so no extra name level), the adapters as
// two bias-free Linear children, x -> A -> B scaled by alpha / r.
#include "nn/lora.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/matmul.h"

namespace ember::nn {

static void check_options(const LoRAOptions& o) {
  EMBER_CHECK(o.r >= 1, "LoRA: r must be >= 1, got ", o.r);
  EMBER_CHECK(o.alpha > 0, "LoRA: alpha must be > 0, got ", o.alpha);
  EMBER_CHECK(o.dropout >= 0 && o.dropout < 1, "LoRA: dropout must be in [0, 1), got ", o.dropout);
}

LoRALinear::LoRALinear(std::shared_ptr<Linear> base, const LoRAOptions& options, Generator& gen,
                       std::shared_ptr<Generator> dropout_gen)
    : base_(std::move(base)), options_(options) {
  check_options(options_);
  EMBER_CHECK(base_ != nullptr, "LoRA: the base Linear is null");
  EMBER_CHECK(options_.dropout == 0 || dropout_gen != nullptr,
              "LoRA: dropout ", options_.dropout, " needs a dropout generator");
  const Tensor& w = base_->weight().data();
  const int64_t out = w.size(0), in = w.size(1);
  share_parameter("weight", base_->weight()).set_requires_grad(false);
  if (base_->bias().defined()) share_parameter("bias", base_->bias()).set_requires_grad(false);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  lora_a_ = register_module(
      "lora_A", std::make_shared<Linear>(Tensor::rand({options_.r, in}, gen, w.dtype(), -bound, bound)));
  lora_b_ = register_module("lora_B", std::make_shared<Linear>(Tensor::zeros({out, options_.r}, w.dtype())));
  if (options_.dropout > 0) {
    dropout_ = register_module("lora_dropout", std::make_shared<Dropout>(options_.dropout, std::move(dropout_gen)));
  }
}

Variable LoRALinear::forward(const Variable& x) const {
  const Variable xd = dropout_ ? dropout_->forward(x) : x;
  return add(base_->forward(x), mul_scalar(lora_b_->forward(lora_a_->forward(xd)), scale()));
}

Tensor LoRALinear::merged_weight() const {
  NoGradGuard no_grad;
  const Tensor ba = kernels::matmul(lora_B().data(), lora_A().data(), false, false);
  return kernels::add(base_->weight().data(), kernels::mul_scalar(ba, scale()));
}

std::shared_ptr<Linear> LoRALinear::merge() const {
  Tensor bias;
  if (base_->bias().defined()) bias = base_->bias().data().clone();
  return std::make_shared<Linear>(merged_weight(), bias);
}

}  // namespace ember::nn
