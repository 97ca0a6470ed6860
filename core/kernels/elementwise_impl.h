// Internal to the elementwise kernels: operand checks and the map loops that
// run a lambda over broadcast strided operands into a new contiguous tensor.
// Each row has fast paths for unit strides and for a scalar-broadcast operand
// (stride 0), written as plain loops the compiler vectorizes.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/simd.h"
#include "core/strided_loop.h"
#include "core/tensor.h"

namespace ember::kernels::impl {

inline void check_defined(const char* op, const Tensor& t) {
  EMBER_CHECK(t.defined(), op, ": operand is an undefined tensor");
}

// Both operands defined and of the same dtype.
inline void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a);
  check_defined(op, b);
  EMBER_CHECK(a.dtype() == b.dtype(), op, ": operands have different dtypes (",
              dtype_name(a.dtype()), " and ", dtype_name(b.dtype()), ")");
}

// broadcast_shapes with the op name in front of its message.
inline Shape broadcast_for(const char* op, const Shape& a, const Shape& b) {
  try {
    return broadcast_shapes(a, b);
  } catch (const Error& e) {
    throw Error(::ember::detail::concat(op, ": ", e.what()));
  }
}

// x != x, without a self-comparison warning for integer T.
template <class T>
inline bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

// A double converted to T; for integer T it saturates (inf -> max) first.
template <class T>
T saturate_cast(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (v != v) return T(0);
    const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (v <= lo) return std::numeric_limits<T>::lowest();
    if (v >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// y[i] = f(x[i]), compiled for several ISAs (math-heavy lambdas).
template <class TO, class TI, class F>
EMBER_TARGET_CLONES void map1_cloned(const TI* __restrict x, TO* __restrict y, int64_t n, F f) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

// z[i] = f(x[i], y[i]), compiled for several ISAs.
template <class TO, class TA, class TB, class F>
EMBER_TARGET_CLONES void map2_cloned(const TA* __restrict x, const TB* __restrict y,
                                     TO* __restrict z, int64_t n, F f) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
}

// out = f(a) elementwise; out is new, contiguous, of dtype dtype_of<TO>().
// Clone: run unit-stride rows through map1_cloned (worth it for math, not for
// memory-bound arithmetic).
template <class TO, class TI, bool Clone = false, class F>
Tensor map1(const Tensor& a, F f) {
  Tensor out = Tensor::empty(a.shape(), dtype_of<TO>());
  TO* o = out.data<TO>();
  const TI* x = a.data<TI>();
  strided_rows<2>(a.shape(), {out.strides(), a.strides()},
                  [&](const auto& off, int64_t n, const auto& st) {
                    TO* __restrict po = o + off[0];
                    const TI* __restrict px = x + off[1];
                    if (st[0] == 1 && st[1] == 1) {
                      if constexpr (Clone) {
                        map1_cloned(px, po, n, f);
                      } else {
#pragma omp simd
                        for (int64_t i = 0; i < n; ++i) po[i] = f(px[i]);
                      }
                    } else if (st[0] == 1 && st[1] == 0) {
                      const TO v = f(px[0]);
                      for (int64_t i = 0; i < n; ++i) po[i] = v;
                    } else {
                      for (int64_t i = 0; i < n; ++i) po[i * st[0]] = f(px[i * st[1]]);
                    }
                  });
  return out;
}

// out = f(a, b) with a and b broadcast together (Clone as in map1).
template <class TO, class TA, class TB, bool Clone = false, class F>
Tensor map2(const char* op, const Tensor& a, const Tensor& b, F f) {
  const Shape shape = broadcast_for(op, a.shape(), b.shape());
  Tensor out = Tensor::empty(shape, dtype_of<TO>());
  const Tensor ea = a.expand(shape), eb = b.expand(shape);
  TO* o = out.data<TO>();
  const TA* x = ea.data<TA>();
  const TB* y = eb.data<TB>();
  strided_rows<3>(shape, {out.strides(), ea.strides(), eb.strides()},
                  [&](const auto& off, int64_t n, const auto& st) {
                    TO* __restrict po = o + off[0];
                    const TA* __restrict px = x + off[1];
                    const TB* __restrict py = y + off[2];
                    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
                      if constexpr (Clone) {
                        map2_cloned(px, py, po, n, f);
                      } else {
#pragma omp simd
                        for (int64_t i = 0; i < n; ++i) po[i] = f(px[i], py[i]);
                      }
                    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
                      const TB yv = py[0];
#pragma omp simd
                      for (int64_t i = 0; i < n; ++i) po[i] = f(px[i], yv);
                    } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
                      const TA xv = px[0];
#pragma omp simd
                      for (int64_t i = 0; i < n; ++i) po[i] = f(xv, py[i]);
                    } else {
                      for (int64_t i = 0; i < n; ++i)
                        po[i * st[0]] = f(px[i * st[1]], py[i * st[2]]);
                    }
                  });
  return out;
}

// out = f(a, b, c) with all three broadcast together (where).
template <class TO, class TA, class TB, class TC, class F>
Tensor map3(const char* op, const Tensor& a, const Tensor& b, const Tensor& c, F f) {
  const Shape shape = broadcast_for(op, broadcast_for(op, a.shape(), b.shape()), c.shape());
  Tensor out = Tensor::empty(shape, dtype_of<TO>());
  const Tensor ea = a.expand(shape), eb = b.expand(shape), ec = c.expand(shape);
  TO* o = out.data<TO>();
  const TA* x = ea.data<TA>();
  const TB* y = eb.data<TB>();
  const TC* z = ec.data<TC>();
  strided_rows<4>(shape, {out.strides(), ea.strides(), eb.strides(), ec.strides()},
                  [&](const auto& off, int64_t n, const auto& st) {
                    TO* __restrict po = o + off[0];
                    const TA* __restrict px = x + off[1];
                    const TB* __restrict py = y + off[2];
                    const TC* __restrict pz = z + off[3];
                    if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
#pragma omp simd
                      for (int64_t i = 0; i < n; ++i) po[i] = f(px[i], py[i], pz[i]);
                    } else {
                      for (int64_t i = 0; i < n; ++i)
                        po[i * st[0]] = f(px[i * st[1]], py[i * st[2]], pz[i * st[3]]);
                    }
                  });
  return out;
}

// out = f(a) with f a generic lambda on T, for float dtypes only (math, run
// through the ISA clones) or for all.
template <bool FloatOnly, class F>
Tensor unary_op(const char* op, const Tensor& a, F f) {
  check_defined(op, a);
  auto body = [&](auto tag) -> Tensor {
    using T = decltype(tag);
    return map1<T, T, FloatOnly>(a, [f](T x) { return static_cast<T>(f(x)); });
  };
  if constexpr (FloatOnly) {
    return dispatch_float(a.dtype(), op, body);
  } else {
    return dispatch_all(a.dtype(), body);
  }
}

// out = f(a, b) broadcast, a and b of one dtype, out of that dtype (float
// only: math, run through the ISA clones).
template <bool FloatOnly, class F>
Tensor binary_op(const char* op, const Tensor& a, const Tensor& b, F f) {
  check_same_dtype(op, a, b);
  auto body = [&](auto tag) -> Tensor {
    using T = decltype(tag);
    return map2<T, T, T, FloatOnly>(op, a, b, [f](T x, T y) { return static_cast<T>(f(x, y)); });
  };
  if constexpr (FloatOnly) {
    return dispatch_float(a.dtype(), op, body);
  } else {
    return dispatch_all(a.dtype(), body);
  }
}

}  // namespace ember::kernels::impl
