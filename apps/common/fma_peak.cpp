// Register-only multiply-add peak (see fma_peak.h).
//
// Each kernel runs `iters` times kChains independent multiply-adds
//   acc[i] = acc[i] * a + b     (float32; a < 1, so acc converges: no overflow, no denormals)
//   acc[i] += sum of 2 products  (bf16 dot product; b tiny, so acc stays finite)
// and returns the sum of every lane, which the caller stores, so the compiler
// has to compute them all. kChains = 12 independent chains cover the FMA
// latency times the FMA pipes (4 x 2 on current x86 cores), so the pipes never
// wait for a result; 12 accumulators + 2 operands fit in the 16 ymm registers
// of AVX2 as well as in the 32 of AVX-512.
#include "apps/common/fma_peak.h"

#include "core/kernels/cpu_isa.h"

#include <chrono>
#include <cstdint>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define EMBER_FMA_PEAK_X86 1
#endif

namespace ember::apps {

namespace {

using kernels::Isa;
using kernels::isa_available;

constexpr int kChains = 12;

// Without x86 FMA (or off x86): multiply then add on 16-byte vectors, still 2 FLOP per lane.
float mul_add_generic(int64_t iters) {
  using V = float __attribute__((vector_size(16)));
  const V a = V{} + 0.999f, b = V{} + 1e-3f;
  V acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = V{} + static_cast<float>(i);
  for (int64_t n = 0; n < iters; ++n) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = acc[i] * a + b;
  }
  float sum = 0;
  for (int i = 0; i < kChains; ++i) sum += acc[i][0] + acc[i][1] + acc[i][2] + acc[i][3];
  return sum;
}

#ifdef EMBER_FMA_PEAK_X86
__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  for (int64_t n = 0; n < iters; ++n) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  for (int i = 1; i < kChains; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc[0]);
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

// (_mm512_reduce_add_ps trips GCC 12's -Wuninitialized inside its own header.)
__attribute__((target("avx512f"))) inline float lane_sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0;
  for (float x : lanes) sum += x;
  return sum;
}

__attribute__((target("avx512f"))) float fma_avx512(int64_t iters) {
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  for (int64_t n = 0; n < iters; ++n) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  for (int i = 1; i < kChains; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  return lane_sum(acc[0]);
}

// vdpbf16ps: lane j += a[2j] * b[2j] + a[2j+1] * b[2j+1] (32 bf16 pairs, 64 FLOP).
__attribute__((target("avx512f,avx512bf16"))) float dot_bf16_avx512(int64_t iters) {
  const __m512 small = _mm512_set1_ps(1e-3f);
  const __m512bh a = _mm512_cvtne2ps_pbh(small, small), b = a;
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  for (int64_t n = 0; n < iters; ++n) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  for (int i = 1; i < kChains; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  return lane_sum(acc[0]);
}
#endif

struct Kernel {
  float (*run)(int64_t iters) = nullptr;
  double flops_per_iter = 0;  // per thread: kChains instructions x FLOP per instruction
  Isa isa = Isa::Generic;
};

// The widest kernel the CPU runs and EMBER_MAX_ISA allows; no kernel (run null) for bf16 without AVX512-BF16.
Kernel pick_kernel(DType dtype) {
  EMBER_CHECK(dtype == DType::Float32 || dtype == DType::BFloat16,
              "fma_round_flops: float32 or bfloat16, got ", dtype_name(dtype));
#ifdef EMBER_FMA_PEAK_X86
  if (dtype == DType::BFloat16) {
    return isa_available(Isa::Avx512Bf16) ? Kernel{dot_bf16_avx512, kChains * 64.0, Isa::Avx512Bf16} : Kernel{};
  }
  if (isa_available(Isa::Avx512)) return {fma_avx512, kChains * 16 * 2.0, Isa::Avx512};
  if (isa_available(Isa::Avx2)) return {fma_avx2, kChains * 8 * 2.0, Isa::Avx2};
#else
  if (dtype == DType::BFloat16) return {};
#endif
  return {mul_add_generic, kChains * 4 * 2.0, Isa::Generic};
}

volatile float g_sink;  // where the folded accumulators go, so the loops stay

// One round: every OpenMP thread runs the kernel in chunks until round_seconds
// have passed, so a round lasts as long whatever the speed (no calibration
// that a busy moment could spoil), and counts the chunks each thread finished.
// Returns FLOP/s of the team.
double timed_round(const Kernel& k, double round_seconds) {
  using Clock = std::chrono::steady_clock;
  constexpr int64_t kChunk = 1 << 14;  // ~30 us of AVX-512 FMAs: reading the clock costs nothing by comparison
  float total = 0;
  int64_t chunks = 0;
  const auto t0 = Clock::now();
#pragma omp parallel reduction(+ : total, chunks)
  {
    do {
      total += k.run(kChunk);
      ++chunks;
    } while (std::chrono::duration<double>(Clock::now() - t0).count() < round_seconds);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  g_sink = total;
  return k.flops_per_iter * static_cast<double>(kChunk * chunks) / seconds;
}

}  // namespace

const char* fma_peak_isa(DType dtype) {
  const Kernel k = pick_kernel(dtype);
  return k.run ? isa_name(k.isa) : "";
}

double fma_round_flops(DType dtype, double round_seconds) {
  EMBER_CHECK(round_seconds > 0, "fma_round_flops: round_seconds must be positive");
  const Kernel k = pick_kernel(dtype);
  return k.run ? timed_round(k, round_seconds) : 0;
}

}  // namespace ember::apps
