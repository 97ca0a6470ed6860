// Rotary position embedding, rotate-half convention (Hugging Face Llama), on
// x [B, T, H, D] with h = D / 2. For pair i < h at position p = pos0 + t:
//   out[i]     = x[i] cos(p, i) - x[i + h] sin(p, i)
//   out[i + h] = x[i + h] cos(p, i) + x[i] sin(p, i)
// The backward is the inverse rotation (the transpose): sin -> -sin.
#include <cmath>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/threads.h"

namespace ember {
namespace {

// Rotates every [D] row of x by the angle of its position; sign = -1 rotates back.
template <class T>
void rope_rotate(const T* x, const T* cos, const T* sin, T* out, int64_t B, int64_t Tn, int64_t H,
                 int64_t D, int64_t pos0, T sign) {
  const int64_t h = D / 2;
#pragma omp parallel for collapse(2) if (B * Tn * H * D > kParallelGrain)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < Tn; ++t) {
      const T* c = cos + (pos0 + t) * h;
      const T* s = sin + (pos0 + t) * h;
      for (int64_t head = 0; head < H; ++head) {
        const int64_t row = ((b * Tn + t) * H + head) * D;
        const T* xr = x + row;
        T* o = out + row;
#pragma omp simd
        for (int64_t i = 0; i < h; ++i) {
          const T x1 = xr[i], x2 = xr[i + h], si = sign * s[i];
          o[i] = x1 * c[i] - x2 * si;
          o[i + h] = x2 * c[i] + x1 * si;
        }
      }
    }
  }
}

}  // namespace

Variable rope(const Variable& x, const Tensor& cos, const Tensor& sin, int64_t pos0) {
  EMBER_PROFILE_SCOPE(kAttentionFamily);
  EMBER_CHECK(x.dim() == 4, "rope: input must be [B, T, H, D], got ", shape_str(x.shape()));
  const int64_t B = x.size(0), Tn = x.size(1), H = x.size(2), D = x.size(3);
  EMBER_CHECK(D % 2 == 0, "rope: head dim must be even, got ", D);
  EMBER_CHECK(cos.dim() == 2 && cos.shape() == sin.shape() && cos.size(1) == D / 2,
              "rope: cos/sin tables must both be [positions, ", D / 2, "], got ",
              shape_str(cos.shape()), " and ", shape_str(sin.shape()));
  EMBER_CHECK(pos0 >= 0 && pos0 + Tn <= cos.size(0), "rope: positions ", pos0, "..", pos0 + Tn - 1,
              " exceed the table of ", cos.size(0), " positions (max_seq_len)");
  const Tensor xc = x.data().contiguous();
  const Tensor c = cos.to(x.dtype()).contiguous(), s = sin.to(x.dtype()).contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), "rope", [&](auto tag) {
    using T = decltype(tag);
    rope_rotate<T>(xc.data<T>(), c.data<T>(), s.data<T>(), y.data<T>(), B, Tn, H, D, pos0, T(1));
  });
  return record("rope", {x}, y, [c, s, B, Tn, H, D, pos0](const Tensor& g) -> Grads {
    const Tensor gc = g.contiguous();
    Tensor dx = Tensor::empty(gc.shape(), gc.dtype());
    dispatch_float(gc.dtype(), "rope backward", [&](auto tag) {
      using T = decltype(tag);
      rope_rotate<T>(gc.data<T>(), c.data<T>(), s.data<T>(), dx.data<T>(), B, Tn, H, D, pos0, T(-1));
    });
    return {dx};
  });
}

}  // namespace ember
