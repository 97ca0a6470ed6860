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

// The same for bfloat16 weights (w holds their bits, kernels/bf16.h): each weight is widened
// exactly to its float, then the float32 sequence of operations runs, so the result is
// bit-identical to matmul_rows over the widened weights (and so batch-invariant the same way)
// while W streams at half the bytes.
void matmul_rows_bf16(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const uint16_t* w,
                      int64_t ldw, const float* bias, float* y, int64_t ldy);

}  // namespace ember::kernels
