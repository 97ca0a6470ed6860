// Broadcasting binary kernels (add .. minimum), the scalar forms, clamp, the
// in-place add_ / mul_scalar_, comparisons, where and masked_fill.
// Integer tensors: division truncates toward zero (a zero divisor is an
// Error); a scalar is applied in double and the result converted back.
#include <atomic>
#include <cmath>
#include <type_traits>

#include "core/kernels/elementwise.h"
#include "core/kernels/elementwise_impl.h"

namespace ember::kernels {

using impl::binary_op;

// --- binary (broadcasting) ------------------------------------------------------

Tensor add(const Tensor& a, const Tensor& b) {
  return binary_op<false>("add", a, b, [](auto x, auto y) { return x + y; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return binary_op<false>("sub", a, b, [](auto x, auto y) { return x - y; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary_op<false>("mul", a, b, [](auto x, auto y) { return x * y; });
}

Tensor div(const Tensor& a, const Tensor& b) {
  impl::check_same_dtype("div", a, b);
  return dispatch_all(a.dtype(), [&](auto tag) -> Tensor {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      return impl::map2<T, T, T>("div", a, b, [](T x, T y) { return x / y; });
    } else {
      std::atomic<bool> by_zero{false};
      Tensor out = impl::map2<T, T, T>("div", a, b, [&by_zero](T x, T y) -> T {
        if (y == 0) {
          by_zero.store(true, std::memory_order_relaxed);
          return 0;
        }
        using U = std::make_unsigned_t<T>;  // x / -1 wraps for the minimum instead of trapping
        return y == -1 ? static_cast<T>(U(0) - static_cast<U>(x)) : static_cast<T>(x / y);
      });
      EMBER_CHECK(!by_zero.load(), "div: integer division by zero (", dtype_name(a.dtype()),
                  " divisor of shape ", shape_str(b.shape()), " has a zero)");
      return out;
    }
  });
}

Tensor pow(const Tensor& a, const Tensor& b) {
  return binary_op<true>("pow", a, b, [](auto x, auto y) { return std::pow(x, y); });
}

// max(a, b); a NaN in either operand gives NaN.
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary_op<false>("maximum", a, b,
                          [](auto x, auto y) { return (impl::is_nan(x) | (x > y)) ? x : y; });
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary_op<false>("minimum", a, b,
                          [](auto x, auto y) { return (impl::is_nan(x) | (x < y)) ? x : y; });
}

// --- with a scalar ------------------------------------------------------------------

namespace {

// out = f(x, s): in T for float dtypes, in double (then saturated back) for ints.
template <class F>
Tensor scalar_op(const char* op, const Tensor& a, double s, F f) {
  impl::check_defined(op, a);
  return dispatch_all(a.dtype(), [&](auto tag) -> Tensor {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T sv = static_cast<T>(s);
      return impl::map1<T, T>(a, [f, sv](T x) { return static_cast<T>(f(x, sv)); });
    } else {
      return impl::map1<T, T>(
          a, [f, s](T x) { return impl::saturate_cast<T>(f(static_cast<double>(x), s)); });
    }
  });
}

}  // namespace

Tensor add_scalar(const Tensor& a, double s) {
  return scalar_op("add_scalar", a, s, [](auto x, auto v) { return x + v; });
}

Tensor mul_scalar(const Tensor& a, double s) {
  return scalar_op("mul_scalar", a, s, [](auto x, auto v) { return x * v; });
}

Tensor rsub_scalar(const Tensor& a, double s) {
  return scalar_op("rsub_scalar", a, s, [](auto x, auto v) { return v - x; });
}

// a^p; p in {0, 1, 2, 3, -1, 0.5, -0.5} avoid std::pow.
Tensor pow_scalar(const Tensor& a, double p) {
  impl::check_defined("pow_scalar", a);
  return dispatch_float(a.dtype(), "pow_scalar", [&](auto tag) -> Tensor {
    using T = decltype(tag);
    if (p == 0) return impl::map1<T, T>(a, [](T) { return T(1); });
    if (p == 1) return impl::map1<T, T>(a, [](T x) { return x; });
    if (p == 2) return impl::map1<T, T>(a, [](T x) { return x * x; });
    if (p == 3) return impl::map1<T, T>(a, [](T x) { return x * x * x; });
    if (p == -1) return impl::map1<T, T>(a, [](T x) { return T(1) / x; });
    if (p == 0.5) return impl::map1<T, T>(a, [](T x) { return std::sqrt(x); });
    if (p == -0.5) return impl::map1<T, T>(a, [](T x) { return T(1) / std::sqrt(x); });
    const T pv = static_cast<T>(p);
    return impl::map1<T, T>(a, [pv](T x) { return std::pow(x, pv); });
  });
}

// min(max(a, lo), hi) like torch.clamp (lo > hi gives hi); NaN stays NaN.
Tensor clamp(const Tensor& a, double lo, double hi) {
  impl::check_defined("clamp", a);
  return dispatch_all(a.dtype(), [&](auto tag) -> Tensor {
    using T = decltype(tag);
    const T l = impl::saturate_cast<T>(lo), h = impl::saturate_cast<T>(hi);
    return impl::map1<T, T>(a, [l, h](T x) {
      const T y = x < l ? l : x;
      return y > h ? h : y;
    });
  });
}

// --- in place --------------------------------------------------------------------------

namespace {

// An expanded view (stride 0 on a dim longer than 1) would be written by several elements.
void check_writable(const char* op, const Tensor& dst) {
  for (int64_t d = 0; d < dst.dim(); ++d)
    EMBER_CHECK(dst.size(d) <= 1 || dst.stride(d) != 0, op, ": cannot write into an expanded view ",
                "(shape ", shape_str(dst.shape()), ", strides ", shape_str(dst.strides()), ")");
}

}  // namespace

// dst[i] += alpha * src[i]
void add_(Tensor& dst, const Tensor& src, double alpha) {
  impl::check_same_dtype("add_", dst, src);
  const Shape shape = impl::broadcast_for("add_", dst.shape(), src.shape());
  EMBER_CHECK(shape == dst.shape(), "add_: src of shape ", shape_str(src.shape()),
              " does not broadcast to dst's shape ", shape_str(dst.shape()));
  check_writable("add_", dst);
  dst.bump_version();
  const Tensor s = src.expand(dst.shape());
  dispatch_all(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = dst.data<T>();
    const T* x = s.data<T>();
    const T av = impl::saturate_cast<T>(alpha);
    strided_rows<2>(dst.shape(), {dst.strides(), s.strides()},
                    [&](const auto& off, int64_t n, const auto& st) {
                      T* po = o + off[0];
                      const T* px = x + off[1];
                      if (st[0] == 1 && st[1] == 1) {
#pragma omp simd
                        for (int64_t i = 0; i < n; ++i) po[i] += av * px[i];
                      } else if (st[0] == 1 && st[1] == 0) {
                        const T v = av * px[0];
#pragma omp simd
                        for (int64_t i = 0; i < n; ++i) po[i] += v;
                      } else {
                        for (int64_t i = 0; i < n; ++i) po[i * st[0]] += av * px[i * st[1]];
                      }
                    });
  });
}

// dst[i] *= s
void mul_scalar_(Tensor& dst, double s) {
  impl::check_defined("mul_scalar_", dst);
  check_writable("mul_scalar_", dst);
  dst.bump_version();
  dispatch_all(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = dst.data<T>();
    strided_rows<1>(dst.shape(), {dst.strides()}, [&](const auto& off, int64_t n, const auto& st) {
      T* po = o + off[0];
      if constexpr (std::is_floating_point_v<T>) {
        const T sv = static_cast<T>(s);
        if (st[0] == 1) {
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) po[i] *= sv;
        } else {
          for (int64_t i = 0; i < n; ++i) po[i * st[0]] *= sv;
        }
      } else {
        for (int64_t i = 0; i < n; ++i)
          po[i * st[0]] = impl::saturate_cast<T>(static_cast<double>(po[i * st[0]]) * s);
      }
    });
  });
}

// --- comparisons ---------------------------------------------------------------------------

namespace {

// out = f(a, b) ? 1 : 0 as int32, a and b broadcast, of one dtype.
template <class F>
Tensor compare(const char* op, const Tensor& a, const Tensor& b, F f) {
  impl::check_same_dtype(op, a, b);
  return dispatch_all(a.dtype(), [&](auto tag) -> Tensor {
    using T = decltype(tag);
    return impl::map2<int32_t, T, T>(op, a, b,
                                     [f](T x, T y) { return static_cast<int32_t>(f(x, y)); });
  });
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) {
  return compare("eq", a, b, [](auto x, auto y) { return x == y; });
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return compare("ne", a, b, [](auto x, auto y) { return x != y; });
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return compare("lt", a, b, [](auto x, auto y) { return x < y; });
}
Tensor le(const Tensor& a, const Tensor& b) {
  return compare("le", a, b, [](auto x, auto y) { return x <= y; });
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return compare("gt", a, b, [](auto x, auto y) { return x > y; });
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return compare("ge", a, b, [](auto x, auto y) { return x >= y; });
}

// --- selection ------------------------------------------------------------------------------------

// out = cond != 0 ? a : b
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  impl::check_defined("where", cond);
  impl::check_same_dtype("where", a, b);
  return dispatch_all(cond.dtype(), [&](auto ctag) -> Tensor {
    using C = decltype(ctag);
    return dispatch_all(a.dtype(), [&](auto tag) -> Tensor {
      using T = decltype(tag);
      return impl::map3<T, C, T, T>("where", cond, a, b,
                                    [](C c, T x, T y) { return c != C(0) ? x : y; });
    });
  });
}

// out = mask != 0 ? value : a
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value) {
  impl::check_defined("masked_fill", a);
  impl::check_defined("masked_fill", mask);
  const Shape shape = impl::broadcast_for("masked_fill", a.shape(), mask.shape());
  EMBER_CHECK(shape == a.shape(), "masked_fill: mask of shape ", shape_str(mask.shape()),
              " does not broadcast to the input's shape ", shape_str(a.shape()));
  return dispatch_all(mask.dtype(), [&](auto mtag) -> Tensor {
    using M = decltype(mtag);
    return dispatch_all(a.dtype(), [&](auto tag) -> Tensor {
      using T = decltype(tag);
      const T v = impl::saturate_cast<T>(value);
      return impl::map2<T, T, M>("masked_fill", a, mask,
                                 [v](T x, M m) { return m != M(0) ? v : x; });
    });
  });
}

}  // namespace ember::kernels
