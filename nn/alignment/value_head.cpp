// ValueHead: a bias-free Linear to one output over every position of the final-norm output
// (docs/model.md#value-head).
#include "nn/alignment/value_head.h"

#include <string>

#include "autograd/ops.h"

namespace ember::nn {

ValueHead::ValueHead(int64_t d_model, Generator& gen, DType dtype) {
  value_ = register_module("value", std::make_shared<Linear>(d_model, 1, false, gen, 0.02, dtype));
}

ValueHead::ValueHead(const Tensor& score_weight) {
  EMBER_CHECK(score_weight.defined() && score_weight.dim() == 2 && score_weight.size(0) == 1,
              "ValueHead: a score head's weight must be [1, d_model], got ",
              score_weight.defined() ? shape_str(score_weight.shape()) : std::string("none"));
  value_ = register_module("value", std::make_shared<Linear>(score_weight.clone()));
}

Variable ValueHead::forward(const Variable& hidden) const {
  EMBER_CHECK(hidden.dim() == 3 && hidden.size(2) == weight().size(1),
              "ValueHead: hidden states must be [B, T, ", weight().size(1), "], got ",
              shape_str(hidden.shape()));
  return reshape(value_->forward(hidden), {hidden.size(0), hidden.size(1)});
}

}  // namespace ember::nn
