// Fused SwiGLU / GeGLU against a float64 reference loop, at a size that takes
// the multi-threaded path, in float32 (forward and both gradients).
#include <catch2/catch.hpp>

#include <cmath>

#include "autograd/ops.h"

using namespace ember;

namespace {

double ref_act(double g, bool gelu) {
  return gelu ? 0.5 * g * (1.0 + std::erf(g / std::sqrt(2.0))) : g / (1.0 + std::exp(-g));
}
double ref_dact(double g, bool gelu) {
  if (gelu) {
    return 0.5 * (1.0 + std::erf(g / std::sqrt(2.0))) + g * std::exp(-0.5 * g * g) / std::sqrt(2.0 * M_PI);
  }
  const double s = 1.0 / (1.0 + std::exp(-g));
  return s * (1.0 + g * (1.0 - s));
}

}  // namespace

TEST_CASE("swiglu and geglu match a reference loop in float32", "[autograd][glu]") {
  const bool gelu = GENERATE(false, true);
  const int64_t rows = 97, cols = 769;  // odd sizes: thread chunks do not split evenly
  const Tensor g = Tensor::randn({rows, cols}, 11, 0, DType::Float32, 0.0, 3.0);
  const Tensor u = Tensor::randn({rows, cols}, 12, 0, DType::Float32);
  const Tensor dh = Tensor::randn({rows, cols}, 13, 0, DType::Float32);
  Variable vg(g, true), vu(u, true);
  Variable h = gelu ? geglu(vg, vu) : swiglu(vg, vu);
  h.backward(dh);
  const float *pg = g.data<float>(), *pu = u.data<float>(), *pdh = dh.data<float>();
  const float *ph = h.data().data<float>(), *pdg = vg.grad().data<float>(), *pdu = vu.grad().data<float>();
  double worst = 0;
  for (int64_t i = 0; i < rows * cols; ++i) {
    const double a = ref_act(pg[i], gelu), da = ref_dact(pg[i], gelu);
    const double want[3] = {a * pu[i], pdh[i] * pu[i] * da, pdh[i] * a};
    const double got[3] = {ph[i], pdg[i], pdu[i]};
    for (int k = 0; k < 3; ++k) {
      // allclose(rtol 1e-5, atol 1e-5): worst > 1 fails
      worst = std::max(worst, std::abs(got[k] - want[k]) / (1e-5 + 1e-5 * std::abs(want[k])));
    }
  }
  CHECK(worst <= 1.0);
}
