// Prints how many of each multiply-add instruction the decode kernels could use one core
// retires per second (billions/s) and the multiply-adds that makes: the ceiling of a product
// that is bound by arithmetic (many streams at once), not by reading its weights. Each rate is
// 12 independent register chains of one instruction (enough to hide its latency), the best of
// 3 rounds of 5e7 iterations on one thread; an instruction the CPU lacks is skipped.
//   float32 FMA (vfmadd, 512 bits): 16 multiply-adds; int8 vpdpbusd: 64 (512 bits) or 32 (256);
//   bfloat16 vdpbf16ps (512 bits): 32; AMX tdpbssd at the int8 kernel's tile shape (16 rows x
//   8 outputs x a block of 32, core/kernels/matmul_q8.cpp): 4096, in 4 independent tiles.
#include <immintrin.h>

#include <algorithm>
#include <cstdio>

#include "apps/common/stopwatch.h"
#include "core/kernels/amx.h"

namespace {

constexpr int kChains = 12;
constexpr long kIterations = 50'000'000;

// best = billions of STEP (of the chain's value c) per second over kChains chains of type V,
// chain j starting at INIT (of j: distinct chains, which the compiler cannot merge): a macro,
// so that it compiles under the target of the function using it.
#define RATE(best, V, INIT, STEP)                                              \
  do {                                                                         \
    for (int round = 0; round < 3; ++round) {                                  \
      V chain[kChains];                                                        \
      for (int j = 0; j < kChains; ++j) chain[j] = (INIT);                      \
      const ember::apps::Stopwatch watch;                                      \
      for (long i = 0; i < kIterations; ++i) {                                 \
        _Pragma("GCC unroll 12") for (int j = 0; j < kChains; ++j) {           \
          const V c = chain[j];                                                \
          chain[j] = (STEP);                                                   \
        }                                                                      \
      }                                                                        \
      const double seconds = watch.seconds();                                  \
      V sum = chain[0];                                                        \
      for (int j = 1; j < kChains; ++j) sum = sum + chain[j];                  \
      volatile V sink = sum; /* the chains' results are used */                \
      (void)sink;                                                              \
      best = std::max(best, kIterations * kChains / seconds / 1e9);            \
    }                                                                          \
  } while (0)

void report(const char* name, double per_s, int macs) {
  std::printf("%-26s %6.2f G/s  %7.1f G multiply-adds/s\n", name, per_s, per_s * macs);
}

[[gnu::target("avx512f")]] void fma512() {
  const __m512 b = _mm512_set1_ps(0.5f);  // c -> c / 2 + 1 / 2: stays finite
  double best = 0;
  RATE(best, __m512, _mm512_set1_ps(1.0f + 0.001f * j), _mm512_fmadd_ps(c, b, b));
  report("vfmadd231ps zmm (float32)", best, 16);
}

[[gnu::target("avx512vnni,avx512f")]] void vnni512() {
  const __m512i b = _mm512_set1_epi32(3), d = _mm512_set1_epi32(5);
  double best = 0;
  RATE(best, __m512i, _mm512_set1_epi32(j), _mm512_dpbusd_epi32(c, b, d));
  report("vpdpbusd zmm (int8)", best, 64);
}

[[gnu::target("avx512vnni,avx512vl,avx512f")]] void vnni256() {
  const __m256i b = _mm256_set1_epi32(3), d = _mm256_set1_epi32(5);
  double best = 0;
  RATE(best, __m256i, _mm256_set1_epi32(j), _mm256_dpbusd_epi32(c, b, d));
  report("vpdpbusd ymm (int8)", best, 32);
}

[[gnu::target("avx512bf16,avx512f")]] void bf16_512() {
  const __m512bh b = (__m512bh)_mm512_set1_epi32(0x3f803f80);  // pairs of bf16 1.0: c -> c + 2
  double best = 0;
  RATE(best, __m512, _mm512_set1_ps(1.0f + 0.001f * j), _mm512_dpbf16_ps(c, b, b));
  report("vdpbf16ps zmm (bfloat16)", best, 32);
}

[[gnu::target("amx-tile,amx-int8")]] void amx_int8() {
  ember::kernels::amx::TileConfig config;  // A 16 x 32, B 8 x 32, C 16 x 32 bytes
  for (int t : {0, 3, 4, 5, 6}) {
    config.rows[t] = 16;
    config.colsb[t] = 32;
  }
  config.rows[1] = 8;
  config.colsb[1] = 32;
  alignas(64) static int8_t a[16 * 32], b[8 * 32];
  ember::kernels::amx::load_config(config);
  _tile_loadd(0, a, 32);
  _tile_loadd(1, b, 32);
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    const ember::apps::Stopwatch watch;
    for (long i = 0; i < kIterations / 4; ++i) {
      _tile_dpbssd(3, 0, 1);
      _tile_dpbssd(4, 0, 1);
      _tile_dpbssd(5, 0, 1);
      _tile_dpbssd(6, 0, 1);
    }
    best = std::max(best, kIterations / watch.seconds() / 1e9);
  }
  _tile_release();
  report("tdpbssd 16x8x32 (int8)", best, 16 * 8 * 32);
}

}  // namespace

int main() {
  __builtin_cpu_init();
  std::printf("one core, %d chains, best of 3\n", kChains);
  if (__builtin_cpu_supports("avx512f")) fma512();
  if (__builtin_cpu_supports("avx512vnni")) {
    vnni512();
    if (__builtin_cpu_supports("avx512vl")) vnni256();
  }
  if (__builtin_cpu_supports("avx512bf16")) bf16_512();
  if (__builtin_cpu_supports("amx-int8") && ember::kernels::amx::granted()) amx_int8();
  return 0;
}
