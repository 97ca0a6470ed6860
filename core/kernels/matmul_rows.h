// The batch-invariant matmul of inference: y = x W^T (+ b) for a Linear's
// W [N, K], where each output y[m, n] is summed over k in one fixed order that
// depends only on K, never on M, on the other rows of x or on the thread count.
// A request's logits are then the same whether it runs alone or in a batch of
// sixteen (what `ember serve` promises), which oneDNN's matmul does not ensure.
#pragma once
#include <cstdint>

namespace ember::kernels {

// y[m * ldy + n] = sum_k x[m * ldx + k] w[n * ldw + k] (+ bias[n] when bias is not null)
// for m < M, n < N. Rows of x and w are contiguous. Bit-identical rows for any M.
void matmul_rows(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* w,
                 int64_t ldw, const float* bias, float* y, int64_t ldy);

// The same for bfloat16 weights (w holds their bits, kernels/bf16.h, each row in the pair order
// below): each weight is widened exactly to its float, then the float32 sequence of operations
// runs, so the result is bit-identical to matmul_rows over the widened weights (and so
// batch-invariant the same way) while W streams at half the bytes.
void matmul_rows_bf16(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const uint16_t* w,
                      int64_t ldw, const float* bias, float* y, int64_t ldy);

// The pair order of a bfloat16 row of K weights: in each whole block of 32 along k, the two
// halves interleaved, so position 32c + 2j holds k = 32c + j and 32c + 2j + 1 holds
// k = 32c + 16 + j (j < 16); the k past the last whole block stay in place. One 64-byte load
// then widens to the 16 lanes of k = 32c + j (shifted up) and of 32c + 16 + j (masked): no
// shuffle, and each lane meets the x it meets in the float32 order.
inline int64_t bf16_pair_position(int64_t k, int64_t K) {
  if (k >= K - K % 32) return k;
  const int64_t j = k % 32;
  return k - j + (j < 16 ? 2 * j : 2 * (j - 16) + 1);
}
// w [N, K] float32 rounded to bfloat16 (nearest-even), each row in the pair order.
void pack_rows_bf16(const float* w, int64_t N, int64_t K, uint16_t* out);
// A row in the pair order widened to its K floats in k order.
void widen_row_bf16(const uint16_t* row, int64_t K, float* out);

}  // namespace ember::kernels
