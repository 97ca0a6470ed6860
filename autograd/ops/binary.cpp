// Broadcasting elementwise binary ops and their scalar forms. Each backward
// returns gradients in the broadcast output shape; the engine sums them back
// to each input's shape. Whether an input needs a gradient is decided at
// forward time (backward runs in no-grad mode), so only what is needed is saved.
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/kernels/elementwise.h"

// Shapes: a [...], b [...] broadcasting to y [...]; g = dL/dy has y's shape.

namespace ember {
namespace {

SavedTensor save_if(bool needed, const Tensor& t) {
  return needed ? SavedTensor(t) : SavedTensor();
}

}  // namespace

// y = a + b:  da = g, db = g
Variable add(const Variable& a, const Variable& b) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  return record("add", {a, b}, kernels::add(a.data(), b.data()), [](const Tensor& g) -> Grads {
    return {g, g};
  });
}

// y = a - b:  da = g, db = -g
Variable sub(const Variable& a, const Variable& b) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  const bool need_b = needs_grad(b);
  return record("sub", {a, b}, kernels::sub(a.data(), b.data()),
                [need_b](const Tensor& g) -> Grads {
                  return {g, need_b ? kernels::neg(g) : Tensor()};
                });
}

// y = a * b:  da = g b, db = g a
Variable mul(const Variable& a, const Variable& b) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  const bool need_a = needs_grad(a), need_b = needs_grad(b);
  return record("mul", {a, b}, kernels::mul(a.data(), b.data()),
                [need_a, need_b, sa = save_if(need_b, a.data()),
                 sb = save_if(need_a, b.data())](const Tensor& g) -> Grads {
                  return {need_a ? kernels::mul(g, sb.get()) : Tensor(),
                          need_b ? kernels::mul(g, sa.get()) : Tensor()};
                });
}

// y = a / b:  da = g / b, db = -g a / b^2 = -(g / b) y
Variable div(const Variable& a, const Variable& b) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  const bool need_a = needs_grad(a), need_b = needs_grad(b);
  Tensor y = kernels::div(a.data(), b.data());
  return record("div", {a, b}, y,
                [need_a, need_b, sb = SavedTensor(b.data()),
                 sy = save_if(need_b, y)](const Tensor& g) -> Grads {
                  Tensor ga = kernels::div(g, sb.get());
                  Tensor gb = need_b ? kernels::neg(kernels::mul(ga, sy.get())) : Tensor();
                  return {need_a ? ga : Tensor(), gb};
                });
}

// y = a^b:  da = g b a^(b-1), db = g y log(a)  (needs a > 0)
Variable pow(const Variable& a, const Variable& b) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  const bool need_a = needs_grad(a), need_b = needs_grad(b);
  Tensor y = kernels::pow(a.data(), b.data());
  return record("pow", {a, b}, y,
                [need_a, need_b, sa = SavedTensor(a.data()), sb = save_if(need_a, b.data()),
                 sy = save_if(need_b, y)](const Tensor& g) -> Grads {
                  Grads out(2);
                  if (need_a) {
                    const Tensor& bv = sb.get();
                    Tensor d =
                        kernels::mul(bv, kernels::pow(sa.get(), kernels::add_scalar(bv, -1)));
                    out[0] = kernels::mul(g, d);
                  }
                  if (need_b)
                    out[1] = kernels::mul(g, kernels::mul(sy.get(), kernels::log(sa.get())));
                  return out;
                });
}

// y = max(a, b):  da = g [a > b], db = g [b > a]; where a == b each gets g / 2
// y = min(a, b):  the same with < in place of > (pick = lt instead of gt).
static Variable extremum(const char* name, const Variable& a, const Variable& b, Tensor y,
                         Tensor (*pick)(const Tensor&, const Tensor&)) {
  const bool need_a = needs_grad(a), need_b = needs_grad(b);
  return record(name, {a, b}, std::move(y),
                [need_a, need_b, pick, sa = SavedTensor(a.data()),
                 sb = SavedTensor(b.data())](const Tensor& g) -> Grads {
                  const Tensor &av = sa.get(), &bv = sb.get();
                  Tensor tie = kernels::mul_scalar(kernels::eq(av, bv).to(g.dtype()), 0.5);
                  Grads out(2);
                  if (need_a) {
                    Tensor w = kernels::add(pick(av, bv).to(g.dtype()), tie);
                    out[0] = kernels::mul(g, w);
                  }
                  if (need_b) {
                    Tensor w = kernels::add(pick(bv, av).to(g.dtype()), tie);
                    out[1] = kernels::mul(g, w);
                  }
                  return out;
                });
}

Variable maximum(const Variable& a, const Variable& b) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  return extremum("maximum", a, b, kernels::maximum(a.data(), b.data()), &kernels::gt);
}

Variable minimum(const Variable& a, const Variable& b) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  return extremum("minimum", a, b, kernels::minimum(a.data(), b.data()), &kernels::lt);
}

// y = a + s:  da = g
Variable add_scalar(const Variable& a, double s) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  return record("add_scalar", {a}, kernels::add_scalar(a.data(), s),
                [](const Tensor& g) -> Grads { return {g}; });
}

// y = a s:  da = g s
Variable mul_scalar(const Variable& a, double s) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  return record("mul_scalar", {a}, kernels::mul_scalar(a.data(), s),
                [s](const Tensor& g) -> Grads { return {kernels::mul_scalar(g, s)}; });
}

// y = a^p:  da = g p a^(p-1)
Variable pow_scalar(const Variable& a, double p) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  return record("pow_scalar", {a}, kernels::pow_scalar(a.data(), p),
                [p, sa = SavedTensor(a.data())](const Tensor& g) -> Grads {
                  if (p == 0) return {kernels::mul_scalar(g, 0)};
                  Tensor d = p == 1 ? g : kernels::mul(g, kernels::pow_scalar(sa.get(), p - 1));
                  return {kernels::mul_scalar(d, p)};
                });
}

// y = s - a:  da = -g
Variable rsub_scalar(const Variable& a, double s) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  return record("rsub_scalar", {a}, kernels::rsub_scalar(a.data(), s),
                [](const Tensor& g) -> Grads { return {kernels::neg(g)}; });
}

// y = clamp(a, lo, hi):  da = g where lo < a < hi, 0 elsewhere
Variable clamp(const Variable& a, double lo, double hi) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  return record("clamp", {a}, kernels::clamp(a.data(), lo, hi),
                [lo, hi, sa = SavedTensor(a.data())](const Tensor& g) -> Grads {
                  const Tensor& av = sa.get();
                  Tensor below = kernels::le(av, Tensor::scalar(lo, av.dtype()));
                  Tensor above = kernels::ge(av, Tensor::scalar(hi, av.dtype()));
                  return {kernels::masked_fill(kernels::masked_fill(g, below, 0), above, 0)};
                });
}

}  // namespace ember
