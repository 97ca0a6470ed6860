// The batch-invariant matmul of int8 (GGUF Q8_0) weights: y = x W^T (+ b) for W [N, K] stored as
// rows of ceil(K / 32) Q8_0 blocks (core/quant/q8_0.h; a K that is not a multiple of 32 padded
// with zero weights), x quantized per row in blocks of 32 to int8 (quantize_activations_q8), each
// block's dot product summed exactly in int32 (VNNI vpdpbusd where the CPU has it) and scaled by
// both scales. One order per output, fixed by K alone:
//   per block b, lane j < 8: i_j = sum_{t < 4} qx[32b + 4j + t] qw[32b + 4j + t]  (exact)
//     acc[j] = acc[j] + (dx_b * dw_b) * float(i_j)   (fused where the code path has FMA)
//   y = acc[0] + acc[1] + ... + acc[7] (left to right) (+ bias)
// so a row's outputs never depend on M, the other rows or the split of the columns.
#pragma once
#include <cstdint>

#include "core/quant/q8_0.h"

namespace ember::kernels {

// Blocks per row for K inputs.
inline int64_t q8_blocks(int64_t K) { return (K + quant::kQ8_0Block - 1) / quant::kQ8_0Block; }

// x [K] in blocks of 32 (the last padded with zeros): d[b] = amax / 127 (float32),
// q[32b + t] = roundf(x * (1 / d[b])) (0 for a block of zeros). q holds 32 q8_blocks(K) values.
void quantize_activations_q8(const float* x, int64_t K, int8_t* q, float* d);

// W [N, K] as N rows of q8_blocks(K) blocks (zero weights past K).
void quantize_weights_q8(const float* w, int64_t N, int64_t K, quant::BlockQ8_0* out);

// y[m * ldy + n] = the order above for m < M, n < N; w: N rows of q8_blocks(K) blocks.
void matmul_q8(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx,
               const quant::BlockQ8_0* w, const float* bias, float* y, int64_t ldy);

// The code path matmul_q8 runs here: "avx512_vnni", "avx_vnni", "avx2" or "generic" (the
// CPU's, capped by EMBER_MAX_ISA: core/kernels/cpu_isa.h).
const char* matmul_q8_path();

// matmul_q8 on the named path (one of the names above), for tests that compare the paths: an
// Error when this CPU cannot run it.
void matmul_q8_on(const char* path, int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx,
                  const quant::BlockQ8_0* w, const float* bias, float* y, int64_t ldy);

}  // namespace ember::kernels
