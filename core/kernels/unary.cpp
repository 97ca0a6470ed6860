// Unary elementwise kernels (exp .. sign) and the fused activation backward
// kernels grad_in = grad_out * f'(x). Math functions take float32/float64;
// neg, abs, sign and relu also take integer tensors. float32 exp, tanh and
// sigmoid use the vectorizable forms of core/kernels/fast_math.h.
#include <cmath>
#include <type_traits>

#include "core/kernels/elementwise.h"
#include "core/kernels/elementwise_impl.h"
#include "core/kernels/fast_math.h"

namespace ember::kernels {

using impl::binary_op;
using impl::unary_op;

namespace {

constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;

}  // namespace

// --- unary -----------------------------------------------------------------------

Tensor neg(const Tensor& a) {
  return unary_op<false>("neg", a, [](auto x) { return -x; });
}

Tensor exp(const Tensor& a) {
  return unary_op<true>("exp", a, [](auto x) { return fast::exp(x); });
}

Tensor log(const Tensor& a) {
  return unary_op<true>("log", a, [](auto x) { return std::log(x); });
}

Tensor sqrt(const Tensor& a) {
  return unary_op<true>("sqrt", a, [](auto x) { return std::sqrt(x); });
}

// 1 / sqrt(x)
Tensor rsqrt(const Tensor& a) {
  return unary_op<true>("rsqrt", a, [](auto x) { return decltype(x)(1) / std::sqrt(x); });
}

Tensor tanh(const Tensor& a) {
  return unary_op<true>("tanh", a, [](auto x) { return fast::tanh(x); });
}

// 1 / (1 + e^-x), stable for large |x| (see fast::sigmoid)
Tensor sigmoid(const Tensor& a) {
  return unary_op<true>("sigmoid", a, [](auto x) { return fast::sigmoid(x); });
}

// x sigmoid(x)
Tensor silu(const Tensor& a) {
  return unary_op<true>("silu", a, [](auto x) { return x * fast::sigmoid(x); });
}

// 0.5 x (1 + erf(x / sqrt 2)) = x Phi(x), Phi the normal CDF (fast::normal_cdf,
// accurate in the tail x << 0 too)
Tensor gelu(const Tensor& a) {
  return unary_op<true>("gelu", a, [](auto x) { return x * fast::normal_cdf(x); });
}

// 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
Tensor gelu_tanh(const Tensor& a) {
  return unary_op<true>("gelu_tanh", a, [](auto x) {
    using T = decltype(x);
    const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
    return x * fast::sigmoid(T(2) * u);
  });
}

// max(x, 0); NaN stays NaN
Tensor relu(const Tensor& a) {
  return unary_op<false>("relu", a, [](auto x) {
    using T = decltype(x);
    return x < T(0) ? T(0) : x;
  });
}

Tensor abs(const Tensor& a) {
  return unary_op<false>("abs", a, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) {
      return std::abs(x);
    } else {
      return x < T(0) ? T(-x) : x;
    }
  });
}

// (x > 0) - (x < 0); NaN stays NaN
Tensor sign(const Tensor& a) {
  return unary_op<false>("sign", a, [](auto x) {
    using T = decltype(x);
    const T s = static_cast<T>((T(0) < x) - (x < T(0)));
    return impl::is_nan(x) ? x : s;
  });
}

// --- fused activation backward ---------------------------------------------------------

// silu'(x) = s (1 + x (1 - s)), s = sigmoid(x)
Tensor silu_backward(const Tensor& x, const Tensor& grad) {
  return binary_op<true>("silu_backward", x, grad, [](auto v, auto g) {
    using T = decltype(v);
    const T s = fast::sigmoid(v);
    return g * s * (T(1) + v * (T(1) - s));
  });
}

// gelu'(x) = Phi(x) + x phi(x), Phi the normal CDF (0.5 erfc(-x / sqrt 2)),
// phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
Tensor gelu_backward(const Tensor& x, const Tensor& grad) {
  return binary_op<true>("gelu_backward", x, grad, [](auto v, auto g) {
    using T = decltype(v);
    const T cdf = fast::normal_cdf(v);
    const T pdf = T(kInvSqrt2Pi) * fast::exp(T(-0.5) * v * v);
    return g * (cdf + v * pdf);
  });
}

// gelu_tanh'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) u', t = tanh(u),
// u = sqrt(2/pi) (x + 0.044715 x^3), u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
// With s = sigmoid(2u): 1 + t = 2s and 1 - t^2 = 4 s (1 - s), so
// gelu_tanh'(x) = s + 2 x s (1 - s) u', s and 1 - s each computed without cancellation.
Tensor gelu_tanh_backward(const Tensor& x, const Tensor& grad) {
  return binary_op<true>("gelu_tanh_backward", x, grad, [](auto v, auto g) {
    using T = decltype(v);
    const T v2 = v * v;
    const T z = T(2 * kSqrt2OverPi) * v * (T(1) + T(kGeluCubic) * v2);  // 2u
    T s, sc;  // sigmoid(2u), 1 - sigmoid(2u)
    fast::sigmoid_pair(z, s, sc);
    const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * v2);
    return g * (s + T(2) * v * s * sc * du);
  });
}

// relu'(x) = (x > 0)
Tensor relu_backward(const Tensor& x, const Tensor& grad) {
  return binary_op<true>("relu_backward", x, grad, [](auto v, auto g) {
    using T = decltype(v);
    return v > T(0) ? g : T(0);
  });
}

// sigmoid' = y (1 - y), y = sigmoid(x)
Tensor sigmoid_backward(const Tensor& y, const Tensor& grad) {
  return binary_op<true>("sigmoid_backward", y, grad, [](auto s, auto g) {
    using T = decltype(s);
    return g * s * (T(1) - s);
  });
}

// tanh' = 1 - y^2, y = tanh(x)
Tensor tanh_backward(const Tensor& y, const Tensor& grad) {
  return binary_op<true>("tanh_backward", y, grad, [](auto t, auto g) {
    using T = decltype(t);
    return g * (T(1) - t * t);
  });
}

}  // namespace ember::kernels
