// matmul_bf16_tiles (kernels/matmul_bf16_tiles.h): the activations rounded to bfloat16 once
// per call (more than a tile's rows shared out among the threads), then the output tiles split
// over threads.
// Five output tiles share each 16-row tile of x: per step of 32 k, one load of x and five of
// W, five tdpbf16ps. Tile registers (GCC's intrinsics take their numbers as written): tmm0..tmm4
// C (five output tiles), tmm5 A (x), tmm6 and tmm7 B (W, alternating so a load overlaps the
// product before it).
#include "core/kernels/matmul_bf16_tiles.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/kernels/amx.h"
#include "core/kernels/bf16.h"
#include "core/kernels/cpu_isa.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define EMBER_BF16_TILES_X86 1
#endif

namespace ember::kernels {
namespace {

constexpr int64_t kOut = 16;          // outputs of a tile
constexpr int64_t kStep = 32;         // k of a tile step
constexpr int64_t kTile = kOut * kStep;  // bfloat16 values of a W tile (1 KiB)
constexpr int64_t kRows = 16;         // rows of x a tile holds
constexpr int64_t kGroup = 5;         // output tiles sharing a tile of x
constexpr int64_t kChunkRows = 256;   // rows of x whose tiles reuse a group's W from L2
constexpr int64_t kAhead = 2;         // steps of W prefetched into L1 ahead of the tile loads

enum : int { kA = 5, kB0 = 6, kB1 = 7 };

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

struct Job {
  const uint16_t* xb;  // M rows of K32 bfloat16 values (zeros past K)
  int64_t steps;       // K32 / 32
  const uint16_t* w;   // the tiles
  const float* bias;
  float* y;
  int64_t ldy;
};

#ifdef EMBER_BF16_TILES_X86
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16,avx512bf16,avx512f")

void configure(int64_t rows) {
  amx::TileConfig c;
  for (int t = 0; t <= kA; ++t) {  // C0..C4 and A: rows x 16 floats / 32 bfloat16
    c.rows[t] = static_cast<uint8_t>(rows);
    c.colsb[t] = 64;
  }
  for (int t : {kB0, kB1}) {  // B: 16 pairs of k x 16 outputs
    c.rows[t] = 16;
    c.colsb[t] = 64;
  }
  amx::load_config(c);
}

// Output tiles ts[0..NT) for the rows [m, m + configured rows) of x: out[j * 256 + 16 i + c]
// = output 16 ts[j] + c of row m + i, before the bias.
template <int NT>
void group(const Job& job, int64_t m, const int64_t* ts, float* out) {
  const uint16_t* w[NT];
  for (int j = 0; j < NT; ++j) w[j] = job.w + ts[j] * job.steps * kTile;
  const uint16_t* x = job.xb + m * job.steps * kStep;
  const int64_t ldx = job.steps * kStep * 2;  // bytes from one row of x to the next
// Output tile J in C register J, its W in B register B, x in A register 5 (kA, kB0 and kB1 as
// literals: GCC's intrinsics put the numbers into the instruction's text).
#define EMBER_EACH_TILE(STEP) STEP(0, 6) STEP(1, 7) STEP(2, 6) STEP(3, 7) STEP(4, 6)
#define EMBER_ZERO(J, B) \
  if constexpr (NT > J) _tile_zero(J);
#define EMBER_PRODUCT(J, B)                   \
  if constexpr (NT > J) {                     \
    _tile_loadd(B, w[J] + b * kTile, 64);     \
    _tile_dpbf16ps(J, 5, B);                  \
  }
#define EMBER_STORE(J, B) \
  if constexpr (NT > J) _tile_stored(J, out + J * 256, 64);
  EMBER_EACH_TILE(EMBER_ZERO)
  for (int64_t b = 0; b < job.steps; ++b) {
    // Tile loads do not run ahead as vector loads do: W kAhead steps on into L1 meanwhile (a
    // prefetch past the end never faults).
    for (int j = 0; j < NT; ++j) {
      const char* p = reinterpret_cast<const char*>(w[j] + (b + kAhead) * kTile);
      for (int l = 0; l < 16; ++l) _mm_prefetch(p + 64 * l, _MM_HINT_T0);
    }
    _tile_loadd(5, x + b * kStep, ldx);
    EMBER_EACH_TILE(EMBER_PRODUCT)
  }
  EMBER_EACH_TILE(EMBER_STORE)
#undef EMBER_STORE
#undef EMBER_PRODUCT
#undef EMBER_ZERO
#undef EMBER_EACH_TILE
}

// Rows of x [0, M) against output tiles [t0, t1), stored where the output lies in [n0, n1).
// A group takes its kGroup tiles from the kGroup parts of the range (t0 + i + j q), so W streams
// from that many places at once (one sequential stream alone does not reach a core's bandwidth
// from memory); the tiles left over after, adjacent.
void run(const Job& job, int64_t M, int64_t t0, int64_t t1, int64_t n0, int64_t n1) {
  alignas(64) float out[kGroup * 256];
  const int64_t q = (t1 - t0) / kGroup, groups = q + ((t1 - t0) % kGroup > 0);
  int64_t configured = 0;
  for (int64_t m0 = 0; m0 < M; m0 += kChunkRows) {
    const int64_t m1 = std::min(M, m0 + kChunkRows);
    for (int64_t g = 0; g < groups; ++g) {
      int64_t ts[kGroup], nt = 0;
      if (g < q) {
        for (int64_t j = 0; j < kGroup; ++j) ts[nt++] = t0 + g + j * q;
      } else {
        for (int64_t t = t0 + kGroup * q; t < t1; ++t) ts[nt++] = t;
      }
      for (int64_t m = m0; m < m1; m += kRows) {
        const int64_t mr = std::min(kRows, m1 - m);
        if (mr != configured) {
          configure(mr);
          configured = mr;
        }
        switch (nt) {
          case 5: group<5>(job, m, ts, out); break;
          case 4: group<4>(job, m, ts, out); break;
          case 3: group<3>(job, m, ts, out); break;
          case 2: group<2>(job, m, ts, out); break;
          default: group<1>(job, m, ts, out); break;
        }
        for (int64_t j = 0; j < nt; ++j) {
          const int64_t a = std::max(n0, ts[j] * kOut), e = std::min(n1, (ts[j] + 1) * kOut);
          for (int64_t i = 0; i < mr; ++i) {
            const float* o = out + j * 256 + i * kOut;  // o[c]: output 16 ts[j] + c
            float* yr = job.y + (m + i) * job.ldy;
            for (int64_t n = a; n < e; ++n) yr[n] = job.bias ? o[n - ts[j] * kOut] + job.bias[n] : o[n - ts[j] * kOut];
          }
        }
      }
    }
  }
  _tile_release();
}

#pragma GCC pop_options
#endif

// The CPU has the instructions and Linux granted the tile state (EMBER_MAX_ISA aside).
bool cpu_runs_tiles() {
#ifdef EMBER_BF16_TILES_X86
  __builtin_cpu_init();
  static const bool cpu = __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16") &&
                          __builtin_cpu_supports("avx512bf16") && amx::granted();
  return cpu;
#else
  return false;
#endif
}
}  // namespace

bool bf16_tiles_available() { return cpu_runs_tiles() && isa_available(Isa::Avx512Bf16); }

int64_t bf16_tiles_size(int64_t N, int64_t K) { return round_up(N, kOut) * round_up(K, kStep); }

void pack_tiles_bf16(const float* w, int64_t N, int64_t K, uint16_t* tiles) {
  const int64_t steps = round_up(K, kStep) / kStep;
  std::memset(tiles, 0, static_cast<size_t>(bf16_tiles_size(N, K)) * sizeof(uint16_t));
  for (int64_t n = 0; n < N; ++n) {
    uint16_t* tile_row = tiles + (n / kOut) * steps * kTile + 2 * (n % kOut);
    for (int64_t k = 0; k < K; ++k) {
      tile_row[(k / kStep) * kTile + 32 * (k % kStep / 2) + k % 2] = bfloat16_bits(w[n * K + k]);
    }
  }
}

void unpack_row_tiles_bf16(const uint16_t* tiles, int64_t K, int64_t n, float* out) {
  const int64_t steps = round_up(K, kStep) / kStep;
  const uint16_t* tile_row = tiles + (n / kOut) * steps * kTile + 2 * (n % kOut);
  for (int64_t k = 0; k < K; ++k) {
    out[k] = bfloat16_value(tile_row[(k / kStep) * kTile + 32 * (k % kStep / 2) + k % 2]);
  }
}

void matmul_bf16_tiles(int64_t M, int64_t K, const float* x, int64_t ldx, const uint16_t* tiles,
                       const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1) {
  if (M <= 0 || n1 <= n0) return;
  // The tiles were packed where the CPU runs them; EMBER_MAX_ISA counts only at packing (a later
  // change of it must not stop weights already in tiles, which no other path reads).
  EMBER_CHECK(cpu_runs_tiles(), "matmul_bf16_tiles: this CPU does not run AMX-BF16 tiles");
#ifdef EMBER_BF16_TILES_X86
  const int64_t K32 = round_up(K, kStep);
  thread_local std::vector<uint16_t> xb;
  if (static_cast<int64_t>(xb.size()) < M * K32) xb.resize(static_cast<size_t>(M * K32));
  uint16_t* xr = xb.data();
  const Job job{xr, K32 / kStep, tiles, bias, y, ldy};
  const int64_t t0 = n0 / kOut, t1 = round_up(n1, kOut) / kOut;
  const auto round_rows = [&](int64_t m) {
    const float* xm = x + m * ldx;
    uint16_t* out = xr + m * K32;
    for (int64_t k = 0; k < K; ++k) out[k] = bfloat16_bits(xm[k]);
    for (int64_t k = K; k < K32; ++k) out[k] = 0;
  };
  // A decode step's few rows are rounded before the threads start (a barrier after would cost
  // more than the rounding); many rows are shared out among the threads.
  const bool share = M > kRows;
  if (!share) {
    for (int64_t m = 0; m < M; ++m) round_rows(m);
  }
  const bool parallel = (n1 - n0) * K * std::min<int64_t>(M, 8) >= (int64_t{1} << 18) && !omp_in_parallel();
#pragma omp parallel if (parallel)
  {
    if (share) {
#pragma omp for schedule(static)
      for (int64_t m = 0; m < M; ++m) round_rows(m);
    }
    // Threads take contiguous ranges of whole output tiles for every row.
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t a = t0 + (t1 - t0) * t / threads, b = t0 + (t1 - t0) * (t + 1) / threads;
    if (a < b) run(job, M, a, b, n0, n1);
  }
#else
  (void)K, (void)x, (void)ldx, (void)tiles, (void)bias, (void)y, (void)ldy;
#endif
}

}  // namespace ember::kernels
