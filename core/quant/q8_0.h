// GGUF's Q8_0 weight blocks (the int8 format ggml and llama.cpp read, type 8): 32 weights
// along a row share one scale d, stored as IEEE half bits; weight j of a block is
// qs[j] * d. quantize_row_q8_0 rounds as ggml's reference quantizer does, so a file
// written with it holds the bytes llama.cpp's own converter would write.
#pragma once
#include <cstdint>

namespace ember::quant {

constexpr int64_t kQ8_0Block = 32;  // weights per block

// One block, 34 bytes, no padding (its bytes are the file's bytes).
struct BlockQ8_0 {
  uint16_t d;                 // the scale, IEEE binary16 bits
  int8_t qs[kQ8_0Block];      // the quantized weights
};
static_assert(sizeof(BlockQ8_0) == 34, "a Q8_0 block is 34 bytes (ggml's block_q8_0)");

// float32 -> IEEE half bits, rounding to nearest, ties to even; overflow (|x| >= 65520)
// gives infinity, a NaN stays a quiet NaN. half -> float32 is exact.
uint16_t fp16_bits(float x);
float fp16_value(uint16_t h);

// x[0..n) (n a multiple of 32) into n / 32 blocks. Per block: amax = max |x|,
// d = amax / 127 (float32), id = 1 / d (0 when d is 0), qs[j] = roundf(x[j] * id)
// (half away from zero); d is stored rounded to half.
void quantize_row_q8_0(const float* x, BlockQ8_0* out, int64_t n);

// The n floats n / 32 blocks stand for: qs[j] * float(d).
void dequantize_row_q8_0(const BlockQ8_0* blocks, float* out, int64_t n);

}  // namespace ember::quant
