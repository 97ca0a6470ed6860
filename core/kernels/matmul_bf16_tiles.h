// bfloat16 weights on AMX tiles (CPUs with AMX-BF16: Intel Sapphire Rapids and later), where
// `--weights bf16` runs there (kernels/packed_weights.h): y = bf16(x) W^T (+ b), the activations
// rounded to bfloat16 (kernels/bf16.h) as the weights are, each output summed by tdpbf16ps in
// steps of 32 k in k order into a float32 accumulator. The products of two bfloat16 values are
// exact in float32; the order and rounding of the sums inside a step are the tile unit's own
// (they match no plain float32 loop: measured), so this path's bits are its own. Every output
// depends on its row of x and of W alone, and the same tile steps run for any M, other rows,
// thread count or column range: batch-invariant.
//
// Layout: W [N, K] padded with zeros to N16 = 16 ceil(N / 16) rows and K32 = 32 ceil(K / 32)
// columns, as 1 KiB tiles: tile (t, b) holds outputs [16 t, 16 t + 16) x k in [32 b, 32 b + 32),
//   tiles[(t * K32 / 32 + b) * 512 + 32 i + 2 j + p] = bits of W[16 t + j, 32 b + 2 i + p]
// (i, j < 16, p < 2): the B operand tdpbf16ps reads (for each output, pairs of adjacent k).
// An output tile's k-run is contiguous, so one row of x streams it in order. The zeros add
// exact zero products.
#pragma once
#include <cstdint>

namespace ember::kernels {

// True when the CPU has AMX-BF16 (and AVX-512 BF16), Linux grants the tile state, and
// EMBER_MAX_ISA does not cap it (kernels/cpu_isa.h: any cap turns it off).
bool bf16_tiles_available();

// Elements (uint16_t) of W's tiles: N16 * K32.
int64_t bf16_tiles_size(int64_t N, int64_t K);
// w [N, K] float32 rounded to bfloat16 (nearest-even) into the layout above.
void pack_tiles_bf16(const float* w, int64_t N, int64_t K, uint16_t* tiles);
// Row n of W in k order, widened to K floats (exact).
void unpack_row_tiles_bf16(const uint16_t* tiles, int64_t K, int64_t n, float* out);

// y[m * ldy + n] = sum_k bf16(x[m * ldx + k]) W[n, k] (+ bias[n]) for m < M, n in [n0, n1),
// on the tiles (the CPU must run them: bf16_tiles_available() held when they were packed; a
// later EMBER_MAX_ISA does not count). Threads share the output tiles when not already in a
// parallel region.
void matmul_bf16_tiles(int64_t M, int64_t K, const float* x, int64_t ldx, const uint16_t* tiles,
                       const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1);

}  // namespace ember::kernels
