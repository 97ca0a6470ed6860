// float32 <-> bfloat16, the operand type of the mixed-precision matmul.
// bfloat16 is the upper half of a float32 (sign, 8 exponent bits, 7 mantissa
// bits); narrowing rounds to nearest, ties to even, on the dropped 16 bits:
//   bf16(x) = (bits(x) + 0x7FFF + (bits(x) >> 16 & 1)) >> 16,  NaN stays a (quiet) NaN
// and widening is exact: bits(float(h)) = h << 16.
#pragma once
#include <bit>
#include <cstdint>

#include "core/tensor.h"

namespace ember::kernels {

// One float's bfloat16 bits by the rule above (the element function of
// to_bfloat16; AdamW rounds updated weights with it). Branch-free, vectorizes.
[[gnu::always_inline]] inline uint16_t bfloat16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;  // keeps sign and payload top bits
  const uint32_t is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<uint16_t>(is_nan ? quiet_nan : rounded);
}

// The float a bfloat16's bits stand for (exact).
[[gnu::always_inline]] inline float bfloat16_value(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// A new contiguous bfloat16 tensor holding x (float32, any layout) rounded.
Tensor to_bfloat16(const Tensor& x);
// A new contiguous float32 tensor holding x (bfloat16) exactly.
Tensor bfloat16_to_float32(const Tensor& x);

}  // namespace ember::kernels
