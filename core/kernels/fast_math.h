// Branch-free float32 math for the hot elementwise kernels: exp (Cephes
// polynomial, about 1 ulp, right at the overflow/denormal ends), and tanh,
// sigmoid and the normal CDF (for GELU) built on it. Loops over them vectorize at -O3 (no branches, see
// core/simd.h) where std::exp stays a scalar call. float64 (gradchecks,
// references) uses the std:: functions.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/simd.h"

namespace ember::kernels::fast {

using ember::blend;

// The part of exp shared by exp_f32 and the attention kernels' vector exp:
// fn = round(x / ln2) and e^r, r = x - fn ln2 (ln2 in two parts, Cody-Waite),
// by Cephes' degree-6 polynomial, for x already clamped. F is float or a GCC
// float vector.
template <class F>
inline F exp_reduced(F x, F& fn) {
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  fn = (x * 1.44269504088896341f + magic) - magic;
  F r = x - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}

// exp(x) = 2^n e^r with n = round(x / ln2), |r| <= ln2/2; e^r by Cephes'
// degree-6 polynomial; 2^n applied as two halves so that denormal results and
// the overflow to inf come out right. x is clamped to [-104, 88.8] on its
// bits (integer min, no branch); NaN in, NaN out.
inline float exp_f32(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  u = u < 0xC2D00000u ? u : 0xC2D00000u;  // below -104 (or a negative NaN): -104
  int32_t i = static_cast<int32_t>(u);
  i = i < 0x42B1999A ? i : 0x42B1999A;  // above 88.8 (or a NaN): 88.8
  const float xc = std::bit_cast<float>(i);
  float fn;
  const float y = exp_reduced(xc, fn);
  const int32_t n = static_cast<int32_t>(fn);  // in [-150, 128]
  const int32_t n1 = n >> 1, n2 = n - n1;
  const float s1 = std::bit_cast<float>((n1 + 127) << 23);
  const float s2 = std::bit_cast<float>((n2 + 127) << 23);
  return blend(x != x, x, y * s1 * s2);
}

// tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|), for |x| >= 0.3 (no
// cancellation there); below, the odd Taylor series to x^11 (error < 1e-8).
inline float tanh_f32(float x) {
  const float a = std::abs(x);
  const float e = exp_f32(-2.0f * a);
  const float big = (1.0f - e) / (1.0f + e);
  const float z = a * a;
  float p = -1382.0f / 155925.0f;
  p = p * z + 62.0f / 2835.0f;
  p = p * z - 17.0f / 315.0f;
  p = p * z + 2.0f / 15.0f;
  p = p * z - 1.0f / 3.0f;
  const float small = a + a * z * p;
  return std::copysign(blend(a < 0.3f, small, big), x);
}

template <class T>
inline T exp(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return exp_f32(x);
  } else {
    return std::exp(x);
  }
}

template <class T>
inline T tanh(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return tanh_f32(x);
  } else {
    return std::tanh(x);
  }
}

// sigmoid(x) = 1 / (1 + e^-x) for x >= 0 and e^x / (1 + e^x) below, with
// e = exp(-|x|) <= 1, so neither form overflows for large |x|.
template <class T>
inline T sigmoid(T x) {
  const T e = exp(-std::abs(x));
  const T r = T(1) / (T(1) + e);
  return blend(x >= T(0), r, e * r);
}

// sigmoid(x) and 1 - sigmoid(x) = sigmoid(-x), both without cancellation.
template <class T>
inline void sigmoid_pair(T x, T& s, T& one_minus_s) {
  const T e = exp(-std::abs(x));
  const T r = T(1) / (T(1) + e);
  s = blend(x >= T(0), r, e * r);
  one_minus_s = blend(x >= T(0), e * r, r);
}

// Phi(x) = 0.5 erfc(-x / sqrt 2), the standard normal CDF. float32: with
// c = 0.5 erfc(|x| / sqrt 2), Phi = c for x < 0 and 1 - c above, erfc by the
// Chebyshev fit of Numerical Recipes (erfcc, relative error < 1.2e-7 for all
// z >= 0): erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2). No cancellation
// in the tail, unlike 0.5 (1 + erf(x / sqrt 2)).
template <class T>
inline T normal_cdf(T x) {
  if constexpr (std::is_same_v<T, float>) {
    const float z = std::abs(x) * 0.70710678118654752f;
    const float t = 1.0f / (1.0f + 0.5f * z);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    const float c = 0.5f * t * exp_f32(p - z * z);
    return blend(x < 0.0f, c, 1.0f - c);
  } else {
    return T(0.5) * std::erfc(-x * T(0.70710678118654752440));
  }
}

}  // namespace ember::kernels::fast
