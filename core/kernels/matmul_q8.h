// The batch-invariant matmul of int8 weights in GGUF's Q8_0 form: y = x W^T (+ b) for W [N, K]
// quantized row by row into Q8_0 blocks (core/quant/q8_0.h: 32 weights along the input, one
// half-precision scale; a K that is not a multiple of 32 padded with zero weights), the blocks of
// 8 rows interleaved for the kernel (BlockQ8x8: the same int8 values and scale bits), x quantized
// per row in blocks of 32 to int8 (quantize_activations_q8). Each block's dot product is summed
// exactly in int32 (AMX tdpbssd or VNNI vpdpbusd where the CPU has it), then scaled by both
// scales. One order per output, fixed by K alone:
//   acc = 0; per block b in order: acc = fma(dx_b * dw_b, float(sum_{t < 32} qx_t qw_t), acc)
//   y = acc (+ bias)
// so a row's outputs never depend on M, the other rows or the split of the columns, and every
// code path gives the same bits.
#pragma once
#include <cstdint>

#include "core/quant/q8_0.h"

namespace ember::kernels {

// Blocks per row for K inputs, groups of 8 rows for N outputs.
inline int64_t q8_blocks(int64_t K) { return (K + quant::kQ8_0Block - 1) / quant::kQ8_0Block; }
inline int64_t q8_groups(int64_t N) { return (N + 7) / 8; }

// Block b of rows 8g .. 8g + 7 (rows past N are zeros): qs[32 t + 4 r + i] is row r's
// weight 4 t + i of the block (t, r < 8, i < 4): what one vpdpbusd multiplies by 4 broadcast
// activations; d[r] the row's scale bits; sum[r] the sum of its 32 int8 values.
struct BlockQ8x8 {
  int8_t qs[8 * quant::kQ8_0Block];
  uint16_t d[8];
  int16_t sum[8];
};
static_assert(sizeof(BlockQ8x8) == 288);

// x [K] in blocks of 32 (the last padded with zeros): d[b] = amax / 127 (float32),
// q[32b + t] = roundf(x * (1 / d[b])) (0 for a block of zeros). q holds 32 q8_blocks(K) values.
void quantize_activations_q8(const float* x, int64_t K, int8_t* q, float* d);
// The same on the named code path (matmul_q8_path's names; each path has its own quantizer, all
// giving the same bytes and scales), for tests: an Error when this CPU cannot run it.
void quantize_activations_q8_on(const char* path, const float* x, int64_t K, int8_t* q, float* d);

// W [N, K] float32 -> q8_groups(N) * q8_blocks(K) blocks, group-major (g * nb + b); each row's
// blocks are quant::quantize_row_q8_0's.
void pack_weights_q8(const float* w, int64_t N, int64_t K, BlockQ8x8* out);
// Row n's K weights as the kernel multiplies by them (qs * float(d)).
void unpack_row_q8(const BlockQ8x8* w, int64_t K, int64_t n, float* out);

// y[m * ldy + n] = the order above for m < M and n in [n0, n1) (bias indexed by n).
void matmul_q8(int64_t M, int64_t K, const float* x, int64_t ldx, const BlockQ8x8* w,
               const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1);

// The code path matmul_q8 runs here: "amx" (AMX tiles for two rows or more, AVX-512 VNNI for
// one), "avx512_vnni", "avx_vnni", "avx2" or "generic" (the CPU's, capped by EMBER_MAX_ISA:
// core/kernels/cpu_isa.h; EMBER_MAX_ISA=avx512 leaves out AMX).
const char* matmul_q8_path();

// matmul_q8 on the named path (one of the names above), for tests that compare the paths: an
// Error when this CPU cannot run it.
void matmul_q8_on(const char* path, int64_t M, int64_t K, const float* x, int64_t ldx,
                  const BlockQ8x8* w, const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1);

}  // namespace ember::kernels
