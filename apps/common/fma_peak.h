// The CPU's raw multiply-add throughput, as opposed to the matmul peak
// (apps::measure_peak): every OpenMP thread runs independent vector
// multiply-adds on accumulators held in registers, with no memory traffic and
// no blocking, so no float32 kernel can do its FLOPs faster: the float32 part
// of `ember bench`'s floor (apps::floor_peak). One timed round here; the
// rounds and the best of them are apps::measure_fma_peak's (apps/common/matmul_peak.h).
#pragma once
#include "core/dtype.h"

namespace ember::apps {

// FLOP/s of all OpenMP threads together (2 FLOP per lane per multiply-add)
// over one round of about `round_seconds`.
//   Float32:  vfmadd on the widest vectors the CPU runs (AVX-512, else
//             AVX2 + FMA, else SSE multiply then add).
//   BFloat16: vdpbf16ps (32 bf16 pairs summed into 16 float lanes: 64 FLOP per
//             instruction); 0 where the CPU lacks AVX512-BF16. Not what bf16
//             training runs at: oneDNN's bf16 matmuls may use other units
//             (AMX tiles), so `ember bench` takes the bf16 matmul peak instead.
// Each choice is capped by EMBER_MAX_ISA (kernels/cpu_isa.h).
double fma_round_flops(DType dtype = DType::Float32, double round_seconds = 0.05);

// The instruction set fma_round_flops(dtype) runs: "avx512", "avx2" or
// "generic" for Float32, "avx512_bf16" for BFloat16; "" where it returns 0.
const char* fma_peak_isa(DType dtype = DType::Float32);

}  // namespace ember::apps
