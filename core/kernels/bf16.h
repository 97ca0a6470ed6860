// float32 <-> bfloat16, the operand type of the mixed-precision matmul.
// bfloat16 is the upper half of a float32 (sign, 8 exponent bits, 7 mantissa
// bits); narrowing rounds to nearest, ties to even, on the dropped 16 bits:
//   bf16(x) = (bits(x) + 0x7FFF + (bits(x) >> 16 & 1)) >> 16,  NaN stays a (quiet) NaN
// and widening is exact: bits(float(h)) = h << 16.
#pragma once
#include "core/tensor.h"

namespace ember::kernels {

// A new contiguous bfloat16 tensor holding x (float32, any layout) rounded.
Tensor to_bfloat16(const Tensor& x);
// A new contiguous float32 tensor holding x (bfloat16) exactly.
Tensor bfloat16_to_float32(const Tensor& x);

}  // namespace ember::kernels
