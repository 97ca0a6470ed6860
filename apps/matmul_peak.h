// The matmul peak (float32, or bf16 under --dtype bf16) that MFU divides by, measured so that a busy moment
// on a shared machine does not lower it much: the best of several rounds of
// 1024^3 products (kernels::measure_matmul_peak) with short pauses between
// rounds, so one burst of another process spoils one round, not the figure.
// Also the register-only multiply-add peak (kernels::measure_fma_peak) of the
// same precision: no step can do its FLOPs faster (`ember bench`'s floor).
#pragma once
#include "core/dtype.h"

namespace ember::apps {

struct MatmulPeak {
  double flops = 0;  // FLOP/s of the fastest product
  int products = 0;  // how many products it was the best of
};
// operands: Float32, or BFloat16 for the bf16 matmul peak (--dtype bf16).
MatmulPeak measure_peak(int rounds = 3, int products_per_round = 4, DType operands = DType::Float32);

struct FmaPeak {
  double flops = 0;                // FLOP/s of all threads
  DType dtype = DType::Float32;    // the instructions measured
};
// The fastest multiply-adds matmuls with `operands` can run on: bf16 dot
// products (vdpbf16ps) on CPUs with AVX512-BF16, float32 FMAs otherwise (and
// for Float32), where bf16 matmuls convert to float32. (AMX tiles, which
// oneDNN uses for bf16 where the CPU has them, are faster still; not measured.)
FmaPeak measure_fma_peak_for(DType operands);

}  // namespace ember::apps
