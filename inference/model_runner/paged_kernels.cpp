// Row-wise kernels of the paged inference forward (see inference/model_runner/paged_kernels.h). All
// sums run in a fixed order per row, in double where accuracy matters.
#include "inference/model_runner/paged_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/kernels/bf16.h"
#include "core/kernels/fast_math.h"
#include "core/kernels/lane_sums.h"
#include "core/simd.h"

namespace ember::inference::paged {

void rope_rows(float* x, int64_t R, int64_t ld, int64_t H, int64_t D, const int64_t* pos,
               const float* cos, const float* sin) {
  const int64_t h = D / 2;
#pragma omp parallel for if (R * H * D > (1 << 15))
  for (int64_t r = 0; r < R; ++r) {
    const float* c = cos + pos[r] * h;
    const float* s = sin + pos[r] * h;
    for (int64_t head = 0; head < H; ++head) {
      float* xr = x + r * ld + head * D;
      for (int64_t i = 0; i < h; ++i) {
        const float x1 = xr[i], x2 = xr[i + h];
        xr[i] = x1 * c[i] - x2 * s[i];
        xr[i + h] = x2 * c[i] + x1 * s[i];
      }
    }
  }
}

namespace {

constexpr float kSqrt2OverPi = 0.79788456080286535588f, kGeluCubic = 0.044715f;

// 16 elements, by the float formulas of the training path (core/kernels/unary.cpp):
// silu x sigmoid(x), gelu x Phi(x), gelu_tanh x sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)).
// Every element goes through this one function, 16 at a time (a tail padded), so each runs
// the same vector instructions whatever n and the thread split (a vectorized loop's scalar
// tail could round differently).
constexpr int64_t kActBlock = 16;
EMBER_TARGET_CLONES void act_block(int kind, const float* __restrict g, const float* __restrict u,
                                   float* __restrict o) {
  namespace f = kernels::fast;
  switch (kind) {
    case 0:
      for (int j = 0; j < kActBlock; ++j) o[j] = g[j] * f::sigmoid(g[j]) * u[j];
      break;
    case 1:
      for (int j = 0; j < kActBlock; ++j) o[j] = g[j] * f::normal_cdf(g[j]) * u[j];
      break;
    case 2:
      for (int j = 0; j < kActBlock; ++j) o[j] = u[j] * f::normal_cdf(u[j]);
      break;
    case 3:
      for (int j = 0; j < kActBlock; ++j) {
        o[j] = u[j] * f::sigmoid(2.0f * (kSqrt2OverPi * (u[j] + kGeluCubic * u[j] * u[j] * u[j])));
      }
      break;
    default:
      for (int j = 0; j < kActBlock; ++j) o[j] = std::max(u[j], 0.0f);
      break;
  }
}

}  // namespace

void activate(const std::string& act, const float* gate, const float* up, float* out, int64_t n) {
  EMBER_CHECK(act == "swiglu" || act == "geglu" || act == "gelu" || act == "gelu_tanh" || act == "relu",
              "paged forward: unknown activation ", act);
  const int kind = act == "swiglu" ? 0 : act == "geglu" ? 1 : act == "gelu" ? 2 : act == "gelu_tanh" ? 3 : 4;
  static const float zeros[kActBlock] = {};
  const int64_t blocks = n / kActBlock;
#pragma omp parallel for schedule(static) if (n >= (1 << 13))
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t at = i * kActBlock;
    act_block(kind, gate ? gate + at : zeros, up + at, out + at);
  }
  const int64_t at = blocks * kActBlock, rest = n - at;
  if (rest == 0) return;
  float g[kActBlock] = {}, u[kActBlock] = {}, o[kActBlock];
  std::copy(up + at, up + n, u);
  if (gate) std::copy(gate + at, gate + n, g);
  act_block(kind, g, u, o);
  std::copy(o, o + rest, out + at);
}

namespace {

constexpr int64_t kLanes = 16;

// A cached key or value element as float: float32 as is, bfloat16 widened exactly
// (its bits are the float's upper half).
[[gnu::always_inline]] inline float widen(float x) { return x; }
[[gnu::always_inline]] inline float widen(uint16_t h) { return kernels::bfloat16_value(h); }
[[gnu::always_inline]] inline void load16(kernels::v16& out, const float* p) {
  std::memcpy(&out, p, sizeof(out));
}
[[gnu::always_inline]] inline void load16(kernels::v16& out, const uint16_t* p) {
  typedef uint16_t u16x16 __attribute__((vector_size(32)));
  typedef uint32_t u32x16 __attribute__((vector_size(64)));
  u16x16 h;
  std::memcpy(&h, p, sizeof(h));
  const u32x16 bits = __builtin_convertvector(h, u32x16) << 16;
  std::memcpy(&out, &bits, sizeof(out));
}

// s[i] = q . k_i for the 16 positions of a cache block (k_i at k + i * ld), each over D in a
// fixed order: 16 lane sums (d = j mod 16, increasing d), added left to right, then the tail.
template <class KV>
[[gnu::always_inline]] inline void block_scores(const float* q, const KV* k, int64_t ld, int64_t D, float* s) {
  const int64_t d_main = D - D % kLanes;
  kernels::v16 acc[16] = {};
  for (int64_t d = 0; d < d_main; d += kLanes) {
    kernels::v16 qv;
    std::memcpy(&qv, q + d, sizeof(qv));
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      kernels::v16 kv;
      load16(kv, k + i * ld + d);
      acc[i] += qv * kv;
    }
  }
  kernels::lane_sums(acc, s);
  for (int i = 0; i < 16; ++i) {
    for (int64_t d = d_main; d < D; ++d) s[i] += q[d] * widen(k[i * ld + d]);
  }
}

// o[0, 16 N) += wt[t] v[t * ld + .] for t = t0..t1 in order, o held in registers meanwhile
// (each element: the product rounded, then the sum, as the scalar loop would).
template <int N, class KV>
[[gnu::always_inline]] inline void block_pv(const float* wt, const KV* v, int64_t ld, int64_t t0,
                                            int64_t t1, float* o) {
  kernels::v16 acc[N];
  for (int i = 0; i < N; ++i) std::memcpy(&acc[i], o + i * kLanes, sizeof(acc[i]));
  for (int64_t t = t0; t <= t1; ++t) {
    const float w = wt[t];
    for (int i = 0; i < N; ++i) {
      kernels::v16 vv;
      load16(vv, v + t * ld + i * kLanes);
      acc[i] += w * vv;
    }
  }
  for (int i = 0; i < N; ++i) std::memcpy(o + i * kLanes, &acc[i], sizeof(acc[i]));
}

// x[0] + ... + x[n-1] in a fixed order: 16 lane sums (i = j mod 16), added left to right.
[[gnu::always_inline]] inline float sum16(const float* x, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) acc[j] += x[i + j];
  }
  for (int64_t j = 0; i < n; ++i, ++j) acc[j] += x[i];
  float s = 0;
  for (int64_t j = 0; j < kLanes; ++j) s += acc[j];
  return s;
}

// The next KV head's 16 rows of a cache block (kb: this block, kn: the next or null; the next
// block's first head after the last), into L2: the query heads of a group (GQA) share them, so
// fetched once, before the group's first head.
template <class KV>
[[gnu::always_inline]] inline void prefetch_next_head(const AttnArgs& a, int64_t h, int64_t h0, int64_t h1,
                                                      const KV* kb, const KV* kn, int64_t row) {
  const bool group_ends = h + 1 == h1 || (h + 1) / a.group != h / a.group;
  const KV* next = !group_ends ? nullptr : h + 1 < h1 ? kb + ((h + 1) / a.group) * a.D : kn ? kn + (h0 / a.group) * a.D : nullptr;
  if (!next) return;
  for (int i = 0; i < 16; ++i) {
    for (int64_t d = 0; d < a.D; d += 64 / static_cast<int64_t>(sizeof(KV))) __builtin_prefetch(next + i * row + d, 0, 2);
  }
}

// Per head, all in float and in a fixed order: s_t = scale q.k_t (softcapped), m = max s,
// e_t = exp(s_t - m) (core's vector exp, about 1 ulp), Z = sum e_t (16 lane sums over t mod 16,
// added left to right), out_h[d] = sum_t (e_t / Z) v_t[d], t increasing. The scores come a cache
// block (16 positions) at a time: dot()'s order, its 16 lane sums done by kernels::lane_sums.
// KV: the cache's element type; a bfloat16 element is widened exactly before it is used, so
// the result equals the float32 path's on the same (rounded) keys and values.
template <class KV>
[[gnu::always_inline]] inline void attend(const AttnArgs& a, const float* q, int64_t h0, int64_t h1,
                                          const std::vector<int32_t>& blocks, int64_t lo, int64_t p,
                                          float* out, float* scratch) {
  const KV* k = static_cast<const KV*>(a.k);
  const KV* v = static_cast<const KV*>(a.v);
  const int64_t D = a.D, row = a.Hkv * D, block = 16 * row, T = p - lo + 1, nh = h1 - h0;
  const float scale = static_cast<float>(a.scale), cap = static_cast<float>(a.softcap);
  float s16[16];
  for (int64_t b = lo / 16; b <= p / 16; ++b) {
    const KV* kb = k + blocks[static_cast<size_t>(b)] * block;
    const KV* kn = b < p / 16 ? k + blocks[static_cast<size_t>(b + 1)] * block : nullptr;
    const int64_t t0 = std::max(lo, b * 16), t1 = std::min(p, b * 16 + 15);
    for (int64_t h = h0; h < h1; ++h) {
      // The next head's keys, 16 strided pieces, into L2 meanwhile: the hardware prefetchers
      // do not follow that pattern (into L1, the prefetches waited for fill buffers: about 3%
      // slower at sixteen streams).
      prefetch_next_head(a, h, h0, h1, kb, kn, row);
      block_scores(q + h * D, kb + (h / a.group) * D, row, D, s16);
      for (int64_t t = t0; t <= t1; ++t) {
        float s = s16[t - b * 16] * scale;
        if (cap > 0) s = cap * kernels::fast::tanh_f32(s / cap);
        scratch[(h - h0) * T + (t - lo)] = s;
      }
    }
  }
  for (int64_t i = 0; i < nh; ++i) {
    float* s = scratch + i * T;
    const float mx = *std::max_element(s, s + T);
    for (int64_t t = 0; t < T; ++t) s[t] = kernels::fast::exp_f32(s[t] - mx);
    const float inv = 1.0f / sum16(s, T);
    for (int64_t t = 0; t < T; ++t) s[t] *= inv;
  }
  // out_h[d] = sum_t p_t v_t[d], t increasing: a cache block's positions at a time, each
  // head's output held in registers (16 lanes of d per vector) across the block.
  std::fill(out + h0 * D, out + h1 * D, 0.0f);
  for (int64_t b = lo / 16; b <= p / 16; ++b) {
    const KV* vb = v + blocks[static_cast<size_t>(b)] * block;
    const KV* vn = b < p / 16 ? v + blocks[static_cast<size_t>(b + 1)] * block : nullptr;
    const int64_t t0 = std::max(lo, b * 16), t1 = std::min(p, b * 16 + 15);
    for (int64_t h = h0; h < h1; ++h) {
      // A bfloat16 cache's values likewise (1-2 ms of a sixteen-stream int8 step: its attention
      // waits on the memory's latency more than on its bandwidth); a float32 cache's measured
      // no faster with them.
      if constexpr (sizeof(KV) == 2) prefetch_next_head(a, h, h0, h1, vb, vn, row);
      const float* wt = scratch + (h - h0) * T - lo;  // wt[t], t in [t0, t1]
      const KV* vh = vb + (h / a.group) * D - b * 16 * row;  // v_t[d] at vh[t * row + d]
      float* o = out + h * D;
      int64_t d = 0;
      for (; d + 4 * kLanes <= D; d += 4 * kLanes) block_pv<4>(wt, vh + d, row, t0, t1, o + d);
      for (; d + kLanes <= D; d += kLanes) block_pv<1>(wt, vh + d, row, t0, t1, o + d);
      for (; d < D; ++d) {
        for (int64_t t = t0; t <= t1; ++t) o[d] += wt[t] * widen(vh[t * row + d]);
      }
    }
  }
}

}  // namespace

EMBER_TARGET_CLONES void attend_row(const AttnArgs& a, const float* q, int64_t h0, int64_t h1,
                                    const std::vector<int32_t>& blocks, int64_t lo, int64_t p,
                                    float* out, float* scratch) {
  if (a.bf16) {
    attend<uint16_t>(a, q, h0, h1, blocks, lo, p, out, scratch);
  } else {
    attend<float>(a, q, h0, h1, blocks, lo, p, out, scratch);
  }
}

}  // namespace ember::inference::paged
