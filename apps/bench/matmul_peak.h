// The peaks `ember train` and `ember bench` divide by, measured so that a busy
// moment on a shared machine does not lower them much: the best of several
// rounds with short pauses between, so one burst of another process spoils
// one round, not the figure.
//   measure_peak: the matmul peak MFU divides by, 1024^3 oneDNN products with
//     float32 or, for --dtype bf16, bf16 operands (AMX tiles where oneDNN uses them).
//   measure_float32_fma_peak: the register-only float32 multiply-add peak
//     (apps::measure_fma_peak).
//   floor_peak: the rate `ember bench`'s floor divides a step's FLOPs by.
#pragma once
#include "core/dtype.h"

namespace ember::apps {

struct MatmulPeak {
  double flops = 0;  // FLOP/s of the fastest product
  int products = 0;  // how many products it was the best of
};
// operands: Float32, or BFloat16 for the bf16 matmul peak (--dtype bf16).
MatmulPeak measure_peak(int rounds = 3, int products_per_round = 4, DType operands = DType::Float32);

// FLOP/s of all threads: the best of 3 x 5 rounds of 50 ms.
double measure_float32_fma_peak();

// The floor's rule: the fastest rate at which any FLOP of a training step with
// `operands` matmuls was measured to run, the better of
//   - the float32 register-only FMA peak (float32 matmuls and everything else
//     of the step, attention included, run float32 FMAs), and
//   - the matmul peak of the step's operands (float32, or bf16: the best oneDNN
//     bf16 matmul, which is what bf16 training's products run on, AMX where
//     present; bf16 vdpbf16ps chains are not used).
// No step can do its FLOPs faster than at this rate.
struct FloorPeak {
  double flops = 0;
  const char* source = "";  // "float32 FMA", "float32 matmul" or "bf16 matmul"
};
FloorPeak floor_peak(DType operands, double matmul_peak_flops, double float32_fma_peak_flops);

}  // namespace ember::apps
