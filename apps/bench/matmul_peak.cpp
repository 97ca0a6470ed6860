// Robust peaks and the floor's rule (see matmul_peak.h).
#include "apps/bench/matmul_peak.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "apps/bench/fma_peak.h"
#include "core/kernels/matmul.h"

namespace ember::apps {

MatmulPeak measure_peak(int rounds, int products_per_round, DType operands) {
  MatmulPeak p;
  for (int r = 0; r < rounds; ++r) {
    if (r > 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    p.flops = std::max(p.flops, kernels::measure_matmul_peak(products_per_round, operands));
    p.products += products_per_round;
  }
  return p;
}

double measure_float32_fma_peak() {
  double best = 0;
  for (int r = 0; r < 3; ++r) {  // 3 x 5 rounds of 50 ms, pauses between, as measure_peak
    if (r > 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    best = std::max(best, apps::measure_fma_peak(DType::Float32));
  }
  return best;
}

FloorPeak floor_peak(DType operands, double matmul_peak_flops, double float32_fma_peak_flops) {
  if (matmul_peak_flops > float32_fma_peak_flops) {
    return {matmul_peak_flops, operands == DType::BFloat16 ? "bf16 matmul" : "float32 matmul"};
  }
  return {float32_fma_peak_flops, "float32 FMA"};
}

}  // namespace ember::apps
