// gradcheck: analytic Jacobian column by column (a backward pass per output
// element) against a central-difference Jacobian row by row (two or four
// forward passes per input element), in the input's own dtype.
#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/grad_mode.h"

namespace ember {
namespace {

// Element k (row-major) of a tensor as a full index.
std::vector<int64_t> unravel(int64_t k, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = k % shape[d];
    k /= shape[d];
  }
  return idx;
}

std::vector<double> flat_output(const GradcheckFn& fn, const std::vector<Variable>& inputs) {
  NoGradGuard no_grad;
  return fn(inputs).data().to_vector<double>();
}

}  // namespace

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Variable>& inputs,
                          const GradcheckOptions& options) {
  GradcheckResult result;
  const Variable probe = fn(inputs);
  EMBER_CHECK(probe.defined(), "gradcheck: the function returned an undefined variable");
  const Shape out_shape = probe.shape();
  const DType out_dtype = probe.dtype();
  const int64_t m = probe.numel();

  for (size_t i = 0; i < inputs.size(); ++i) {
    const Variable& x = inputs[i];
    if (!x.defined() || !x.requires_grad()) continue;
    EMBER_CHECK(x.is_leaf(), "gradcheck: input ", i, " must be a leaf");
    const bool f32 = x.dtype() == DType::Float32;
    const double eps = f32 ? options.eps_f32 : options.eps;
    const double atol = f32 ? options.atol_f32 : options.atol;
    const double rtol = f32 ? options.rtol_f32 : options.rtol;
    const int64_t n = x.numel();
    const Shape in_shape = x.shape();

    // Analytic: analytic[j * n + k] = d out_j / d x_k.
    std::vector<double> analytic(static_cast<size_t>(m * n), 0.0);
    for (int64_t j = 0; j < m; ++j) {
      for (const Variable& v : inputs) {
        if (v.defined() && v.requires_grad()) v.zero_grad();
      }
      const Variable out = fn(inputs);
      if (!out.requires_grad()) break;  // no path to any input: all zeros
      Tensor seed = Tensor::zeros(out_shape, out_dtype);
      seed.set(unravel(j, out_shape), 1.0);
      out.backward(seed);
      if (!x.grad().defined()) continue;
      EMBER_CHECK(x.grad().shape() == in_shape, "gradcheck: gradient of input ", i, " has shape ",
                  shape_str(x.grad().shape()), " but the input has shape ", shape_str(in_shape));
      EMBER_CHECK(x.grad().dtype() == x.dtype(), "gradcheck: gradient of input ", i, " is ",
                  dtype_name(x.grad().dtype()), " but the input is ", dtype_name(x.dtype()));
      const std::vector<double> g = x.grad().to_vector<double>();
      for (int64_t k = 0; k < n; ++k) analytic[j * n + k] = g[k];
    }
    x.zero_grad();

    // Numeric, perturbing x in place (a contiguous view of the same data is assumed).
    Tensor data = x.data();
    for (int64_t k = 0; k < n; ++k) {
      const std::vector<int64_t> idx = unravel(k, in_shape);
      const double x0 = data.at(idx);
      auto eval_at = [&](double delta) {
        data.set(idx, x0 + delta);
        return flat_output(fn, inputs);
      };
      std::vector<double> numeric(static_cast<size_t>(m));
      if (f32) {
        const auto p2 = eval_at(2 * eps), p1 = eval_at(eps), m1 = eval_at(-eps),
                   m2 = eval_at(-2 * eps);
        for (int64_t j = 0; j < m; ++j) {
          numeric[j] = (m2[j] - 8 * m1[j] + 8 * p1[j] - p2[j]) / (12 * eps);
        }
      } else {
        const auto p1 = eval_at(eps), m1 = eval_at(-eps);
        for (int64_t j = 0; j < m; ++j) numeric[j] = (p1[j] - m1[j]) / (2 * eps);
      }
      data.set(idx, x0);
      for (int64_t j = 0; j < m; ++j) {
        const double a = analytic[j * n + k], num = numeric[j];
        if (!(std::abs(a - num) <= atol + rtol * std::abs(num))) {
          std::ostringstream msg;
          msg << "gradcheck: input " << i << " element " << shape_str(idx) << ", output element "
              << shape_str(unravel(j, out_shape)) << ": analytic " << a << " vs numeric " << num
              << " (atol " << atol << ", rtol " << rtol << ")";
          result.ok = false;
          result.message = msg.str();
          return result;
        }
      }
    }
  }
  return result;
}

}  // namespace ember
