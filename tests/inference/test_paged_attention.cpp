// paged::attend_row, one query row over a paged KV cache: against a float64
// loop written here (scores, softmax and the weighted sum of values, read
// through the block table), for float32 and bfloat16 caches, head sizes with
// and without a tail past 16 lanes, GQA, a sliding window and a soft-cap;
// and the bfloat16 cache bit-identical to the float32 path on the same
// rounded keys and values (widening is exact).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/kernels/bf16.h"
#include "inference/model_runner/paged_kernels.h"

using namespace ember;
using namespace ember::inference;

namespace {

struct Case {
  const char* name;
  int64_t Hq, Hkv, D, lo, p;
  double softcap;
};

// K and V of n_blocks blocks [n_blocks, 16, Hkv, D], values in [-2, 2) from a fixed hash.
std::vector<float> cache_values(int64_t n, uint32_t salt) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t h = (static_cast<uint32_t>(i) * 2654435761u) ^ (salt * 40503u);
    x[i] = static_cast<float>((h >> 8) % 4096) / 1024.0f - 2.0f;
  }
  return x;
}

// out[h, d] = sum_t softmax_t(s) v_t[d] with s_t = scale q_h . k_t (cap tanh(s / cap) when cap
// > 0), t in [lo, p], position t at block table[t / 16], slot t % 16; all in double.
std::vector<double> reference(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, const std::vector<int32_t>& table) {
  const int64_t row = c.Hkv * c.D, group = c.Hq / c.Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
  std::vector<double> out(static_cast<size_t>(c.Hq * c.D), 0.0);
  for (int64_t h = 0; h < c.Hq; ++h) {
    std::vector<double> s;
    for (int64_t t = c.lo; t <= c.p; ++t) {
      const int64_t at = (table[t / 16] * 16 + t % 16) * row + (h / group) * c.D;
      double dot = 0;
      for (int64_t d = 0; d < c.D; ++d) dot += static_cast<double>(q[h * c.D + d]) * k[at + d];
      double x = dot * scale;
      if (c.softcap > 0) x = c.softcap * std::tanh(x / c.softcap);
      s.push_back(x);
    }
    double mx = s[0], z = 0;
    for (const double x : s) mx = std::max(mx, x);
    for (double& x : s) z += x = std::exp(x - mx);
    for (int64_t t = c.lo; t <= c.p; ++t) {
      const int64_t at = (table[t / 16] * 16 + t % 16) * row + (h / group) * c.D;
      for (int64_t d = 0; d < c.D; ++d) out[h * c.D + d] += s[t - c.lo] / z * v[at + d];
    }
  }
  return out;
}

const Case kCases[] = {
    {"MHA, D 64, one partial block", 4, 4, 64, 0, 9, 0},
    {"GQA, D 80 (4 + 1 vectors), three blocks", 6, 2, 80, 0, 40, 0},
    {"MQA, D 20 (a 4-element tail), soft-cap", 3, 1, 20, 0, 35, 5.0},
    {"sliding window: positions 19..47 only", 4, 2, 32, 19, 47, 0},
};

}  // namespace

TEST_CASE("paged attention: one row against a float64 loop, float32 and bfloat16 caches",
          "[paged]") {
  for (const Case& c : kCases) {
    const int64_t row = c.Hkv * c.D, n_blocks = 8;
    const std::vector<int32_t> table{5, 0, 7, 2};  // scrambled, far apart
    const std::vector<float> q = cache_values(c.Hq * c.D, 1);
    const std::vector<float> k = cache_values(n_blocks * 16 * row, 2);
    const std::vector<float> v = cache_values(n_blocks * 16 * row, 3);
    for (const bool bf16 : {false, true}) {
      INFO(c.name << (bf16 ? ", bfloat16 cache" : ", float32 cache"));
      // The bfloat16 cache holds the rounded values; the reference reads them widened.
      std::vector<uint16_t> kb(k.size()), vb(v.size());
      std::vector<float> kr = k, vr = v;
      for (size_t i = 0; i < k.size(); ++i) {
        kb[i] = kernels::bfloat16_bits(k[i]);
        vb[i] = kernels::bfloat16_bits(v[i]);
        if (bf16) {
          kr[i] = kernels::bfloat16_value(kb[i]);
          vr[i] = kernels::bfloat16_value(vb[i]);
        }
      }
      paged::AttnArgs a;
      a.k = bf16 ? static_cast<const void*>(kb.data()) : k.data();
      a.v = bf16 ? static_cast<const void*>(vb.data()) : v.data();
      a.bf16 = bf16;
      a.Hkv = c.Hkv;
      a.D = c.D;
      a.group = c.Hq / c.Hkv;
      a.scale = 1.0 / std::sqrt(static_cast<double>(c.D));
      a.softcap = c.softcap;
      std::vector<float> out(static_cast<size_t>(c.Hq * c.D), -1.0f);
      std::vector<float> scratch(static_cast<size_t>(c.Hq * (c.p - c.lo + 1)));
      paged::attend_row(a, q.data(), 0, c.Hq, table, c.lo, c.p, out.data(), scratch.data());
      const std::vector<double> want = reference(c, q, kr, vr, table);
      for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == Approx(want[i]).margin(1e-5).epsilon(1e-5));
    }
  }
}

TEST_CASE("paged attention: a bfloat16 cache gives the float32 path's bits on the rounded values",
          "[paged]") {
  for (const Case& c : kCases) {
    INFO(c.name);
    const int64_t row = c.Hkv * c.D, n_blocks = 8;
    const std::vector<int32_t> table{3, 6, 1, 4};
    const std::vector<float> q = cache_values(c.Hq * c.D, 4);
    const std::vector<float> k = cache_values(n_blocks * 16 * row, 5);
    const std::vector<float> v = cache_values(n_blocks * 16 * row, 6);
    std::vector<uint16_t> kb(k.size()), vb(v.size());
    std::vector<float> kr(k.size()), vr(v.size());
    for (size_t i = 0; i < k.size(); ++i) {
      kb[i] = kernels::bfloat16_bits(k[i]);
      vb[i] = kernels::bfloat16_bits(v[i]);
      kr[i] = kernels::bfloat16_value(kb[i]);
      vr[i] = kernels::bfloat16_value(vb[i]);
    }
    paged::AttnArgs a;
    a.Hkv = c.Hkv;
    a.D = c.D;
    a.group = c.Hq / c.Hkv;
    a.scale = 1.0 / std::sqrt(static_cast<double>(c.D));
    a.softcap = c.softcap;
    std::vector<float> scratch(static_cast<size_t>(c.Hq * (c.p - c.lo + 1)));
    std::vector<float> from_float(static_cast<size_t>(c.Hq * c.D)), from_bf16(from_float.size());
    a.k = kr.data();
    a.v = vr.data();
    paged::attend_row(a, q.data(), 0, c.Hq, table, c.lo, c.p, from_float.data(), scratch.data());
    a.k = kb.data();
    a.v = vb.data();
    a.bf16 = true;
    paged::attend_row(a, q.data(), 0, c.Hq, table, c.lo, c.p, from_bf16.data(), scratch.data());
    CHECK(std::memcmp(from_float.data(), from_bf16.data(), from_float.size() * sizeof(float)) == 0);
  }
}
