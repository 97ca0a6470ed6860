// The flash attention op (autograd/ops/attention.cpp on core/kernels/attention*):
// output, logsumexp and the gradients of q, k, v against the reference kernel
// (core/kernels/attention/reference.h, run in float64), in float64 and float32,
// over the shapes the tiling can get wrong: GQA / MQA, sliding window, softcap,
// T not a multiple of the tile, T = 1, S > T (KV cache), head dims 16..128,
// B > 1, strided k / v views; and a T = 2048 run whose extra memory must stay
// linear in T.
#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "core/allocator.h"
#include "core/kernels/attention/attention.h"
#include "core/kernels/attention/reference.h"

using namespace ember;

namespace {

// The reference kernel (core/kernels/attention/reference.h: every score
// materialised) in float64 on the same inputs, forward and backward.
struct Reference {
  Tensor out, lse, dq, dk, dv;
};

Reference reference_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                              double scale, int64_t window, double cap) {
  const kernels::AttentionParams p{scale, window, cap};
  const Tensor q64 = q.to(DType::Float64), k64 = k.to(DType::Float64), v64 = v.to(DType::Float64);
  const kernels::AttentionResult f = kernels::attention_reference_forward(q64, k64, v64, p);
  const kernels::AttentionGrads g = kernels::attention_reference_backward(q64, k64, v64, dout.to(DType::Float64), p);
  return {f.out, f.lse, g.dq, g.dk, g.dv};
}

void require_close(const Tensor& got, const Tensor& want_tensor, double tol, const char* what) {
  const auto g = got.contiguous().to_vector<double>();
  const auto want = want_tensor.contiguous().to_vector<double>();
  REQUIRE(g.size() == want.size());
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double e = std::abs(g[i] - want[i]) / (1 + std::abs(want[i]));
    if (!(e <= worst)) {
      worst = e;
      at = i;
    }
  }
  INFO(what << ": worst error " << worst << " at element " << at << " (got " << g[at] << ", want "
            << want[at] << ")");
  REQUIRE(worst <= tol);
}

struct Case {
  int64_t B, T, S, Hq, Hkv, D, window;
  double cap;
};

// Runs the op forward and backward (leaves q, k, v; upstream gradient dout)
// and compares everything with the reference.
void check_case(const Case& c, DType dt, double tol, uint64_t seed = 1) {
  INFO("B " << c.B << " T " << c.T << " S " << c.S << " Hq " << c.Hq << " Hkv " << c.Hkv << " D "
            << c.D << " window " << c.window << " cap " << c.cap << " dtype " << dtype_name(dt));
  Variable q(Tensor::randn({c.B, c.T, c.Hq, c.D}, seed, 0, dt), true);
  Variable k(Tensor::randn({c.B, c.S, c.Hkv, c.D}, seed + 1, 0, dt), true);
  Variable v(Tensor::randn({c.B, c.S, c.Hkv, c.D}, seed + 2, 0, dt), true);
  const Tensor dout = Tensor::randn({c.B, c.T, c.Hq, c.D}, seed + 3, 0, dt);
  // Scale 1.5 / sqrt(D) sharpens the softmax a little beyond the usual.
  const double scale = 1.5 / std::sqrt(static_cast<double>(c.D));
  const Variable y = attention(q, k, v, scale, c.window, c.cap);
  y.backward(dout);
  const Reference r =
      reference_attention(q.data(), k.data(), v.data(), dout, scale, c.window, c.cap);
  require_close(y.data(), r.out, tol, "out");
  require_close(kernels::attention_forward(q.data(), k.data(), v.data(), {scale, c.window, c.cap}).lse, r.lse,
                tol, "lse");
  require_close(q.grad(), r.dq, tol, "dq");
  require_close(k.grad(), r.dk, tol, "dk");
  require_close(v.grad(), r.dv, tol, "dv");
}

const std::vector<Case> kCases = {
    {1, 1, 1, 1, 1, 16, 0, 0},       // T = 1
    {2, 70, 70, 4, 4, 32, 0, 0},     // MHA, T past one tile
    {2, 130, 130, 8, 2, 32, 0, 0},   // GQA, three tiles, the last partial
    {1, 100, 100, 6, 1, 64, 0, 0},   // MQA
    {2, 150, 150, 4, 2, 16, 37, 0},  // sliding window (not a tile multiple)
    {1, 200, 200, 2, 1, 32, 64, 0},  // window of one tile: whole tiles skipped
    {2, 90, 90, 4, 2, 32, 0, 2.5},   // softcap
    {1, 77, 77, 2, 2, 128, 20, 5},   // softcap + window, head dim 128
    {1, 65, 65, 2, 1, 20, 0, 0},     // head dim not a multiple of the vector width
    {2, 3, 100, 4, 2, 32, 0, 0},     // KV cache: 3 new queries over 100 keys
    {1, 1, 130, 4, 4, 64, 50, 0},    // one query, window over cached keys
    // The forward runs query rows along vector lanes (16 float / 8 double):
    // mask edges that cut row vectors, blocks of rows and keys skipped.
    {1, 50, 83, 2, 1, 32, 0, 0},       // S - T = 33: the diagonal mid-vector
    {2, 45, 120, 4, 2, 16, 29, 0},     // both window edges inside row vectors
    {1, 150, 170, 2, 2, 48, 23, 1.5},  // offset, window and softcap; D = 48
    {1, 17, 17, 1, 1, 8, 0, 0},        // one row past a vector, D = 8
};

}  // namespace

TEST_CASE("flash attention matches the reference loop in float64", "[attention]") {
  for (const Case& c : kCases) check_case(c, DType::Float64, 1e-10);
}

TEST_CASE("flash attention matches the reference loop in float32", "[attention]") {
  for (const Case& c : kCases) check_case(c, DType::Float32, 5e-5);
}

TEST_CASE("flash attention reads strided k and v views in place", "[attention]") {
  // k, v: every other position of a longer cache-like tensor (stride 2 on dim 1),
  // and q with its heads permuted (stride order T, H swapped): D stays contiguous.
  const Tensor kbig = Tensor::randn({2, 80, 2, 32}, 7, 0, DType::Float64);
  const Tensor vbig = Tensor::randn({2, 80, 2, 32}, 8, 0, DType::Float64);
  const Tensor qperm = Tensor::randn({2, 4, 40, 32}, 9, 0, DType::Float64).transpose(1, 2);
  const Tensor k = kbig.slice(1, 0, 80, 2), v = vbig.slice(1, 1, 80, 2);
  REQUIRE(!k.is_contiguous());
  REQUIRE(!qperm.is_contiguous());
  const Tensor dout = Tensor::randn({2, 40, 4, 32}, 10, 0, DType::Float64);
  Variable qv(qperm, true), kv(k, true), vv(v, true);
  const Variable y = attention(qv, kv, vv, 0.2, 0, 0);
  y.backward(dout);
  const Reference r = reference_attention(qperm, k, v, dout, 0.2, 0, 0);
  require_close(y.data(), r.out, 1e-10, "out");
  require_close(qv.grad(), r.dq, 1e-10, "dq");
  require_close(kv.grad(), r.dk, 1e-10, "dk");
  require_close(vv.grad(), r.dv, 1e-10, "dv");
}

// T = 2048 trains with memory linear in T: a [T, T] score buffer of one head
// would be 16 MiB in float32; the op's own tensors (out, lse, the packed
// panels, dq/dk/dv) are a few times the 256 KiB of q.
// Tile scratch is per thread and bounded by the tile sizes (not tensors).
// The result is checked against the reference for one small head pair.
TEST_CASE("flash attention at T = 2048 keeps memory linear in T", "[attention]") {
  const int64_t T = 2048, D = 16;
  Variable q(Tensor::randn({1, T, 2, D}, 11), true);
  Variable k(Tensor::randn({1, T, 1, D}, 12), true);
  Variable v(Tensor::randn({1, T, 1, D}, 13), true);
  const Tensor dout = Tensor::randn({1, T, 2, D}, 14);
  const AllocatorStats before = allocator_stats();
  const Variable y = attention(q, k, v, 0.25, 0, 0);
  y.backward(dout);
  const AllocatorStats after = allocator_stats();
  // ctest runs each test case in its own process, where the peak so far is
  // this test's inputs and the growth of the peak is the op's. (When earlier
  // cases of the same process peaked higher, the peak says nothing.)
  if (before.peak_bytes_in_use < before.bytes_in_use + (size_t{1} << 20)) {
    const size_t extra = after.peak_bytes_in_use - before.bytes_in_use;
    const size_t q_bytes = static_cast<size_t>(T) * 2 * D * 4;
    INFO("extra peak bytes " << extra << ", q bytes " << q_bytes);
    REQUIRE(extra < 16 * q_bytes);                    // 4 MiB
    REQUIRE(extra < static_cast<size_t>(T) * T * 4);  // well under one [T, T] float buffer
  } else {
    WARN(
        "allocator peak already high before the op: memory bound not checked (run this case "
        "alone)");
  }
  const Reference r = reference_attention(q.data(), k.data(), v.data(), dout, 0.25, 0, 0);
  require_close(y.data(), r.out, 5e-5, "out");
  require_close(q.grad(), r.dq, 5e-5, "dq");
  require_close(k.grad(), r.dk, 5e-5, "dk");
  require_close(v.grad(), r.dv, 5e-5, "dv");
}

// A window of one key: each row sees only itself, so softmax is exact (P = 1,
// out = v bit for bit: the fused strips must give masked lanes exactly 0 and
// the one visible key exactly 1), dv = dout summed over the heads sharing the
// kv head, and dq = dk = 0.
TEST_CASE("flash attention with a window of one is exact in float32", "[attention]") {
  const int64_t B = 2, T = 100, Hq = 4, Hkv = 2, D = 32;
  Variable q(Tensor::randn({B, T, Hq, D}, 31), true);
  Variable k(Tensor::randn({B, T, Hkv, D}, 32), true);
  Variable v(Tensor::randn({B, T, Hkv, D}, 33), true);
  const Tensor dout = Tensor::randn({B, T, Hq, D}, 34);
  const Variable y = attention(q, k, v, 0.4, 1, 0);
  y.backward(dout);
  const auto out = y.data().to_vector<float>(), vv = v.data().to_vector<float>();
  const auto g = dout.to_vector<float>(), dv = v.grad().to_vector<float>();
  const auto dq = q.grad().to_vector<float>(), dk = k.grad().to_vector<float>();
  size_t wrong_out = 0, wrong_dv = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < Hkv; ++j)
        for (int64_t d = 0; d < D; ++d) {
          const int64_t kvi = ((b * T + t) * Hkv + j) * D + d;
          float want_dv = 0;
          for (int64_t h = j * (Hq / Hkv); h < (j + 1) * (Hq / Hkv); ++h) {
            const int64_t qi = ((b * T + t) * Hq + h) * D + d;
            wrong_out += out[qi] != vv[kvi];
            want_dv += g[qi];
          }
          wrong_dv += std::abs(dv[kvi] - want_dv) > 1e-6f;
        }
  CHECK(wrong_out == 0);
  CHECK(wrong_dv == 0);
  // dq and dk are 0 up to rounding (dP and delta are two float sums).
  auto small = [](float x) { return std::abs(x) < 1e-5f; };
  CHECK(std::all_of(dq.begin(), dq.end(), small));
  CHECK(std::all_of(dk.begin(), dk.end(), small));
}

// Data-parallel training compares runs with different batch splits and thread
// counts: a batch row's output and gradients must not depend on either.
TEST_CASE("flash attention bits depend on neither the thread count nor the batch", "[attention]") {
  const Tensor q = Tensor::randn({4, 150, 4, 32}, 21), k = Tensor::randn({4, 150, 2, 32}, 22);
  const Tensor v = Tensor::randn({4, 150, 2, 32}, 23), dout = Tensor::randn({4, 150, 4, 32}, 24);
  auto run = [&](int64_t batch, int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    Variable qv(q.narrow(0, 0, batch).contiguous(), true),
        kv(k.narrow(0, 0, batch).contiguous(), true), vv(v.narrow(0, 0, batch).contiguous(), true);
    const Variable y = attention(qv, kv, vv, 0.3, 40, 0);
    y.backward(dout.narrow(0, 0, batch).contiguous());
    omp_set_num_threads(saved);
    std::vector<std::vector<float>> r;
    for (const Tensor& t : {y.data(), qv.grad(), kv.grad(), vv.grad()})
      r.push_back(t.narrow(0, 0, 1).contiguous().to_vector<float>());
    return r;
  };
  const auto one = run(4, 1);
  CHECK(run(4, 2) == one);
  CHECK(run(1, 2) == one);
}
