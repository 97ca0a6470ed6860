// FFN forward passes, built from autograd ops.
#include "nn/ffn.h"

#include "autograd/ops.h"
#include "autograd/parallel_ops.h"
#include "nn/tensor_parallel.h"

namespace ember::nn {

FFN::FFN(int64_t d_model, int64_t hidden, const std::string& act, bool bias, Generator& init_gen,
         double down_std, DType dtype)
    : act_(act) {
  const bool gated = act == "swiglu" || act == "geglu";
  EMBER_CHECK(gated || act == "gelu" || act == "gelu_tanh" || act == "relu",
              "FFN: unknown activation \"", act, "\" (swiglu, geglu, gelu, gelu_tanh, relu)");
  if (gated) {
    gate_proj_ = std::make_shared<Linear>(d_model, hidden, bias, init_gen, 0.02, dtype);
    register_replaceable("gate_proj", gate_proj_);
  }
  up_proj_ = std::make_shared<Linear>(d_model, hidden, bias, init_gen, 0.02, dtype);
  register_replaceable("up_proj", up_proj_);
  down_proj_ = std::make_shared<Linear>(hidden, d_model, bias, init_gen, down_std, dtype);
  register_replaceable("down_proj", down_proj_);
}

Variable FFN::activate(const Variable& gate, const Variable& up) const {
  if (act_ == "swiglu") return swiglu(gate, up);
  if (act_ == "geglu") return geglu(gate, up);
  if (act_ == "gelu") return gelu(up);
  if (act_ == "gelu_tanh") return gelu_tanh(up);
  return relu(up);
}

Variable FFN::forward(const Variable& x) const {
  const Variable in = tp_ ? copy_to_group(x, *tp_) : x;  // column-parallel gate and up
  const Variable gate = gated() ? gate_proj_->forward(in) : Variable();
  const Variable hidden = activate(gate, up_proj_->forward(in));
  return tp_ ? row_parallel_forward(*down_proj_, hidden, *tp_) : down_proj_->forward(hidden);
}

}  // namespace ember::nn
