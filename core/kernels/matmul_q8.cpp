// matmul_q8 (core/kernels/matmul_q8.h): the activations quantized once per call (the rows
// shared out among the threads), then the groups of 8 outputs split over threads, each running
// the code path the CPU has (EMBER_MAX_ISA caps it): AMX tiles for two rows or more (tdpbssd:
// signed x signed, no offset), AVX-512 VNNI or AVX-VNNI (vpdpbusd of the activations + 128, as
// unsigned bytes, and the weights, less 128 sum(w): exact, Q8_0 values lie in [-127, 127];
// AVX-512 takes two groups a 512-bit register when many rows share them), AVX2 (llama.cpp's
// sign transfer: vpmaddubsw of |w| and sign(w) x, then vpmaddwd; a pair of products is at most
// 2 * 127 * 127 < 2^15, so nothing saturates), or the generic loop. Every path's block sums are the same exact integers
// and the float steps are the same, so all give the same bits.
#include "core/kernels/matmul_q8.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/kernels/amx.h"
#include "core/kernels/cpu_isa.h"

namespace ember::kernels {
namespace {

constexpr int64_t kChunk = 64;  // rows of x per chunk

struct Job {
  const int8_t* qx;   // M rows of 32 nb values
  const uint8_t* xu;  // the same + 128 (the VNNI paths only read it)
  const float* dx;    // M rows of nb scales
  int64_t nb;
  const BlockQ8x8* w;
  const float* bias;
  float* y;
  int64_t ldy;
};

// out[i * 8 + r] (rows m .. m + mr of x, outputs 8g + r) into y where 8g + r lies in [n0, n1).
void store(const Job& job, int64_t m, int64_t mr, int64_t g, int64_t n0, int64_t n1, const float* out) {
  const int64_t a = std::max(n0, 8 * g), b = std::min(n1, 8 * g + 8);
  for (int64_t i = 0; i < mr; ++i) {
    const float* o = out + i * 8;  // o[r]: output 8g + r
    float* yr = job.y + (m + i) * job.ldy;
    if (job.bias) {
      for (int64_t n = a; n < b; ++n) yr[n] = o[n - 8 * g] + job.bias[n];
    } else {
      for (int64_t n = a; n < b; ++n) yr[n] = o[n - 8 * g];
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
// One block of weights (288 bytes: its lines, the next block's first line at most) into L2
// (or into L1 with hint _MM_HINT_T0). A prefetch past the weights' end never faults.
template <_mm_hint kHint = _MM_HINT_T1>
[[gnu::always_inline]] inline void fetch_block(const BlockQ8x8* blk) {
  const char* p = reinterpret_cast<const char*>(blk);
  for (int l = 0; l < 5; ++l) _mm_prefetch(p + 64 * l, kHint);
}
#endif

void run_generic(const Job& job, int64_t M, int64_t n0, int64_t n1) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = n0; n < n1; ++n) {
      const int64_t g = n / 8, r = n % 8;
      float acc = 0;
      for (int64_t b = 0; b < job.nb; ++b) {
        const BlockQ8x8& blk = job.w[g * job.nb + b];
        const int8_t* xq = job.qx + (m * job.nb + b) * 32;
        int32_t s = 0;
        for (int t = 0; t < 8; ++t) {
          for (int i = 0; i < 4; ++i) s += int32_t{xq[4 * t + i]} * int32_t{blk.qs[32 * t + 4 * r + i]};
        }
        const float d = job.dx[m * job.nb + b] * quant::fp16_value(blk.d[r]);
        acc = std::fma(d, static_cast<float>(s), acc);
      }
      job.y[m * job.ldy + n] = job.bias ? acc + job.bias[n] : acc;
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
#define EMBER_Q8_X86 1
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace avx2 {
#define Q8_XSRC(job) (job).qx
#define Q8_ABS(w) _mm256_sign_epi8(w, w)
#define Q8_DOT(acc, x, w, aw) \
  _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, w)), _mm256_set1_epi16(1)))
#define Q8_CORR(blk) _mm256_setzero_si256()
#include "core/kernels/matmul_q8_tile.inc"
#undef Q8_XSRC
#undef Q8_ABS
#undef Q8_DOT
#undef Q8_CORR
}  // namespace avx2
#pragma GCC pop_options

// 128 sum(w) per row of a block, what the unsigned activations' offset adds.
#define Q8_VNNI_CORR(blk) \
  _mm256_slli_epi32(_mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>((blk).sum))), 7)

#pragma GCC push_options
#pragma GCC target("avxvnni,avx2,fma,f16c")
namespace avx_vnni {
#define Q8_XSRC(job) (job).xu
#define Q8_ABS(w) (w)
#define Q8_DOT(acc, x, w, aw) _mm256_dpbusd_avx_epi32(acc, x, w)
#define Q8_CORR(blk) Q8_VNNI_CORR(blk)
#include "core/kernels/matmul_q8_tile.inc"
#undef Q8_DOT
}  // namespace avx_vnni
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512vnni,avx512vl,avx512bw,avx512f,avx2,fma,f16c")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12: as in the quantizer below
namespace avx512_vnni {
#define Q8_DOT(acc, x, w, aw) _mm256_dpbusd_epi32(acc, x, w)

// Shared by the pair tiles (this one, and AMX's below): the blocks of groups g and g + 1 after
// these (next: group g + 2's first), fetched into L2; the 16 scales of block b, group g's in
// the low half; and the outputs of rows i < mr as out[(s * mr + i) * 8 + r].
[[gnu::always_inline]] inline void fetch_pair(const BlockQ8x8* next, int64_t nb, int64_t b) {
  if (!next) return;
  fetch_block(next + b);
  fetch_block(next + nb + b);
}
[[gnu::always_inline]] inline __m512 pair_scales(const BlockQ8x8& lo, const BlockQ8x8& hi) {
  return _mm512_cvtph_ps(_mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo.d))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi.d)), 1));
}
[[gnu::always_inline]] inline void store_pair(const __m512* acc, int64_t mr, float* out) {
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    if (i >= mr) break;
    _mm256_storeu_ps(out + 8 * i, _mm512_castps512_ps256(acc[i]));
    _mm256_storeu_ps(out + 8 * (mr + i), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[i]), 1)));
  }
}
// Or, a pair whose 16 outputs 8g.. all lie in the range, straight into y's rows m.. (the bias
// added as store() adds it), not copied through out by store() one float at a time
// (gpt2-small's int8 decode at sixteen streams on AMX: 16.8 -> 16.3 ms a step, medians of
// seven interleaved runs).
[[gnu::always_inline]] inline void store_pair_direct(const Job& job, const __m512* acc, int64_t m, int64_t mr,
                                                     int64_t g) {
  const float* bias = job.bias ? job.bias + 8 * g : nullptr;
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    if (i >= mr) break;
    _mm512_storeu_ps(job.y + (m + i) * job.ldy + 8 * g, bias ? _mm512_add_ps(acc[i], _mm512_loadu_ps(bias)) : acc[i]);
  }
}

// Rows [m, m + MR) of x against groups g and g + 1 in 512-bit registers (group g in the low
// half, g + 1 in the high): out[(s * MR + i) * 8 + r] for row m + i, output 8 (g + s) + r (out
// null: store_pair_direct).
// Each lane runs tile()'s operations for its output (the block's exact int32 sum, less
// 128 sum(w), then d = dx * dw and one FMA), so the bits are tile()'s; one vpdpbusd serves 16
// outputs. next (or null): the two groups after, fetched into L2 meanwhile.
template <int MR>
[[gnu::always_inline]] inline void pair_tile(const Job& job, int64_t m, int64_t g, float* out,
                                             const BlockQ8x8* next) {
  const BlockQ8x8* w0 = job.w + g * job.nb;
  const BlockQ8x8* w1 = w0 + job.nb;
  __m512 acc[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < job.nb; ++b) {
    fetch_pair(next, job.nb, b);
    __m512i isum[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) isum[i] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      const __m512i w = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0[b].qs + 32 * t))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w1[b].qs + 32 * t)), 1);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        int32_t x4;
        std::memcpy(&x4, job.xu + ((m + i) * job.nb + b) * 32 + 4 * t, 4);
        isum[i] = _mm512_dpbusd_epi32(isum[i], _mm512_set1_epi32(x4), w);
      }
    }
    const __m512 dw = pair_scales(w0[b], w1[b]);
    const __m512i corr = _mm512_slli_epi32(
        _mm512_cvtepi16_epi32(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w0[b].sum))),
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(w1[b].sum)), 1)),
        7);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 d = _mm512_mul_ps(_mm512_set1_ps(job.dx[(m + i) * job.nb + b]), dw);
      acc[i] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(isum[i], corr)), acc[i]);
    }
  }
  if (out) return store_pair(acc, MR, out);
  store_pair_direct(job, acc, m, MR, g);
}
#define Q8_PAIR_TILE pair_tile
#include "core/kernels/matmul_q8_tile.inc"
#undef Q8_PAIR_TILE
#undef Q8_XSRC
#undef Q8_ABS
#undef Q8_DOT
#undef Q8_CORR
}  // namespace avx512_vnni
#pragma GCC diagnostic pop
#pragma GCC pop_options

// AMX (the tile unit of Intel's Sapphire Rapids and later): tdpbssd multiplies a tile of up to
// 16 rows x 32 signed activations (one block of each row of x) by a 32 x 8 tile of signed
// weights, which is one BlockQ8x8's qs as stored (tile row t = qs[32 t, 32 t + 32): 8 outputs x
// 4 inputs), into 16 x 8 exact int32 block sums: the sums every other path computes. The float
// steps after are pair_tile's (d = dx * dw, one FMA per block, in block order), so the bits
// are the same; AMX only takes the integer products off the vector units.
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-int8,avx512vnni,avx512vl,avx512bw,avx512f,avx2,fma,f16c")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12: as above
namespace amx_int8 {

constexpr int64_t kTileRows = 16, kAheadBlocks = 2;
// Tile registers (GCC's intrinsics take their numbers as written): tmm0 A (x), tmm1 and tmm2
// B (groups g and g + 1), tmm3 and tmm4 C (their sums).
enum : int { kA = 0, kB0 = 1, kB1 = 2, kC0 = 3, kC1 = 4 };

// The tile configuration: A rows x 32 bytes, B0/B1 8 x 32, C0/C1 rows x 32.
void configure(int64_t rows) {
  amx::TileConfig c;
  for (int t : {kA, kC0, kC1}) {
    c.rows[t] = static_cast<uint8_t>(rows);
    c.colsb[t] = 32;
  }
  for (int t : {kB0, kB1}) {
    c.rows[t] = 8;
    c.colsb[t] = 32;
  }
  amx::load_config(c);
}

// Rows [m, m + mr) of x (mr <= 16, the tiles configured for mr rows) against groups g and
// g + 1 (g alone when !two): out[(s * mr + i) * 8 + r], pair_tile's layout, or with out null
// (two groups) y's 16 outputs 8g.. of those rows, bias added. next (or null): the two groups
// after, fetched into L2 meanwhile.
void pair(const Job& job, int64_t m, int64_t mr, int64_t g, bool two, float* out, const BlockQ8x8* next) {
  const BlockQ8x8* w0 = job.w + g * job.nb;
  const BlockQ8x8* w1 = two ? w0 + job.nb : w0;  // alone: group g twice, the copy not stored
  alignas(64) int32_t sums[kTileRows * 16];       // row i: group g's 8 sums, then g + 1's
  __m512 acc[kTileRows];
#pragma GCC unroll 16
  for (int i = 0; i < kTileRows; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < job.nb; ++b) {
    avx512_vnni::fetch_pair(next, job.nb, b);
    // The tile loads do not run ahead as vector loads do: the blocks two on into L1 meanwhile.
    fetch_block<_MM_HINT_T0>(w0 + b + kAheadBlocks);
    fetch_block<_MM_HINT_T0>(w1 + b + kAheadBlocks);
    _tile_zero(3);
    _tile_zero(4);
    _tile_loadd(0, job.qx + (m * job.nb + b) * 32, job.nb * 32);
    _tile_loadd(1, w0[b].qs, 32);
    _tile_loadd(2, w1[b].qs, 32);
    _tile_dpbssd(3, 0, 1);
    _tile_dpbssd(4, 0, 2);
    _tile_stored(3, sums, 64);
    _tile_stored(4, sums + 8, 64);
    const __m512 dw = avx512_vnni::pair_scales(w0[b], w1[b]);
#pragma GCC unroll 16
    for (int i = 0; i < kTileRows; ++i) {
      if (i >= mr) break;
      const __m512 d = _mm512_mul_ps(_mm512_set1_ps(job.dx[(m + i) * job.nb + b]), dw);
      acc[i] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_load_si512(sums + 16 * i)), acc[i]);
    }
  }
  if (out) return avx512_vnni::store_pair(acc, mr, out);
  avx512_vnni::store_pair_direct(job, acc, m, mr, g);
}

// Rows [m0, m1) (whole tiles of kTileRows but the last) against every pair of groups of the
// range; the first tile of each pair brings the next pair into L2. A pair whose 16 outputs all
// lie in [n0, n1) goes straight into y (store_pair_direct).
void rows(const Job& job, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* tiles) {
  for (int64_t g = n0 / 8; g * 8 < n1; g += 2) {
    const bool two = (g + 1) * 8 < n1, direct = two && 8 * g >= n0 && 8 * g + 16 <= n1;
    const BlockQ8x8* next = (g + 2) * 8 < n1 ? job.w + (g + 2) * job.nb : nullptr;
    for (int64_t m = m0; m < m1; m += kTileRows) {
      const int64_t mr = std::min(kTileRows, m1 - m);
      pair(job, m, mr, g, two, direct ? nullptr : tiles, m == m0 ? next : nullptr);
      if (direct) continue;
      store(job, m, mr, g, n0, n1, tiles);
      if (two) store(job, m, mr, g + 1, n0, n1, tiles + mr * 8);
    }
  }
}

// One row alone takes the AVX-512 VNNI path (its weights stream from 4 places at once; the
// bits are the same); more rows: chunks of kChunk rows in whole tiles, the rows left over
// after, each height with its tile configuration.
void run(const Job& job, int64_t M, int64_t n0, int64_t n1) {
  if (M == 1) return avx512_vnni::run(job, M, n0, n1);
  float tiles[2 * kTileRows * 8];
  const int64_t whole = M - M % kTileRows;
  if (whole > 0) {
    configure(kTileRows);
    for (int64_t m0 = 0; m0 < whole; m0 += kChunk) rows(job, m0, std::min(whole, m0 + kChunk), n0, n1, tiles);
  }
  if (whole < M) {
    configure(M - whole);
    rows(job, whole, M, n0, n1, tiles);
  }
  _tile_release();
}

}  // namespace amx_int8
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

// The activation quantizer (matmul_q8.h), one block of 32 values at a time:
//   amax = max_t |x_t|, d = amax / 127, id = d != 0 ? 1 / d : 0, q_t = roundf(x_t * id)
// (fmax ignores a NaN; roundf rounds half away from zero). The vector paths take a block of
// 32 (a K tail padded with zeros: they change neither amax nor the zeros q holds there) and
// round as roundf does: t = trunc(v), then t + sign(v) where |v - t| >= 0.5, exact because
// v - trunc(v) is exact in float. Converting to int8 keeps the int32's low byte, as the
// scalar cast (cvttss2si) does, so the bytes match roundf's for every v.
void quantize_generic(const float* x, int64_t K, int8_t* q, float* d) {
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

// Full blocks through block(x, q, xu, d), the tail block padded with zeros. xu (when not null)
// gets q + 128 as unsigned bytes, what the VNNI paths multiply: q xor 0x80.
#define Q8_QUANTIZE_ROW(block)                                                                       \
  void quantize_row(const float* x, int64_t K, int8_t* q, uint8_t* xu, float* d) {                  \
    const int64_t full = K / 32;                                                                     \
    for (int64_t b = 0; b < full; ++b) block(x + 32 * b, q + 32 * b, xu ? xu + 32 * b : nullptr, d + b); \
    if (K % 32 == 0) return;                                                                         \
    float pad[32] = {};                                                                              \
    std::memcpy(pad, x + 32 * full, static_cast<size_t>(K % 32) * sizeof(float));                  \
    block(pad, q + 32 * full, xu ? xu + 32 * full : nullptr, d + full);                             \
  }

#ifdef EMBER_Q8_X86
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2_quantize {
// 8 values rounded half away from zero, as int32.
[[gnu::always_inline]] inline __m256i round_away(__m256 v) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 up = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f));  // copysign(1, v)
  return _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, one)));
}

// The low bytes of 4 x 8 int32, in order: masked to a byte, the packs cannot saturate; they
// interleave the 128-bit lanes, which the final permute undoes.
[[gnu::always_inline]] inline __m256i low_bytes(const __m256i* v) {
  const __m256i byte = _mm256_set1_epi32(0xff);
  const __m256i ab = _mm256_packus_epi32(_mm256_and_si256(v[0], byte), _mm256_and_si256(v[1], byte));
  const __m256i cd = _mm256_packus_epi32(_mm256_and_si256(v[2], byte), _mm256_and_si256(v[3], byte));
  return _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

void block(const float* x, int8_t* q, uint8_t* xu, float* d) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4], a = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    a = _mm256_max_ps(_mm256_andnot_ps(sign, v[i]), a);  // a NaN lane keeps a (the second operand)
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  *d = _mm_cvtss_f32(m) / 127.0f;
  const __m256 id = _mm256_set1_ps(*d != 0.0f ? 1.0f / *d : 0.0f);
  __m256i r[4];
  for (int i = 0; i < 4; ++i) r[i] = round_away(_mm256_mul_ps(v[i], id));
  const __m256i bytes = low_bytes(r);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), bytes);
  if (xu) _mm256_storeu_si256(reinterpret_cast<__m256i*>(xu), _mm256_xor_si256(bytes, _mm256_set1_epi8(-128)));
}
Q8_QUANTIZE_ROW(block)
}  // namespace avx2_quantize
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_ps() through their masked builtins, which
// -Wmaybe-uninitialized takes for a read of an uninitialized value (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace avx512_quantize {
// 16 values rounded half away from zero, their int32's low bytes (vpmovdb truncates).
[[gnu::always_inline]] inline __m128i round_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512i one = _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)),
                                      _mm512_set1_epi32(0x3f800000));  // copysign(1, v)
  return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, _mm512_castsi512_ps(one))));
}

void block(const float* x, int8_t* q, uint8_t* xu, float* d) {
  const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
  // A NaN lane keeps the second operand, as fmax ignores a NaN.
  const __m512 a = _mm512_max_ps(_mm512_abs_ps(x1), _mm512_max_ps(_mm512_abs_ps(x0), _mm512_setzero_ps()));
  *d = _mm512_reduce_max_ps(a) / 127.0f;
  const __m512 id = _mm512_set1_ps(*d != 0.0f ? 1.0f / *d : 0.0f);
  const __m128i lo = round_away(_mm512_mul_ps(x0, id)), hi = round_away(_mm512_mul_ps(x1, id));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), lo);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), hi);
  if (!xu) return;
  const __m128i flip = _mm_set1_epi8(-128);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(xu), _mm_xor_si128(lo, flip));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(xu + 16), _mm_xor_si128(hi, flip));
}
Q8_QUANTIZE_ROW(block)
}  // namespace avx512_quantize
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
#undef Q8_QUANTIZE_ROW

enum class Path { Generic, Avx2, AvxVnni, Avx512Vnni, Amx };

const char* path_name(Path path) {
  switch (path) {
    case Path::Amx: return "amx";
    case Path::Avx512Vnni: return "avx512_vnni";
    case Path::AvxVnni: return "avx_vnni";
    case Path::Avx2: return "avx2";
    default: return "generic";
  }
}

// What the CPU runs: avx2 includes FMA and F16C, the VNNI paths AVX2's too, AMX AVX-512 VNNI's.
bool cpu_runs(Path path) {
#ifdef EMBER_Q8_X86
  __builtin_cpu_init();
  const bool v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  switch (path) {
    case Path::Generic: return true;
    case Path::Avx2: return v;
    case Path::AvxVnni: return v && __builtin_cpu_supports("avxvnni");
    case Path::Avx512Vnni:
      return v && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512bw");
    case Path::Amx:
      return cpu_runs(Path::Avx512Vnni) && __builtin_cpu_supports("amx-tile") &&
             __builtin_cpu_supports("amx-int8") && amx::granted();
  }
#endif
  return path == Path::Generic;
}

Path pick_path() {
  if (isa_available(Isa::Avx512Bf16) && cpu_runs(Path::Amx)) return Path::Amx;  // no cap below the top
  if (isa_available(Isa::Avx512) && cpu_runs(Path::Avx512Vnni)) return Path::Avx512Vnni;
  if (isa_available(Isa::Avx2)) {
    if (cpu_runs(Path::AvxVnni)) return Path::AvxVnni;
    if (cpu_runs(Path::Avx2)) return Path::Avx2;
  }
  return Path::Generic;
}

void run_path(Path path, const Job& job, int64_t M, int64_t n0, int64_t n1) {
  switch (path) {
#ifdef EMBER_Q8_X86
    case Path::Amx: return amx_int8::run(job, M, n0, n1);
    case Path::Avx512Vnni: return avx512_vnni::run(job, M, n0, n1);
    case Path::AvxVnni: return avx_vnni::run(job, M, n0, n1);
    case Path::Avx2: return avx2::run(job, M, n0, n1);
#endif
    default: return run_generic(job, M, n0, n1);
  }
}

// The path named `name` (path_name's): an Error when there is none or this CPU cannot run it.
Path path_named(const char* name) {
  for (Path p : {Path::Generic, Path::Avx2, Path::AvxVnni, Path::Avx512Vnni, Path::Amx}) {
    if (std::string(name) != path_name(p)) continue;
    EMBER_CHECK(cpu_runs(p), "matmul_q8: this CPU cannot run the ", name, " path");
    return p;
  }
  throw Error(std::string("matmul_q8: no path named ") + name);
}

// One row of activations quantized on `path`'s instructions (the VNNI paths' CPUs run
// AVX-512 F, resp. AVX2): every path gives quantize_generic's bytes and scales. The VNNI
// paths also write xu = q + 128 (the others never read it; xu may be null for them).
void quantize_path(Path path, const float* x, int64_t K, int8_t* q, uint8_t* xu, float* d) {
  switch (path) {
#ifdef EMBER_Q8_X86
    case Path::Amx:  // its single rows run the AVX-512 VNNI tiles, which read xu
    case Path::Avx512Vnni: return avx512_quantize::quantize_row(x, K, q, xu, d);
    case Path::AvxVnni: return avx2_quantize::quantize_row(x, K, q, xu, d);
    case Path::Avx2: return avx2_quantize::quantize_row(x, K, q, nullptr, d);
#endif
    default: return quantize_generic(x, K, q, d);
  }
}

void matmul_q8_path(Path path, int64_t M, int64_t K, const float* x, int64_t ldx, const BlockQ8x8* w,
                    const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1) {
  if (M <= 0 || n1 <= n0) return;
  const int64_t nb = q8_blocks(K), n = M * nb * 32;
  thread_local std::vector<int8_t> qx;
  thread_local std::vector<uint8_t> xu;
  thread_local std::vector<float> dx;
  if (static_cast<int64_t>(qx.size()) < n) {
    qx.resize(static_cast<size_t>(n));
    xu.resize(static_cast<size_t>(n));
  }
  if (static_cast<int64_t>(dx.size()) < M * nb) dx.resize(static_cast<size_t>(M * nb));
  int8_t* q = qx.data();
  uint8_t* u = xu.data();
  float* d = dx.data();
  const Job job{q, u, d, nb, w, bias, y, ldy};
  // Threads quantize a share of the rows each, then (after the barrier) take contiguous ranges
  // of whole groups of 8 outputs (a group's 8 rows interleave) for every row.
  const int64_t g0 = n0 / 8, g1 = q8_groups(n1);
  const bool unsigned_too = path != Path::Amx || M == 1;  // AMX's tiles read only the signed bytes
  const bool parallel = (n1 - n0) * K * std::min<int64_t>(M, 8) >= (int64_t{1} << 18) && !omp_in_parallel();
#pragma omp parallel if (parallel)
  {
#pragma omp for schedule(static)
    for (int64_t m = 0; m < M; ++m) quantize_path(path, x + m * ldx, K, q + m * nb * 32, unsigned_too ? u + m * nb * 32 : nullptr, d + m * nb);
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t a = g0 + (g1 - g0) * t / threads, b = g0 + (g1 - g0) * (t + 1) / threads;
    if (a < b) run_path(path, job, M, std::max(n0, 8 * a), std::min(n1, 8 * b));
  }
}

}  // namespace

void quantize_activations_q8(const float* x, int64_t K, int8_t* q, float* d) {
  quantize_path(pick_path(), x, K, q, nullptr, d);
}

void quantize_activations_q8_on(const char* path, const float* x, int64_t K, int8_t* q, float* d) {
  quantize_path(path_named(path), x, K, q, nullptr, d);
}

void pack_weights_q8(const float* w, int64_t N, int64_t K, BlockQ8x8* out) {
  const int64_t nb = q8_blocks(K);
  std::vector<float> row(static_cast<size_t>(nb * 32), 0.0f);  // zeros past K
  std::vector<quant::BlockQ8_0> q(static_cast<size_t>(nb));
  std::memset(static_cast<void*>(out), 0, static_cast<size_t>(q8_groups(N) * nb) * sizeof(BlockQ8x8));
  for (int64_t n = 0; n < N; ++n) {
    std::memcpy(row.data(), w + n * K, static_cast<size_t>(K) * sizeof(float));
    quant::quantize_row_q8_0(row.data(), q.data(), nb * 32);
    const int64_t g = n / 8, r = n % 8;
    for (int64_t b = 0; b < nb; ++b) {
      BlockQ8x8& blk = out[g * nb + b];
      blk.d[r] = q[b].d;
      int sum = 0;
      for (int t = 0; t < 8; ++t) {
        for (int i = 0; i < 4; ++i) {
          blk.qs[32 * t + 4 * r + i] = q[b].qs[4 * t + i];
          sum += q[b].qs[4 * t + i];
        }
      }
      blk.sum[r] = static_cast<int16_t>(sum);
    }
  }
}

void unpack_row_q8(const BlockQ8x8* w, int64_t K, int64_t n, float* out) {
  const int64_t nb = q8_blocks(K), g = n / 8, r = n % 8;
  for (int64_t k = 0; k < K; ++k) {
    const BlockQ8x8& blk = w[g * nb + k / 32];
    const int64_t j = k % 32;
    out[k] = blk.qs[32 * (j / 4) + 4 * r + j % 4] * quant::fp16_value(blk.d[r]);
  }
}

void matmul_q8(int64_t M, int64_t K, const float* x, int64_t ldx, const BlockQ8x8* w,
               const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1) {
  matmul_q8_path(pick_path(), M, K, x, ldx, w, bias, y, ldy, n0, n1);
}

const char* matmul_q8_path() { return path_name(pick_path()); }

void matmul_q8_on(const char* path, int64_t M, int64_t K, const float* x, int64_t ldx,
                  const BlockQ8x8* w, const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1) {
  matmul_q8_path(path_named(path), M, K, x, ldx, w, bias, y, ldy, n0, n1);
}

}  // namespace ember::kernels
