// Q8_0 quantization (q8_0.h): ggml's reference rounding, and the float <-> half
// conversions its scale needs.
#include "core/quant/q8_0.h"

#include <bit>
#include <cmath>

#include "core/error.h"

namespace ember::quant {

uint16_t fp16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7FFFFFFFu;
  if (a >= (127u + 16u) << 23) {  // >= 2^16: infinity, or NaN (kept quiet)
    return static_cast<uint16_t>(sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u));
  }
  if (a < (113u << 23)) {  // below 2^-14: a half subnormal or zero
    // Adding 0.5 (2^-1) puts the half's subnormal step 2^-24 at the float's last mantissa
    // bit, so the float addition itself rounds to nearest even.
    const float magic = 0.5f;
    const float sum = std::bit_cast<float>(a) + magic;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(sum) - std::bit_cast<uint32_t>(magic)));
  }
  const uint32_t mant_odd = (a >> 13) & 1u;
  a += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFFu + mant_odd;  // rebias, round to even
  return static_cast<uint16_t>(sign | (a >> 13));  // a carry into the exponent is right
}

float fp16_value(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

void quantize_row_q8_0(const float* x, BlockQ8_0* out, int64_t n) {
  EMBER_CHECK(n % kQ8_0Block == 0, "Q8_0 quantizes rows of a multiple of 32 values, not ", n);
  for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
    const float* xb = x + b * kQ8_0Block;
    float amax = 0.0f;
    for (int64_t j = 0; j < kQ8_0Block; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = fp16_bits(d);
    for (int64_t j = 0; j < kQ8_0Block; ++j) {
      out[b].qs[j] = static_cast<int8_t>(std::roundf(xb[j] * id));
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* blocks, float* out, int64_t n) {
  EMBER_CHECK(n % kQ8_0Block == 0, "Q8_0 dequantizes rows of a multiple of 32 values, not ", n);
  for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
    const float d = fp16_value(blocks[b].d);
    for (int64_t j = 0; j < kQ8_0Block; ++j) out[b * kQ8_0Block + j] = blocks[b].qs[j] * d;
  }
}

}  // namespace ember::quant
