// kernels::PackedWeight per weight type: each product against a float64 loop over the
// SAME rounded weights (M = 1..16 and past 16, K and N tails, bias), every row bit-identical to
// the row computed alone (batch invariance) and to any split of the columns; bf16 bit-identical
// to matmul_rows over the widened weights (on AMX tiles: within float32 rounding of float64 over
// the activations rounded too); and the rounding and layouts against a hand computation.
#include <catch2/catch.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/kernels/bf16.h"
#include "core/kernels/cpu_isa.h"
#include "core/kernels/matmul_bf16_tiles.h"
#include "core/kernels/matmul_q8.h"
#include "core/kernels/matmul_rows.h"
#include "core/kernels/packed_weights.h"

using namespace ember;
using kernels::PackedWeight;
using kernels::WeightType;

namespace {

std::vector<float> values(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001 - 1000) / 997.0f;
  }
  return v;
}

// Largest |y - ref| / sum |x w| over the outputs, ref in float64 on the rounded weights wq.
double worst_error(int64_t M, int64_t N, int64_t K, const std::vector<float>& x, const float* wq,
                   const std::vector<float>& b, const std::vector<float>& y) {
  double worst = 0;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double ref = b[n], mag = std::abs(ref);
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(x[m * K + k]) * wq[n * K + k];
        ref += p;
        mag += std::abs(p);
      }
      worst = std::max(worst, std::abs(y[m * N + n] - ref) / (mag + 1e-30));
    }
  }
  return worst;
}

// x as the int8 kernel multiplies it: each value qx * dx of its block (float64 exact in float).
std::vector<float> quantized_activations(const std::vector<float>& x, int64_t M, int64_t K) {
  const int64_t nb = kernels::q8_blocks(K);
  std::vector<int8_t> q(static_cast<size_t>(nb * 32));
  std::vector<float> d(static_cast<size_t>(nb)), out(x.size());
  for (int64_t m = 0; m < M; ++m) {
    kernels::quantize_activations_q8(x.data() + m * K, K, q.data(), d.data());
    for (int64_t k = 0; k < K; ++k) out[m * K + k] = static_cast<float>(q[k]) * d[k / 32];
  }
  return out;
}

// x rounded to bfloat16, as bf16 weights on AMX tiles multiply it (kernels/bf16.h's rule).
std::vector<float> bf16_activations(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], 4);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;  // nearest-even on the dropped 16 bits
    std::memcpy(&out[i], &u, 4);
  }
  return out;
}

// One shape: against float64 over the same rounded weights (and, for int8, the same quantized
// activations; for bf16 on AMX tiles, the same rounded activations), each row alone, and a
// two-way column split.
void check_shape(WeightType type, int64_t M, int64_t N, int64_t K, double tolerance) {
  INFO(kernels::weight_type_name(type) << " M " << M << " N " << N << " K " << K);
  const auto x = values(M * K, 1), wf = values(N * K, 2), b = values(N, 3);
  const PackedWeight w(Tensor::from_vector(wf, {N, K}), type);
  const Tensor wq = w.to_float32();
  std::vector<float> y(static_cast<size_t>(M * N));
  w.matmul(M, x.data(), K, b.data(), y.data(), N);
  const auto xr = type == WeightType::Int8 ? quantized_activations(x, M, K) : w.bf16_tiles() ? bf16_activations(x) : x;
  CHECK(worst_error(M, N, K, xr, wq.data<float>(), b, y) < tolerance);
  for (int64_t m = 0; m < M; ++m) {
    std::vector<float> alone(static_cast<size_t>(N));
    w.matmul(1, x.data() + m * K, K, b.data(), alone.data(), N);
    INFO("row " << m);
    CHECK(std::memcmp(alone.data(), y.data() + m * N, static_cast<size_t>(N) * 4) == 0);
  }
  std::vector<float> split(static_cast<size_t>(M * N));
  w.matmul(M, x.data(), K, b.data(), split.data(), N, 0, N / 3);
  w.matmul(M, x.data(), K, b.data(), split.data(), N, N / 3, N);
  CHECK(std::memcmp(split.data(), y.data(), y.size() * 4) == 0);
}

}  // namespace

TEST_CASE("packed weights: bf16 rounds each weight to nearest-even, by hand", "[packed_weights]") {
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even (1);
  // 1 + 3 * 2^-8 ties between 1 + 2^-7 (odd) and 1 + 2^-6: to 1 + 2^-6.
  const std::vector<float> w = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.5f, 0.1f};
  const PackedWeight p(Tensor::from_vector(w, {2, 2}), WeightType::BFloat16);
  float r[2];
  p.row(0, r);
  CHECK(r[0] == 1.0f);
  CHECK(r[1] == 1.0f + 0x1p-6f);
  p.row(1, r);
  CHECK(r[0] == -2.5f);
  CHECK(r[1] == 0.10009765625f);  // 0.1 = 0x3DCCCCCD -> 0x3DCD
  CHECK(p.nbytes() == (p.bf16_tiles() ? 16 * 32 * 2 : 8));  // AMX tiles: one, padded with zeros
}

TEST_CASE("packed weights: every type against float64 over its rounded weights, M = 1..16 and tails",
          "[packed_weights]") {
  INFO("int8 path " << kernels::matmul_q8_path() << ", EMBER_MAX_ISA " << kernels::isa_name(kernels::max_isa()));
  for (WeightType type : {WeightType::Float32, WeightType::BFloat16, WeightType::Int8}) {
    for (int64_t M = 1; M <= 16; ++M) check_shape(type, M, 19, 77, 1e-5);
    check_shape(type, 37, 45, 1100, 1e-5);  // past 16 rows and past the k-block of 1024
    check_shape(type, 5, 64, 32, 1e-5);
    check_shape(type, 3, 7, 3, 1e-5);  // K below one block
  }
}

TEST_CASE("packed weights: int8 is Q8_0 blocks padded with zeros past K, by hand", "[packed_weights]") {
  // One row of K = 33: block 0 has amax 2.54 -> d = 0.02 (stored as half 0x251F = 0.0200043),
  // block 1 holds -1 and 31 zeros -> d = 1/127, q = -127.
  std::vector<float> w(33, 0.0f);
  w[0] = 2.54f;
  w[1] = -1.27f;
  w[2] = 0.01f;  // 0.5 of a step: roundf takes it away from zero, to 1
  w[32] = -1.0f;
  const PackedWeight p(Tensor::from_vector(w, {1, 33}), WeightType::Int8);
  CHECK(p.nbytes() == 2 * 288);  // one group of 8 rows (7 of zeros), 2 blocks
  std::vector<float> r(33);
  p.row(0, r.data());
  const float d0 = ember::quant::fp16_value(0x251F), d1 = ember::quant::fp16_value(ember::quant::fp16_bits(1.0f / 127));
  CHECK(r[0] == 127 * d0);
  CHECK(r[1] == -64 * d0);  // -1.27 / 0.02 = -63.5: away from zero
  CHECK(r[2] == 1 * d0);
  CHECK(r[3] == 0.0f);
  CHECK(r[32] == -127 * d1);
  // Activations: same blocks, the scale kept in float32.
  int8_t q[64];
  float d[2];
  kernels::quantize_activations_q8(w.data(), 33, q, d);
  CHECK(d[0] == 2.54f / 127.0f);
  CHECK(q[0] == 127);
  CHECK(q[1] == std::roundf(-1.27f * (1.0f / d[0])));
  CHECK(q[32] == -127);
  for (int t = 33; t < 64; ++t) CHECK(q[t] == 0);
}

TEST_CASE("packed weights: every int8 path this CPU runs gives the generic path's bits", "[packed_weights]") {
  // N = 13 and 40: one pair of groups of 8 (the pair tiles of AVX-512 VNNI and AMX), two pairs
  // and a group left over; all columns and the sub-range [3, N - 5) (groups cut at both ends); M
  // with every row-tile height of the vector paths, and AMX's tiles of 16 rows: one whole, one
  // and rows left over, more than one chunk of 64 rows.
  // With a bias and without (a pair wholly inside the range is written straight from its
  // registers, the bias added there).
  const int64_t K = 200;
  int ran = 0;
  for (const int64_t N : {13, 40}) {
    for (const int64_t M : {2, 5, 16, 18, 83}) {
      for (const bool with_bias : {true, false}) {
        const auto x = values(M * K, 7), wf = values(N * K, 8), bv = values(N, 9);
        const float* bias = with_bias ? bv.data() : nullptr;
        std::vector<kernels::BlockQ8x8> w(static_cast<size_t>(kernels::q8_groups(N) * kernels::q8_blocks(K)));
        kernels::pack_weights_q8(wf.data(), N, K, w.data());
        std::vector<float> ref(static_cast<size_t>(M * N)), y(ref.size());
        kernels::matmul_q8_on("generic", M, K, x.data(), K, w.data(), bias, ref.data(), N, 0, N);
        for (const char* path : {"avx2", "avx_vnni", "avx512_vnni", "amx"}) {
          for (const int64_t cut : {0, 1}) {
            const int64_t n0 = cut ? 3 : 0, n1 = cut ? N - 5 : N;
            std::fill(y.begin(), y.end(), -1.0f);
            try {
              kernels::matmul_q8_on(path, M, K, x.data(), K, w.data(), bias, y.data(), N, n0, n1);
            } catch (const ember::Error&) {
              continue;  // not on this CPU
            }
            ++ran;
            INFO(path << " N " << N << " M " << M << " columns [" << n0 << ", " << n1 << ") bias " << with_bias);
            for (int64_t m = 0; m < M; ++m) {
              CHECK(std::memcmp(y.data() + m * N + n0, ref.data() + m * N + n0, (n1 - n0) * 4) == 0);
              for (int64_t n = 0; n < N; ++n) {
                if (n < n0 || n >= n1) CHECK(y[m * N + n] == -1.0f);  // nothing written outside
              }
            }
          }
        }
      }
    }
  }
  WARN(ran / 40 << " SIMD int8 paths ran here");
}

namespace {

// The activation quantizer as a plain loop: per block of 32 (zeros past K), d = amax / 127,
// q = roundf(x / d) computed as roundf(x * (1 / d)), 0 for a block of zeros.
void reference_quantize(const std::vector<float>& x, std::vector<int8_t>& q, std::vector<float>& d) {
  const int64_t K = static_cast<int64_t>(x.size()), nb = kernels::q8_blocks(K);
  q.assign(static_cast<size_t>(nb * 32), 0);
  d.assign(static_cast<size_t>(nb), 0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    float amax = 0;
    for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k) amax = std::max(amax, std::fabs(x[k]));
    d[b] = amax / 127.0f;
    const float id = d[b] != 0 ? 1.0f / d[b] : 0.0f;
    for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k) q[k] = static_cast<int8_t>(std::roundf(x[k] * id));
  }
}

// Activations that exercise the rounding: random values at several scales, a block of exact
// ties (amax 127, so x * (1 / d) = x: +-0.5, +-2.5, +-126.5 go away from zero), a block of
// zeros and a block of negative zeros, then a tail.
std::vector<float> quantizer_input(int64_t K, uint32_t seed) {
  std::vector<float> x = values(K, seed);
  for (int64_t k = 0; k < K; ++k) x[k] *= k / 32 % 3 == 0 ? 1e-3f : k / 32 % 3 == 1 ? 40.0f : 1e20f;
  const float ties[] = {127.0f, 0.5f, -0.5f, 2.5f, -2.5f, 126.5f, -126.5f, 1.5f, -1.5f, 0.49999997f, -3.0f};
  for (int64_t t = 0; t < 11 && 32 + t < K; ++t) x[32 + t] = ties[t];
  for (int64_t k = 64; k < std::min<int64_t>(K, 96); ++k) x[k] = 0.0f;
  for (int64_t k = 96; k < std::min<int64_t>(K, 128); ++k) x[k] = -0.0f;
  return x;
}

}  // namespace

TEST_CASE("packed weights: the activation quantizer of every path equals a plain roundf loop",
          "[packed_weights]") {
  INFO("int8 path " << kernels::matmul_q8_path() << ", EMBER_MAX_ISA " << kernels::isa_name(kernels::max_isa()));
  int ran = 0;
  for (const int64_t K : {1, 5, 31, 32, 33, 77, 160, 200, 768, 3072}) {
    const auto x = quantizer_input(K, static_cast<uint32_t>(K));
    std::vector<int8_t> ref_q, q;
    std::vector<float> ref_d, d;
    reference_quantize(x, ref_q, ref_d);
    for (const char* path : {"default", "generic", "avx2", "avx_vnni", "avx512_vnni", "amx"}) {
      q.assign(ref_q.size(), 99);
      d.assign(ref_d.size(), -1.0f);
      try {
        if (std::string(path) == "default") {
          kernels::quantize_activations_q8(x.data(), K, q.data(), d.data());
        } else {
          kernels::quantize_activations_q8_on(path, x.data(), K, q.data(), d.data());
        }
      } catch (const ember::Error&) {
        continue;  // not on this CPU
      }
      ++ran;
      INFO(path << " K " << K);
      CHECK(std::memcmp(q.data(), ref_q.data(), q.size()) == 0);
      CHECK(std::memcmp(d.data(), ref_d.data(), d.size() * 4) == 0);
    }
  }
  WARN(ran / 10 << " quantizer paths ran here (with the default)");
}

TEST_CASE("packed weights: one row alone equals its row in a batch, bit for bit, every type and thread count",
          "[packed_weights]") {
  // N = 300: one row alone streams its weights from several parts of each thread's range at
  // once (matmul_rows' and matmul_q8's single-row paths), with groups left over; a batch runs
  // the tiles of many rows.
  const int64_t M = 7, N = 300, K = 200;
  const auto x = values(M * K, 10), wf = values(N * K, 11), b = values(N, 12);
  const int saved = omp_get_max_threads();
  for (WeightType type : {WeightType::Float32, WeightType::BFloat16, WeightType::Int8}) {
    const PackedWeight w(Tensor::from_vector(wf, {N, K}), type);
    for (const int threads : {1, 2}) {
      omp_set_num_threads(threads);
      std::vector<float> batch(static_cast<size_t>(M * N)), alone(static_cast<size_t>(N));
      w.matmul(M, x.data(), K, b.data(), batch.data(), N);
      for (int64_t m = 0; m < M; ++m) {
        INFO("type " << static_cast<int>(type) << " threads " << threads << " row " << m);
        w.matmul(1, x.data() + m * K, K, b.data(), alone.data(), N);
        CHECK(std::memcmp(alone.data(), batch.data() + m * N, N * 4) == 0);
      }
    }
  }
  omp_set_num_threads(saved);
  // And the int8 single-row path of each SIMD kind against the generic loop.
  std::vector<kernels::BlockQ8x8> q(static_cast<size_t>(kernels::q8_groups(N) * kernels::q8_blocks(K)));
  kernels::pack_weights_q8(wf.data(), N, K, q.data());
  std::vector<float> ref(static_cast<size_t>(N)), y(ref.size());
  kernels::matmul_q8_on("generic", 1, K, x.data(), K, q.data(), b.data(), ref.data(), N, 0, N);
  for (const char* path : {"avx2", "avx_vnni", "avx512_vnni", "amx"}) {
    try {
      kernels::matmul_q8_on(path, 1, K, x.data(), K, q.data(), b.data(), y.data(), N, 3, N - 5);
    } catch (const ember::Error&) {
      continue;  // not on this CPU
    }
    INFO(path);
    CHECK(std::memcmp(y.data() + 3, ref.data() + 3, (N - 8) * 4) == 0);
  }
}

TEST_CASE("packed weights: bf16 is matmul_rows over the widened weights, bit for bit", "[packed_weights]") {
  // M = 1 (the one-row tiles), 3 and 16 (the direct tiles; 16 with K past 1024: the k-blocked
  // ones), 21 (float32 panels); K: whole blocks of 32, a half block (48), tails. (Without AMX
  // tiles: the test's CTest variants under EMBER_MAX_ISA run this everywhere.)
  if (kernels::bf16_tiles_available()) {
    WARN("bf16 runs on AMX tiles here: the widened path is checked by this test's EMBER_MAX_ISA variants");
    return;
  }
  const int64_t N = 33;
  for (const int64_t K : {5, 16, 48, 200, 1030, 2100}) {
    for (const int64_t M : {1, 3, 16, 21}) {
      const auto x = values(M * K, 4), wf = values(N * K, 5), b = values(N, 6);
      const PackedWeight w(Tensor::from_vector(wf, {N, K}), WeightType::BFloat16);
      const Tensor wq = w.to_float32();
      std::vector<float> y(static_cast<size_t>(M * N)), ref(static_cast<size_t>(M * N));
      w.matmul(M, x.data(), K, b.data(), y.data(), N);
      kernels::matmul_rows(M, N, K, x.data(), K, wq.data<float>(), K, b.data(), ref.data(), N);
      INFO("M " << M << " K " << K);
      CHECK(std::memcmp(y.data(), ref.data(), y.size() * 4) == 0);
    }
  }
}

TEST_CASE("packed weights: bf16 rows are stored in the pair order and read back in k order, by hand",
          "[packed_weights]") {
  // K = 40: one whole block of 32 (positions 2j <- k = j, 2j + 1 <- k = 16 + j), then k = 32..39 in place.
  const int64_t K = 40;
  std::vector<float> w(K);
  for (int64_t k = 0; k < K; ++k) w[k] = static_cast<float>(k);  // exact in bf16
  std::vector<uint16_t> bits(K);
  kernels::pack_rows_bf16(w.data(), 1, K, bits.data());
  for (int64_t j = 0; j < 16; ++j) {
    CHECK(kernels::bfloat16_value(bits[2 * j]) == static_cast<float>(j));
    CHECK(kernels::bfloat16_value(bits[2 * j + 1]) == static_cast<float>(16 + j));
  }
  for (int64_t k = 32; k < K; ++k) CHECK(kernels::bfloat16_value(bits[k]) == static_cast<float>(k));
  const PackedWeight p(Tensor::from_vector(w, {1, K}), WeightType::BFloat16);
  std::vector<float> row(K);
  p.row(0, row.data());
  CHECK(row == w);
}

TEST_CASE("packed weights: bf16 AMX tiles hold W in tdpbf16ps's B layout, padded with zeros, by hand",
          "[packed_weights]") {
  // N = 17, K = 40: two output tiles (the second holds row 16 and 15 rows of zeros) x two steps
  // of 32 k (the second holds k = 32..39 and zeros). W[n, k] has the bits 0x3F80 + 40 n + k, so
  // each place tells which weight it holds: tile (t, b) place 32 i + 2 j + p = W[16 t + j, 32 b + 2 i + p].
  const int64_t N = 17, K = 40;
  std::vector<float> w(N * K);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) w[n * K + k] = kernels::bfloat16_value(static_cast<uint16_t>(0x3F80 + 40 * n + k));
  }
  REQUIRE(kernels::bf16_tiles_size(N, K) == 32 * 64);
  std::vector<uint16_t> tiles(static_cast<size_t>(kernels::bf16_tiles_size(N, K)), 0xFFFF);
  kernels::pack_tiles_bf16(w.data(), N, K, tiles.data());
  for (int64_t t = 0; t < 2; ++t) {
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t i = 0; i < 16; ++i) {
        for (int64_t j = 0; j < 16; ++j) {
          for (int64_t p = 0; p < 2; ++p) {
            const int64_t n = 16 * t + j, k = 32 * b + 2 * i + p;
            const uint16_t want = n < N && k < K ? static_cast<uint16_t>(0x3F80 + 40 * n + k) : 0;
            INFO("tile " << t << ", " << b << " place " << i << ", " << j << ", " << p);
            CHECK(tiles[(t * 2 + b) * 512 + 32 * i + 2 * j + p] == want);
          }
        }
      }
    }
  }
  std::vector<float> row(K);
  for (int64_t n : {0, 5, 16}) {
    kernels::unpack_row_tiles_bf16(tiles.data(), K, n, row.data());
    CHECK(std::equal(row.begin(), row.end(), w.begin() + n * K));
  }
}

TEST_CASE("packed weights: bf16 on AMX tiles, M = 1..40 and K, N tails: float64 on rounded x, one row alone, any column range",
          "[packed_weights]") {
  if (!kernels::bf16_tiles_available()) {
    WARN("no AMX-BF16 on this CPU (or EMBER_MAX_ISA caps it): bf16 takes the widened path, checked above");
    return;
  }
  for (const int64_t K : {5, 32, 48, 200, 1030}) {
    for (const int64_t M : {1, 2, 15, 16, 17, 40}) check_shape(WeightType::BFloat16, M, 37, K, 1e-5);
  }
  check_shape(WeightType::BFloat16, 300, 70, 96, 1e-5);  // past a chunk of 256 rows
  // Threads: one and two give the same bits, and a column range cut inside an output tile
  // writes nothing outside it.
  const int64_t M = 9, N = 100, K = 64;
  const auto x = values(M * K, 21), wf = values(N * K, 22), b = values(N, 23);
  const PackedWeight w(Tensor::from_vector(wf, {N, K}), WeightType::BFloat16);
  REQUIRE(w.bf16_tiles());
  const int saved = omp_get_max_threads();
  std::vector<float> one(static_cast<size_t>(M * N)), two(one.size(), -7.0f);
  omp_set_num_threads(1);
  w.matmul(M, x.data(), K, b.data(), one.data(), N);
  omp_set_num_threads(2);
  w.matmul(M, x.data(), K, b.data(), two.data(), N, 3, N - 5);
  omp_set_num_threads(saved);
  // EMBER_MAX_ISA counts when the weights are converted: set after, the tiles still run.
  const char* cap = std::getenv("EMBER_MAX_ISA");
  const std::string saved_cap = cap ? cap : "";
  setenv("EMBER_MAX_ISA", "avx2", 1);
  std::vector<float> capped(one.size());
  w.matmul(M, x.data(), K, b.data(), capped.data(), N);
  if (cap) {
    setenv("EMBER_MAX_ISA", saved_cap.c_str(), 1);
  } else {
    unsetenv("EMBER_MAX_ISA");
  }
  CHECK(std::memcmp(capped.data(), one.data(), one.size() * 4) == 0);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      INFO("row " << m << " output " << n);
      if (n < 3 || n >= N - 5) {
        CHECK(two[m * N + n] == -7.0f);
      } else {
        CHECK(two[m * N + n] == one[m * N + n]);
      }
    }
  }
}
