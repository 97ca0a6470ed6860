// Grouped linear layer: the rows of x come in E consecutive groups (the tokens
// routed to each MoE expert), and group e goes through its own weight:
//   y[rows of e] = x[rows of e] W_e^T (+ b_e)
//   dx[rows of e] = g[rows of e] W_e,  dW_e = g[rows of e]^T x[rows of e],
//   db_e = sum over the group's rows of g
// One node for all experts: one matmul per expert in each direction, written
// straight into row blocks of one output, with no per-expert gather/scatter
// buffers of the whole input in backward. A group with no rows gives its
// weight no gradient (as when the expert is never called). Group sizes change
// every step, so the products use run-time M and K (kernels::matmul_into_varying).
// Under bf16 autocast the operands are rounded to bfloat16 as in matmul.
// Shapes: x [R, C], W_e [O, C], b_e [O], y and g [R, O]; sizes[e] rows each.
#include <numeric>

#include "autograd/autocast.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/kernels/bf16.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/matmul.h"
#include "core/kernels/reduce.h"
#include "autograd/profile_families.h"

namespace ember {

Variable grouped_linear(const Variable& x, const std::vector<Variable>& weights,
                        const std::vector<Variable>& biases, const std::vector<int64_t>& sizes) {
  EMBER_PROFILE_SCOPE(kMatmulFamily);
  const size_t E = weights.size();
  EMBER_CHECK(x.dim() == 2, "grouped_linear: x must be [R, C], got ", shape_str(x.shape()));
  EMBER_CHECK(E > 0 && sizes.size() == E, "grouped_linear: ", E, " weights but ", sizes.size(),
              " group sizes");
  EMBER_CHECK(biases.empty() || biases.size() == E, "grouped_linear: ", biases.size(),
              " biases for ", E, " weights");
  const int64_t R = x.size(0), C = x.size(1), O = weights[0].size(0);
  EMBER_CHECK(std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) == R,
              "grouped_linear: group sizes sum to ",
              std::accumulate(sizes.begin(), sizes.end(), int64_t{0}), ", x has ", R, " rows");
  for (size_t e = 0; e < E; ++e) {
    EMBER_CHECK(weights[e].shape() == Shape({O, C}), "grouped_linear: weight ", e, " is ",
                shape_str(weights[e].shape()), ", expected [", O, ", ", C, "]");
    EMBER_CHECK(biases.empty() || biases[e].shape() == Shape({O}), "grouped_linear: bias ", e,
                " is ", shape_str(biases[e].shape()), ", expected [", O, "]");
  }
  const bool bf16 = autocast_dtype() == DType::BFloat16 && x.dtype() == DType::Float32;
  const Tensor xd = bf16 ? kernels::to_bfloat16(x.data().contiguous()) : x.data().contiguous();
  std::vector<Tensor> w_data;
  for (const auto& w : weights) w_data.push_back(bf16 ? autocast_to_bfloat16(w) : w.data());
  Tensor y = Tensor::empty({R, O}, x.dtype());
  int64_t r0 = 0;
  for (size_t e = 0; e < E; ++e) {
    if (sizes[e] > 0) {
      Tensor ye = y.narrow(0, r0, sizes[e]);
      kernels::matmul_into_varying(ye, xd.narrow(0, r0, sizes[e]), w_data[e], false, true);
      if (!biases.empty()) kernels::add_(ye, biases[e].data());
    }
    r0 += sizes[e];
  }

  std::vector<Variable> inputs{x};
  inputs.insert(inputs.end(), weights.begin(), weights.end());
  inputs.insert(inputs.end(), biases.begin(), biases.end());
  std::vector<bool> need(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) need[i] = needs_grad(inputs[i]);
  return record(
      "grouped_linear", inputs, y,
      [need, sizes, has_bias = !biases.empty(), sx = SavedTensor(xd),
       sw = std::vector<SavedTensor>(w_data.begin(), w_data.end())](const Tensor& grad) -> Grads {
        const size_t E = sizes.size();
        const Tensor& xs = sx.get();
        const Tensor g = xs.dtype() == DType::BFloat16 ? kernels::to_bfloat16(grad.contiguous())
                                                       : grad.contiguous();
        const Tensor g32 = xs.dtype() == DType::BFloat16 ? grad.contiguous() : g;  // for the bias
        Grads out(1 + E * (has_bias ? 2 : 1));
        const DType result = xs.dtype() == DType::BFloat16 ? DType::Float32 : xs.dtype();
        if (need[0]) out[0] = Tensor::empty(xs.shape(), result);
        int64_t r0 = 0;
        for (size_t e = 0; e < E; ++e) {
          const int64_t n = sizes[e];
          if (n > 0) {
            const Tensor ge = g.narrow(0, r0, n);
            if (need[0]) {
              Tensor dxe = out[0].narrow(0, r0, n);
              kernels::matmul_into_varying(dxe, ge, sw[e].get());
            }
            if (need[1 + e]) {
              const Tensor& w = sw[e].get();
              out[1 + e] = Tensor::empty(w.shape(), result);
              kernels::matmul_into_varying(out[1 + e], ge, xs.narrow(0, r0, n), true, false);
            }
            if (has_bias && need[1 + E + e]) out[1 + E + e] = kernels::sum(g32.narrow(0, r0, n), {0});
          }
          r0 += n;
        }
        return out;
      });
}

}  // namespace ember
