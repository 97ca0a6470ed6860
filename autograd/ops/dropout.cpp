// Inverted dropout with counter-based randomness: element i is kept when the
// Philox draw at (seed, offset + i) is >= p, and scaled by 1 / (1 - p);
// backward applies the same mask (regenerated, not stored).
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/rng.h"
#include "core/threads.h"

namespace ember {
namespace {

template <class T>
void dropout_apply(const T* in, T* out, int64_t n, double p, uint64_t seed, uint64_t offset) {
  const T scale = static_cast<T>(1.0 / (1.0 - p));
#pragma omp parallel for if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    const auto r = philox4x32(seed, offset + static_cast<uint64_t>(i));
    out[i] = uniform_double(r[0], r[1]) >= p ? in[i] * scale : T(0);
  }
}

}  // namespace

Variable dropout(const Variable& x, double p, uint64_t seed, uint64_t offset) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  EMBER_CHECK(p >= 0 && p < 1, "dropout: probability must be in [0, 1), got ", p);
  if (p == 0) return x;
  const Tensor xc = x.data().contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const int64_t n = xc.numel();
  dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    dropout_apply<T>(xc.data<T>(), y.data<T>(), n, p, seed, offset);
  });
  return record("dropout", {x}, y, [n, p, seed, offset](const Tensor& g) -> Grads {
    const Tensor gc = g.contiguous();
    Tensor dx = Tensor::empty(gc.shape(), gc.dtype());
    dispatch_float(gc.dtype(), "dropout backward", [&](auto tag) {
      using T = decltype(tag);
      dropout_apply<T>(gc.data<T>(), dx.data<T>(), n, p, seed, offset);
    });
    return {dx};
  });
}

}  // namespace ember
