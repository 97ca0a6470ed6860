// Robust peaks and the floor's rule (see matmul_peak.h).
#include "apps/common/matmul_peak.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "apps/common/stopwatch.h"
#include "core/error.h"
#include "core/kernels/bf16.h"
#include "apps/common/fma_peak.h"
#include "core/kernels/matmul.h"

namespace ember::apps {
namespace {

// The best of `rounds` calls of measure, 30 ms apart.
template <class Measure>
double best_of_rounds(int rounds, Measure&& measure) {
  double best = 0;
  for (int r = 0; r < rounds; ++r) {
    if (r > 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    best = std::max(best, measure());
  }
  return best;
}

// FLOP/s of the fastest of `products` 1024^3 products, B transposed when trans_b.
double matmul_flops(int products, DType operands, bool trans_b) {
  const int64_t n = 1024;
  Tensor a = Tensor::randn({n, n}, 1), b = Tensor::randn({n, n}, 2);
  if (operands == DType::BFloat16) {
    a = kernels::to_bfloat16(a);
    b = kernels::to_bfloat16(b);
  }
  const double seconds = best_seconds({.min = products, .max = products},
                                      [&] { kernels::matmul(a, b, false, trans_b); });
  return 2.0 * static_cast<double>(n * n * n) / seconds;
}

}  // namespace

MatmulPeak best_candidate(std::vector<PeakCandidate> candidates, int products) {
  MatmulPeak p;
  p.products = products;
  for (const PeakCandidate& c : candidates) {
    if (c.flops > p.flops) p.flops = c.flops, p.layout = c.layout;
  }
  p.candidates = std::move(candidates);
  return p;
}

MatmulPeak measure_peak(int rounds, int products_per_round, DType operands) {
  std::vector<PeakCandidate> candidates{{"A B", 0}, {"A B^T", 0}};
  const int per_layout = std::max(1, (products_per_round + 1) / 2);
  for (PeakCandidate& c : candidates) {
    const bool trans_b = &c != &candidates.front();
    c.flops = best_of_rounds(rounds, [&] { return matmul_flops(per_layout, operands, trans_b); });
  }
  return best_candidate(std::move(candidates), std::max(rounds, 0) * per_layout * 2);
}

double measure_fma_peak(DType dtype, int rounds, double round_seconds) {
  EMBER_CHECK(rounds > 0 && round_seconds > 0, "measure_fma_peak: rounds and round_seconds must be positive");
  double best = 0;
  for (int r = 0; r < rounds; ++r) {  // back to back: a round is only about 50 ms
    const double flops = apps::fma_round_flops(dtype, round_seconds);
    if (flops == 0) return 0;  // no kernel for dtype on this CPU
    best = std::max(best, flops);
  }
  return best;
}

double measure_float32_fma_peak() {
  // 3 x 5 rounds of 50 ms, pauses between, as measure_peak
  return best_of_rounds(3, [] { return measure_fma_peak(DType::Float32); });
}

FloorPeak floor_peak(DType operands, double matmul_peak_flops, double float32_fma_peak_flops) {
  if (matmul_peak_flops > float32_fma_peak_flops) {
    return {matmul_peak_flops, operands == DType::BFloat16 ? "bf16 matmul" : "float32 matmul"};
  }
  return {float32_fma_peak_flops, "float32 FMA"};
}

}  // namespace ember::apps
