// Robust matmul peak (see matmul_peak.h).
#include "apps/matmul_peak.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/kernels/fma_peak.h"
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

FmaPeak measure_fma_peak_for(DType operands) {
  FmaPeak p;
  p.dtype = operands == DType::BFloat16 && kernels::cpu_has_avx512_bf16() ? DType::BFloat16 : DType::Float32;
  for (int r = 0; r < 3; ++r) {  // 3 x 5 rounds of 50 ms, pauses between, as measure_peak
    if (r > 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    p.flops = std::max(p.flops, kernels::measure_fma_peak(p.dtype));
  }
  return p;
}

}  // namespace ember::apps
