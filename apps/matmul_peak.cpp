// Robust matmul peak (see matmul_peak.h).
#include "apps/matmul_peak.h"

#include <algorithm>
#include <chrono>
#include <thread>

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

}  // namespace ember::apps
