// Batched matrix multiply, C = alpha * op(A) op(B) + beta * C, where op
// transposes the last two dims when its flag is set (a stride change, never a
// copy). A is [..., M, K] ([..., K, M] with trans_a), B is [..., K, N]
// ([..., N, K] with trans_b). Batch dims broadcast; a 2-D operand is shared by
// every batch. float32 runs on cached oneDNN matmul primitives (one per shape,
// strides and beta); float64 on a blocked reference kernel. bfloat16 operands
// (kernels/bf16.h: mixed precision) give a float32 C, accumulated in float32,
// on oneDNN's bf16 primitives (AVX512-BF16 / AMX where the CPU has them).
#pragma once
#include "core/tensor.h"

namespace ember::kernels {

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// Writes into c (shape [..., M, N], any strides whose last dim is contiguous or
// second-to-last is contiguous); with beta = 1 it accumulates.
void matmul_into(Tensor& c, const Tensor& a, const Tensor& b, bool trans_a = false,
                 bool trans_b = false, double alpha = 1, double beta = 0);
// matmul_into for 2-D products whose M and K change from call to call (the
// row groups of MoE experts): one cached primitive per (N, layout, alpha,
// beta, dtype) with M and K given at run time, instead of one per shape.
void matmul_into_varying(Tensor& c, const Tensor& a, const Tensor& b, bool trans_a = false,
                         bool trans_b = false, double alpha = 1, double beta = 0);
// Number of oneDNN primitives created so far (for tests of the cache).
int64_t matmul_primitive_cache_size();
// True when oneDNN runs bfloat16 matmuls on native instructions (AVX512-BF16 or
// AMX); elsewhere they are emulated or fall back to the reference kernel, slower than float32.
// Follows ONEDNN_MAX_CPU_ISA and EMBER_MAX_ISA (kernels/cpu_isa.h).
bool bf16_matmul_native();
// The instruction set oneDNN generates code for: its dnnl_cpu_isa_t name
// ("avx2", "avx512_core_bf16", "avx512_core_amx", ...), the CPU's capped by
// ONEDNN_MAX_CPU_ISA, or else by EMBER_MAX_ISA, which ember passes on to oneDNN
// (generic -> sse41, oneDNN's lowest; avx2 -> avx2; avx512 -> avx512_core).
const char* onednn_cpu_isa();
// The name onednn_cpu_isa() gives a dnnl::cpu_isa value (its int); "reference"
// for cpu_isa::all and any value oneDNN 2.6 does not name.
const char* onednn_isa_name(int isa);

}  // namespace ember::kernels
