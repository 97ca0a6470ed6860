// gradcheck: compares the analytic Jacobian (one backward per output element)
// with central finite differences, like torch.autograd.gradcheck.
// float64 inputs: 2-point stencil, PyTorch's defaults eps 1e-6, atol 1e-5,
// rtol 1e-3. float32 inputs (kernels that exist only in float32): 4-point
// stencil (f(x-2h) - 8f(x-h) + 8f(x+h) - f(x+2h)) / 12h with looser defaults.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/variable.h"

namespace ember {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  // Defaults used for float32 inputs instead of the three above.
  double eps_f32 = 1e-2;
  double atol_f32 = 2e-3;
  double rtol_f32 = 2e-2;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // which input, element and output disagree, with both values
};

using GradcheckFn = std::function<Variable(const std::vector<Variable>&)>;

// Checks d fn(inputs) / d input for every input with requires_grad.
GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Variable>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace ember
