// Linear layer on a frozen NF4 weight (QLoRA, docs/model.md#nf4-qlora):
//   y = x W^T,   dx = g W,   W = dequant(Wq) is not differentiated.
// W is never held whole in float: both directions walk its rows in tiles of
// about kTileElements weights, dequantize one tile into a transient buffer of
// x's dtype and multiply it with kernels::matmul_into (y's columns o0..o0+n in
// forward, accumulated into dx in backward). Autocast does not apply here.
// Shapes: x [..., C], W [O, C] (Wq stores it flattened row-major), y and g [..., O].
#include <algorithm>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/kernels/matmul.h"
#include "core/kernels/nf4.h"

namespace ember {
namespace {

constexpr int64_t kTileElements = int64_t{1} << 16;

// Rows of W per tile: every tile but the last has as many (few matmul shapes).
int64_t tile_rows(int64_t O, int64_t C) {
  return std::clamp<int64_t>(kTileElements / C, 1, O);
}

// Calls f(o0, n, tile) for each tile of W's rows o0 .. o0+n, dequantized into
// `tile` [n, C] of dtype (one buffer reused: no float copy of W outlives it).
template <class F>
void for_each_weight_tile(const kernels::Nf4Tensor& w, DType dtype, F&& f) {
  const int64_t O = w.shape[0], C = w.shape[1], rows = tile_rows(O, C);
  Tensor tile = Tensor::empty({rows, C}, dtype);
  for (int64_t o0 = 0; o0 < O; o0 += rows) {
    const int64_t n = std::min(rows, O - o0);
    dispatch_float(dtype, "nf4_linear", [&](auto tag) {
      kernels::nf4_dequantize_range(w, o0 * C, n * C, tile.data<decltype(tag)>());
    });
    f(o0, n, tile.narrow(0, 0, n));
  }
}

// y [R, O] = x [R, C] W^T, tile by tile of W's rows.
Tensor nf4_linear_forward(const Tensor& x, const kernels::Nf4Tensor& w) {
  Tensor y = Tensor::empty({x.size(0), w.shape[0]}, x.dtype());
  if (x.size(0) == 0) return y;
  for_each_weight_tile(w, x.dtype(), [&](int64_t o0, int64_t n, const Tensor& tile) {
    Tensor y_cols = y.narrow(1, o0, n);
    kernels::matmul_into(y_cols, x, tile, false, true);
  });
  return y;
}

// dx [R, C] = g [R, O] W = sum over tiles of g[:, o0:o0+n] W[o0:o0+n, :].
Tensor nf4_linear_backward(const Tensor& g, const kernels::Nf4Tensor& w) {
  if (g.size(0) == 0) return Tensor::zeros({0, w.shape[1]}, g.dtype());
  Tensor dx = Tensor::empty({g.size(0), w.shape[1]}, g.dtype());  // the first tile writes it (beta 0)
  for_each_weight_tile(w, g.dtype(), [&](int64_t o0, int64_t n, const Tensor& tile) {
    kernels::matmul_into(dx, g.narrow(1, o0, n), tile, false, false, 1, o0 == 0 ? 0 : 1);
  });
  return dx;
}

}  // namespace

Variable nf4_linear(const Variable& x, std::shared_ptr<const kernels::Nf4Tensor> w) {
  EMBER_PROFILE_SCOPE(kMatmulFamily);
  EMBER_CHECK(w && w->shape.size() == 2, "nf4_linear: the weight must be a 2-D NF4 tensor");
  const int64_t O = w->shape[0], C = w->shape[1];
  EMBER_CHECK(x.dim() >= 1 && x.size(-1) == C, "nf4_linear: x is ", shape_str(x.shape()),
              ", the weight [", O, ", ", C, "]");
  EMBER_CHECK(is_floating(x.dtype()), "nf4_linear: x must be float32 or float64, got ",
              dtype_name(x.dtype()));
  Shape y_shape = x.shape();
  y_shape.back() = O;
  const Tensor x2 = x.data().reshape({-1, C}).contiguous();
  Tensor y = nf4_linear_forward(x2, *w).view(y_shape);
  return record("nf4_linear", {x}, y, [w, x_shape = x.shape(), O](const Tensor& g) -> Grads {
    const Tensor g2 = g.reshape({-1, O}).contiguous();
    return {nf4_linear_backward(g2, *w).view(x_shape)};
  });
}

}  // namespace ember
