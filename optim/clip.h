// Gradient clipping by global L2 norm (torch.nn.utils.clip_grad_norm_):
//   norm = sqrt(sum over all grads of g^2);  when max_norm > 0,
//   g *= min(1, max_norm / (norm + 1e-6)).  Returns the pre-clip norm.
#pragma once
#include <vector>

#include "autograd/variable.h"

namespace ember::optim {

double grad_norm(const std::vector<Variable>& params);
// min(1, max_norm / (norm + 1e-6)), or 1 when max_norm <= 0: the factor
// clip_grad_norm multiplies the gradients by (or Optimizer::step's grad_scale).
double clip_coefficient(double norm, double max_norm);
double clip_grad_norm(const std::vector<Variable>& params, double max_norm);

}  // namespace ember::optim
