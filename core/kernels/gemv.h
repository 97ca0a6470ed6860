// Matrix-vector product over a row-major matrix, the M = 1 matmul of
// decoding (x [1, K] times a Linear's W [N, K] transposed). It streams W once
// at memory speed, which oneDNN's matmul does not do for M = 1; kernels::matmul
// routes float32 M = 1 products with contiguous W rows here.
#pragma once
#include <cstdint>

namespace ember::kernels {

// y[n * incy] = alpha * sum_k x[k] w[n * ldw + k] + beta * y[n * incy]  for n < N
// (beta = 0 never reads y). x and each row of w are contiguous.
void gemv_rows(int64_t N, int64_t K, const float* x, const float* w, int64_t ldw, float* y,
               int64_t incy, float alpha = 1, float beta = 0);

}  // namespace ember::kernels
