// Elementwise unary ops: y = f(x), dx = g f'(x). Where f' is cheapest in
// terms of the output (exp, sqrt, rsqrt, tanh, sigmoid, relu) the output is
// saved, otherwise the input; activations use the fused *_backward kernels.
// log_sigmoid and log1mexp (the preference losses' per-pair terms) are
// evaluated in double by stable formulas that hold for large |x|.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/kernels/elementwise.h"

// Shapes: x [...] and y [...] are the same; g = dL/dy.

namespace ember {
namespace {

// f(x) of every element of a (float32 or float64), evaluated in double: a new contiguous tensor.
template <class F>
Tensor map_in_double(const Tensor& a, const char* op, F f) {
  const Tensor x = a.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) yp[i] = static_cast<T>(f(static_cast<double>(xp[i])));
  });
  return y;
}

// sigmoid(-x) = e / (1 + e) for x >= 0, 1 / (1 + e) below, e = exp(-|x|) <= 1.
double sigmoid_of_minus(double x) {
  const double e = std::exp(-std::abs(x));
  return x >= 0 ? e / (1 + e) : 1 / (1 + e);
}

}  // namespace

// y = -x:  dx = -g
Variable neg(const Variable& a) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  return record("neg", {a}, kernels::neg(a.data()),
                [](const Tensor& g) -> Grads { return {kernels::neg(g)}; });
}

// y = e^x:  dx = g y
Variable exp(const Variable& a) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  Tensor y = kernels::exp(a.data());
  return record("exp", {a}, y, [sy = SavedTensor(y)](const Tensor& g) -> Grads {
    return {kernels::mul(g, sy.get())};
  });
}

// y = ln x:  dx = g / x
Variable log(const Variable& a) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  return record("log", {a}, kernels::log(a.data()),
                [sx = SavedTensor(a.data())](const Tensor& g) -> Grads {
                  return {kernels::div(g, sx.get())};
                });
}

// y = sqrt(x):  dx = g / (2 y)
Variable sqrt(const Variable& a) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  Tensor y = kernels::sqrt(a.data());
  return record("sqrt", {a}, y, [sy = SavedTensor(y)](const Tensor& g) -> Grads {
    return {kernels::div(kernels::mul_scalar(g, 0.5), sy.get())};
  });
}

// y = x^(-1/2):  dx = -g y^3 / 2
Variable rsqrt(const Variable& a) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  Tensor y = kernels::rsqrt(a.data());
  return record("rsqrt", {a}, y, [sy = SavedTensor(y)](const Tensor& g) -> Grads {
    return {kernels::mul(kernels::mul_scalar(g, -0.5), kernels::pow_scalar(sy.get(), 3))};
  });
}

// y = tanh x:  dx = g (1 - y^2)
Variable tanh(const Variable& a) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  Tensor y = kernels::tanh(a.data());
  return record("tanh", {a}, y, [sy = SavedTensor(y)](const Tensor& g) -> Grads {
    return {kernels::tanh_backward(sy.get(), g)};
  });
}

// y = 1 / (1 + e^-x):  dx = g y (1 - y)
Variable sigmoid(const Variable& a) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  Tensor y = kernels::sigmoid(a.data());
  return record("sigmoid", {a}, y, [sy = SavedTensor(y)](const Tensor& g) -> Grads {
    return {kernels::sigmoid_backward(sy.get(), g)};
  });
}

// y = x s(x), s = sigmoid:  dx = g s(x) (1 + x (1 - s(x)))
Variable silu(const Variable& a) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  return record("silu", {a}, kernels::silu(a.data()),
                [sx = SavedTensor(a.data())](const Tensor& g) -> Grads {
                  return {kernels::silu_backward(sx.get(), g)};
                });
}

// y = x Phi(x):  dx = g (Phi(x) + x phi(x))
Variable gelu(const Variable& a) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  return record("gelu", {a}, kernels::gelu(a.data()),
                [sx = SavedTensor(a.data())](const Tensor& g) -> Grads {
                  return {kernels::gelu_backward(sx.get(), g)};
                });
}

// y = x (1 + tanh u) / 2, u = sqrt(2/pi) (x + 0.044715 x^3):
//   dx = g ((1 + tanh u) / 2 + x (1 - tanh^2 u) u' / 2)
Variable gelu_tanh(const Variable& a) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  return record("gelu_tanh", {a}, kernels::gelu_tanh(a.data()),
                [sx = SavedTensor(a.data())](const Tensor& g) -> Grads {
                  return {kernels::gelu_tanh_backward(sx.get(), g)};
                });
}

// y = max(x, 0):  dx = g [x > 0]; y > 0 exactly where x > 0, so y is saved.
Variable relu(const Variable& a) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  Tensor y = kernels::relu(a.data());
  return record("relu", {a}, y, [sy = SavedTensor(y)](const Tensor& g) -> Grads {
    return {kernels::relu_backward(sy.get(), g)};
  });
}

// y = log sigmoid(x) = -softplus(-x) = min(x, 0) - log1p(e^-|x|):  dx = g sigmoid(-x)
Variable log_sigmoid(const Variable& a) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  const Tensor y = map_in_double(a.data(), "log_sigmoid", [](double x) {
    return std::min(x, 0.0) - std::log1p(std::exp(-std::abs(x)));
  });
  return record("log_sigmoid", {a}, y, [sx = SavedTensor(a.data())](const Tensor& g) -> Grads {
    return {kernels::mul(g, map_in_double(sx.get(), "log_sigmoid backward", sigmoid_of_minus))};
  });
}

// y = log(1 - e^x) for x < 0: log(-expm1(x)) above -ln 2, log1p(-e^x) below (each exact where
// the other cancels):  dx = -g e^x / (1 - e^x) = -g / expm1(-x)
Variable log1mexp(const Variable& a) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  const Tensor y = map_in_double(a.data(), "log1mexp", [](double x) {
    return x > -std::numbers::ln2 ? std::log(-std::expm1(x)) : std::log1p(-std::exp(x));
  });
  return record("log1mexp", {a}, y, [sx = SavedTensor(a.data())](const Tensor& g) -> Grads {
    return {kernels::mul(g, map_in_double(sx.get(), "log1mexp backward",
                                          [](double x) { return -1 / std::expm1(-x); }))};
  });
}

// y = |x|:  dx = g sign(x)  (0 at 0)
Variable abs(const Variable& a) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  return record("abs", {a}, kernels::abs(a.data()),
                [sx = SavedTensor(a.data())](const Tensor& g) -> Grads {
                  return {kernels::mul(g, kernels::sign(sx.get()))};
                });
}

}  // namespace ember
