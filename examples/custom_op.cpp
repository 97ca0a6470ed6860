// A differentiable op defined outside the library, the way ember's own ops are
// (autograd/ops/*.cpp): forward and backward kernels side by side, and a
// function that records the backward with ember::record. Then its float64
// finite-difference gradcheck; the program exits non-zero when it fails.
//
//   softplus(x; beta) = log(1 + e^(beta x)) / beta      dx = g * sigmoid(beta x)
#include <cmath>
#include <cstdio>

#include "ember/ember.h"

using namespace ember;

namespace {

// The kernels, on float and double; written for contiguous tensors.
template <class T>
Tensor softplus_forward(const Tensor& x, double beta) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const T* in = x.data<T>();
  T* out = y.data<T>();
  for (int64_t i = 0; i < x.numel(); ++i) {  // stable: max(z, 0) + log1p(e^-|z|)
    const double z = beta * static_cast<double>(in[i]);
    out[i] = static_cast<T>((std::max(z, 0.0) + std::log1p(std::exp(-std::abs(z)))) / beta);
  }
  return y;
}

template <class T>
Tensor softplus_backward(const Tensor& x, const Tensor& g, double beta) {
  Tensor dx = Tensor::empty(x.shape(), x.dtype());
  const T *in = x.data<T>(), *grad = g.data<T>();
  T* out = dx.data<T>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    out[i] = static_cast<T>(grad[i] / (1 + std::exp(-beta * static_cast<double>(in[i]))));
  }
  return dx;
}

}  // namespace

// The op: saves its input (the derivative needs x) and returns one gradient per input.
Variable softplus(const Variable& x, double beta = 1.0) {
  EMBER_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float64,
              "softplus: float input needed");
  const bool f64 = x.dtype() == DType::Float64;
  const Tensor in = x.data().contiguous();
  Tensor y = f64 ? softplus_forward<double>(in, beta) : softplus_forward<float>(in, beta);
  return record("softplus", {x}, y, [sx = SavedTensor(in), beta, f64](const Tensor& g) -> Grads {
    const Tensor gc = g.contiguous();
    return {f64 ? softplus_backward<double>(sx.get(), gc, beta)
                : softplus_backward<float>(sx.get(), gc, beta)};
  });
}

int main() {
  // Inputs across both branches of the stable form, in float64.
  const Variable x(Tensor::randn({3, 5}, /*seed=*/7, 0, DType::Float64, 0, 3),
                   /*requires_grad=*/true);
  const Variable w(Tensor::randn({5}, /*seed=*/8, 0, DType::Float64), /*requires_grad=*/true);
  int failures = 0;
  for (double beta : {1.0, 2.5}) {
    // The op alone, and inside a composite (broadcast multiply, sum) so the
    // engine's accumulation through it is checked too.
    const GradcheckResult alone =
        gradcheck([&](const std::vector<Variable>& v) { return softplus(v[0], beta); }, {x});
    const GradcheckResult composite = gradcheck(
        [&](const std::vector<Variable>& v) { return sum(softplus(v[0] * v[1], beta), {1}); },
        {x, w});
    for (const GradcheckResult& r : {alone, composite}) {
      std::printf("softplus beta %.1f gradcheck: %s %s\n", beta, r.ok ? "ok" : "FAILED",
                  r.message.c_str());
      failures += !r.ok;
    }
  }
  const Variable y = softplus(Variable(Tensor::from_vector(std::vector<float>{-20, 0, 20})));
  std::printf("softplus([-20, 0, 20]) = %s\n", y.data().to_string().c_str());
  return failures == 0 ? 0 : 1;
}
