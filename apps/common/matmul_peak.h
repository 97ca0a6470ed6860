// The one place that measures the peaks `ember train`, `ember bench` and the
// bench/ programs divide by, so that a busy moment on a shared machine does
// not lower them much: the best of several rounds with short pauses between,
// so one burst of another process spoils one round, not the figure.
//   measure_peak: the matmul peak MFU divides by, 1024^3 oneDNN products with
//     float32 or, for --dtype bf16, bf16 operands (AMX tiles where oneDNN uses them),
//     in the two layouts training runs (A B, and A B^T as Linear's x W^T): the faster.
//   measure_fma_peak / measure_float32_fma_peak: the register-only
//     multiply-add peak (rounds of apps::fma_round_flops).
//   floor_peak: the rate `ember bench`'s floor divides a step's FLOPs by.
#pragma once
#include <vector>

#include "core/dtype.h"

namespace ember::apps {

// One layout's best: "A B" or "A B^T" (B stored [N, K], as a Linear's weight).
struct PeakCandidate {
  const char* layout = "";
  double flops = 0;
};
struct MatmulPeak {
  double flops = 0;         // FLOP/s of the fastest product: the best candidate's
  int products = 0;         // how many products it was the best of (all layouts)
  const char* layout = "";  // the layout of the fastest
  std::vector<PeakCandidate> candidates;
};
// operands: Float32, or BFloat16 for the bf16 matmul peak (--dtype bf16).
// FLOP/s = 2 * 1024^3 / seconds of the fastest product. Each round times
// products_per_round products split between the layouts (at least one each).
MatmulPeak measure_peak(int rounds = 3, int products_per_round = 4, DType operands = DType::Float32);
// The peak of measured candidates: the fastest of them (the first on a tie).
MatmulPeak best_candidate(std::vector<PeakCandidate> candidates, int products);

// FLOP/s of all OpenMP threads: the best of `rounds` back-to-back rounds of
// about `round_seconds` (apps::fma_round_flops; 0 for BFloat16 where the
// CPU lacks AVX512-BF16).
double measure_fma_peak(DType dtype = DType::Float32, int rounds = 5, double round_seconds = 0.05);

// The float32 FMA peak of `ember bench`: the best of 3 x 5 rounds of 50 ms.
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
