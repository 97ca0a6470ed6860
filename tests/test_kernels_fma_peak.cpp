// kernels::measure_fma_peak: the register-only multiply-add peak bounds what
// oneDNN's matmul reaches (it cannot be much slower than the matmul, nor
// several times faster, which would mean a loop optimised away or FLOPs
// miscounted), and the bf16 dot-product peak exists exactly where
// /proc/cpuinfo lists avx512_bf16 and is at least the float32 peak.
// Timings on a shared machine are noisy: each comparison gets a few attempts.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <string>

#include "core/kernels/fma_peak.h"
#include "core/kernels/matmul.h"

using namespace ember;

namespace {

// Short rounds keep the test well under a second.
double fma_peak(DType dt) { return kernels::measure_fma_peak(dt, 3, 0.02); }

// Whether /proc/cpuinfo's flags list avx512_bf16; -1 without /proc/cpuinfo.
int cpuinfo_has_avx512_bf16() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line) && line.rfind("flags", 0) != 0) {
  }
  if (line.empty()) return -1;
  return (line + " ").find(" avx512_bf16 ") != std::string::npos ? 1 : 0;
}

}  // namespace

TEST_CASE("float32 FMA peak is at least the matmul peak and not several times it", "[fma_peak]") {
  double fma = 0, mm = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    mm = kernels::measure_matmul_peak(3);
    fma = fma_peak(DType::Float32);
    if (fma >= 0.9 * mm && fma <= 4 * mm) break;
  }
  INFO("FMA peak " << fma / 1e9 << " GFLOP/s, matmul peak " << mm / 1e9 << " GFLOP/s");
  REQUIRE(std::isfinite(fma));
  CHECK(fma >= 0.9 * mm);
  CHECK(fma <= 4 * mm);
}

TEST_CASE("bf16 FMA peak exists with AVX512-BF16 and is at least the float32 peak", "[fma_peak][bf16]") {
  const int flag = cpuinfo_has_avx512_bf16();
  if (flag >= 0) CHECK(kernels::cpu_has_avx512_bf16() == (flag == 1));
  if (!kernels::cpu_has_avx512_bf16()) {
    CHECK(fma_peak(DType::BFloat16) == 0);
    return;
  }
  double bf16 = 0, f32 = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    f32 = fma_peak(DType::Float32);
    bf16 = fma_peak(DType::BFloat16);
    if (bf16 >= 0.9 * f32 && bf16 <= 4 * f32) break;
  }
  INFO("bf16 " << bf16 / 1e9 << " GFLOP/s, float32 " << f32 / 1e9 << " GFLOP/s");
  REQUIRE(std::isfinite(bf16));
  CHECK(bf16 >= 0.9 * f32);
  CHECK(bf16 <= 4 * f32);
}

TEST_CASE("FMA peak rejects other dtypes and bad round counts", "[fma_peak]") {
  CHECK_THROWS_WITH(kernels::measure_fma_peak(DType::Int64), Catch::Contains("float32 or bfloat16, got int64"));
  CHECK_THROWS_WITH(kernels::measure_fma_peak(DType::Float32, 0), Catch::Contains("rounds"));
}
