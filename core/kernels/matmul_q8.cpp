// matmul_q8 (core/kernels/matmul_q8.h): the activations quantized once per call, then the
// columns split over threads, each running the code path the CPU has (EMBER_MAX_ISA caps it):
// AVX-512 VNNI or AVX-VNNI (vpdpbusd on |w| and sign(w) x, llama.cpp's sign transfer: Q8_0
// values lie in [-127, 127], so |w| fits a byte and sign(w) x cannot overflow), AVX2 (vpmaddubsw
// then vpmaddwd: a pair of products is at most 2 * 127 * 127 < 2^15, no saturation), or the
// generic loop. Every path's lane sums are the same exact integers.
#include "core/kernels/matmul_q8.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/kernels/cpu_isa.h"

namespace ember::kernels {
namespace {

constexpr int64_t kChunk = 64;  // rows of x per chunk

struct Job {
  const int8_t* qx;  // M rows of 32 nb values
  const float* dx;   // M rows of nb scales
  int64_t nb;
  const quant::BlockQ8_0* w;
  const float* bias;
  float* y;
  int64_t ldy;
};

// y = acc[0] + ... + acc[7] (left to right) (+ bias[n]).
inline float finish(const float* acc, const float* bias, int64_t n) {
  float s = acc[0];
  for (int j = 1; j < 8; ++j) s += acc[j];
  return bias ? s + bias[n] : s;
}

void run_generic(const Job& job, int64_t M, int64_t n0, int64_t n1) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = n0; n < n1; ++n) {
      float acc[8] = {};
      for (int64_t b = 0; b < job.nb; ++b) {
        const quant::BlockQ8_0& blk = job.w[n * job.nb + b];
        const int8_t* xq = job.qx + (m * job.nb + b) * 32;
        const float d = job.dx[m * job.nb + b] * quant::fp16_value(blk.d);
        for (int j = 0; j < 8; ++j) {
          int32_t s = 0;
          for (int t = 0; t < 4; ++t) s += int32_t{xq[4 * j + t]} * int32_t{blk.qs[4 * j + t]};
          acc[j] = std::fma(d, static_cast<float>(s), acc[j]);
        }
      }
      job.y[m * job.ldy + n] = finish(acc, job.bias, n);
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
#define EMBER_Q8_X86 1
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace avx2 {
#define Q8_DOT(a, b) _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1))
#include "core/kernels/matmul_q8_tile.inc"
#undef Q8_DOT
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avxvnni,avx2,fma,f16c")
namespace avx_vnni {
#define Q8_DOT(a, b) _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), a, b)
#include "core/kernels/matmul_q8_tile.inc"
#undef Q8_DOT
}  // namespace avx_vnni
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512vnni,avx512vl,avx512bw,avx512f,avx2,fma,f16c")
namespace avx512_vnni {
#define Q8_DOT(a, b) _mm256_dpbusd_epi32(_mm256_setzero_si256(), a, b)
#include "core/kernels/matmul_q8_tile.inc"
#undef Q8_DOT
}  // namespace avx512_vnni
#pragma GCC pop_options
#endif

enum class Path { Generic, Avx2, AvxVnni, Avx512Vnni };

Path pick_path() {
#ifdef EMBER_Q8_X86
  __builtin_cpu_init();
  if (isa_available(Isa::Avx512) && __builtin_cpu_supports("avx512vnni") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw")) {
    return Path::Avx512Vnni;
  }
  if (isa_available(Isa::Avx2) && __builtin_cpu_supports("f16c")) {
    return __builtin_cpu_supports("avxvnni") ? Path::AvxVnni : Path::Avx2;
  }
#endif
  return Path::Generic;
}

void run_path(Path path, const Job& job, int64_t M, int64_t n0, int64_t n1) {
  switch (path) {
#ifdef EMBER_Q8_X86
    case Path::Avx512Vnni: return avx512_vnni::run(job, M, n0, n1, 4);
    case Path::AvxVnni: return avx_vnni::run(job, M, n0, n1, 2);
    case Path::Avx2: return avx2::run(job, M, n0, n1, 2);
#endif
    default: return run_generic(job, M, n0, n1);
  }
}

}  // namespace

void quantize_activations_q8(const float* x, int64_t K, int8_t* q, float* d) {
  const int64_t nb = q8_blocks(K);
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t k0 = b * 32, n = std::min<int64_t>(32, K - k0);
    float amax = 0.0f;
    for (int64_t t = 0; t < n; ++t) amax = std::fmax(amax, std::fabs(x[k0 + t]));
    d[b] = amax / 127.0f;
    const float id = d[b] != 0.0f ? 1.0f / d[b] : 0.0f;
    for (int64_t t = 0; t < 32; ++t) {
      q[k0 + t] = t < n ? static_cast<int8_t>(std::roundf(x[k0 + t] * id)) : int8_t{0};
    }
  }
}

void quantize_weights_q8(const float* w, int64_t N, int64_t K, quant::BlockQ8_0* out) {
  const int64_t nb = q8_blocks(K);
  std::vector<float> row(static_cast<size_t>(nb * 32), 0.0f);  // zeros past K
  for (int64_t n = 0; n < N; ++n) {
    std::memcpy(row.data(), w + n * K, static_cast<size_t>(K) * sizeof(float));
    quant::quantize_row_q8_0(row.data(), out + n * nb, nb * 32);
  }
}

namespace {

const char* path_name(Path path) {
  switch (path) {
    case Path::Avx512Vnni: return "avx512_vnni";
    case Path::AvxVnni: return "avx_vnni";
    case Path::Avx2: return "avx2";
    default: return "generic";
  }
}

void matmul_q8_path(Path path, int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx,
                    const quant::BlockQ8_0* w, const float* bias, float* y, int64_t ldy) {
  if (M <= 0 || N <= 0) return;
  const int64_t nb = q8_blocks(K);
  thread_local std::vector<int8_t> qx;
  thread_local std::vector<float> dx;
  if (static_cast<int64_t>(qx.size()) < M * nb * 32) qx.resize(static_cast<size_t>(M * nb * 32));
  if (static_cast<int64_t>(dx.size()) < M * nb) dx.resize(static_cast<size_t>(M * nb));
  for (int64_t m = 0; m < M; ++m) quantize_activations_q8(x + m * ldx, K, qx.data() + m * nb * 32, dx.data() + m * nb);
  const Job job{qx.data(), dx.data(), nb, w, bias, y, ldy};
  const bool parallel = N * K * std::min<int64_t>(M, 8) >= (int64_t{1} << 18) && !omp_in_parallel();
#pragma omp parallel if (parallel)
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    run_path(path, job, M, N * t / threads, N * (t + 1) / threads);
  }
}

}  // namespace

void matmul_q8(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx,
               const quant::BlockQ8_0* w, const float* bias, float* y, int64_t ldy) {
  matmul_q8_path(pick_path(), M, N, K, x, ldx, w, bias, y, ldy);
}

const char* matmul_q8_path() { return path_name(pick_path()); }

void matmul_q8_on(const char* path, int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx,
                  const quant::BlockQ8_0* w, const float* bias, float* y, int64_t ldy) {
  const std::string name = path;
  bool runs = name == "generic";
#ifdef EMBER_Q8_X86
  __builtin_cpu_init();
  const bool v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  if (name == "avx2") runs = v;
  if (name == "avx_vnni") runs = v && __builtin_cpu_supports("avxvnni");
  if (name == "avx512_vnni") {
    runs = v && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw");
  }
#endif
  EMBER_CHECK(runs, "matmul_q8: this CPU cannot run the ", name, " path");
  for (Path p : {Path::Generic, Path::Avx2, Path::AvxVnni, Path::Avx512Vnni}) {
    if (name == path_name(p)) return matmul_q8_path(p, M, N, K, x, ldx, w, bias, y, ldy);
  }
}

}  // namespace ember::kernels
