// bfloat16 conversion and the bfloat16 matmul kernel. Conversion against a
// nearest-value search in double (ties to even) and hand-worked bit patterns;
// the matmul (float32 output) against a triple loop in double over the
// bfloat16-rounded inputs: products of bfloat16 values are exact in float32,
// so the only error left is float32 accumulation.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

#include "core/kernels/bf16.h"
#include "core/kernels/matmul.h"
#include "matmul_testing.h"

using namespace ember;
using kernels::bfloat16_to_float32;
using kernels::matmul;
using kernels::to_bfloat16;

namespace {

using testing::for_each_odd_matmul;
using testing::max_abs_diff;
using testing::reference_matmul;

std::vector<uint16_t> bits_of(const Tensor& bf16) {
  REQUIRE(bf16.dtype() == DType::BFloat16);
  REQUIRE(bf16.is_contiguous());
  const auto* p = static_cast<const uint16_t*>(bf16.raw_data());
  return std::vector<uint16_t>(p, p + bf16.numel());
}

uint16_t round_one(uint32_t float_bits) {
  const Tensor t = Tensor::from_vector(std::vector<float>{std::bit_cast<float>(float_bits)});
  return bits_of(to_bfloat16(t))[0];
}

double widen(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// The bfloat16 nearest to finite x, ties to the even bit pattern, by comparing
// the two candidates around x in double.
uint16_t nearest(float x) {
  const uint16_t lo = static_cast<uint16_t>(std::bit_cast<uint32_t>(x) >> 16);  // toward zero
  const uint16_t hi = static_cast<uint16_t>(lo + 1);                            // away from zero
  const double dlo = std::abs(double(x) - widen(lo)), dhi = std::abs(double(x) - widen(hi));
  if (dlo != dhi) return dlo < dhi ? lo : hi;
  return (lo & 1) ? hi : lo;
}

// Inputs in [-1, 1): float32 accumulation of K exact products.
double f32_tolerance(int64_t K) { return 2e-6 * static_cast<double>(K + 1); }

Tensor uniform(const Shape& shape, uint64_t seed) { return Tensor::rand(shape, seed, 0, DType::Float32, -1, 1); }

// A float32 operand and its bfloat16 copy widened back (the values the kernel multiplies).
struct Operand {
  Tensor bf16, rounded;
};
Operand operand(const Shape& shape, uint64_t seed) {
  const Tensor h = to_bfloat16(uniform(shape, seed));
  return {h, bfloat16_to_float32(h)};
}

}  // namespace

TEST_CASE("to_bfloat16 rounds to nearest, ties to even, on hand-worked bit patterns", "[bf16]") {
  CHECK(round_one(0x3F800000) == 0x3F80);  // 1
  CHECK(round_one(0x3F808000) == 0x3F80);  // 1 + 2^-8: tie, 0x3F80 is even
  CHECK(round_one(0x3F818000) == 0x3F82);  // 1 + 3 * 2^-8: tie, 0x3F81 is odd
  CHECK(round_one(0x3F808001) == 0x3F81);  // just above the tie
  CHECK(round_one(0x3F807FFF) == 0x3F80);  // just below the tie
  CHECK(round_one(0xC0200000) == 0xC020);  // -2.5
  CHECK(round_one(0xBF818000) == 0xBF82);  // negative tie
  CHECK(round_one(0x7F7FFFFF) == 0x7F80);  // float max rounds up to inf
  CHECK(round_one(0x7F7F7FFF) == 0x7F7F);  // bf16 max stays finite
  CHECK(round_one(0x7F800000) == 0x7F80);  // inf
  CHECK(round_one(0xFF800000) == 0xFF80);  // -inf
  CHECK(round_one(0x00008000) == 0x0000);  // denormal tie to even zero
  CHECK(round_one(0x00018000) == 0x0002);  // denormal tie up to even
  CHECK(round_one(0x80000000) == 0x8000);  // -0
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x7FFFFFFFu}) {
    const uint16_t h = round_one(nan);
    CAPTURE(nan, h);
    CHECK((h & 0x7F80) == 0x7F80);  // exponent all ones
    CHECK((h & 0x007F) != 0);       // and a mantissa: still NaN
    CHECK((h & 0x8000) == ((nan >> 16) & 0x8000));
  }
}

TEST_CASE("to_bfloat16 matches a nearest-value search over many magnitudes, and widening is exact", "[bf16]") {
  // 300k values (past the threaded size), spread over exponents 2^-20 .. 2^20.
  const int64_t n = 300001;
  const auto mant = Tensor::rand({n}, 7, 0, DType::Float32, -1, 1).to_vector<float>();
  const auto expo = Tensor::rand({n}, 8, 0, DType::Float32, -20, 20).to_vector<float>();
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::ldexp(mant[i], static_cast<int>(expo[i]));
  const Tensor h = to_bfloat16(Tensor::from_vector(v));
  CHECK(h.shape() == Shape{n});
  const auto bits = bits_of(h);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += bits[i] != nearest(v[i]);
  CHECK(wrong == 0);
  const auto back = bfloat16_to_float32(h).to_vector<float>();
  int64_t inexact = 0;
  for (int64_t i = 0; i < n; ++i) inexact += back[i] != static_cast<float>(widen(bits[i]));
  CHECK(inexact == 0);
}

TEST_CASE("to_bfloat16 of a strided view is a contiguous copy of its values", "[bf16]") {
  const Tensor x = uniform({5, 7}, 3);
  const Tensor h = to_bfloat16(x.transpose(0, 1));
  CHECK(h.shape() == Shape{7, 5});
  CHECK(h.is_contiguous());
  const Tensor back = bfloat16_to_float32(h);
  for (int64_t i = 0; i < 7; ++i)
    for (int64_t j = 0; j < 5; ++j) CHECK(back.at({i, j}) == widen(nearest(static_cast<float>(x.at({j, i})))));
  CHECK_THROWS_WITH(to_bfloat16(x.to(DType::Float64)), Catch::Contains("expected a float32 tensor"));
  CHECK_THROWS_WITH(h.to(DType::Float32), Catch::Contains("bfloat16"));
}

TEST_CASE("bf16 matmul matches a triple loop on the rounded inputs for odd sizes and all transposes",
          "[bf16][matmul]") {
  for_each_odd_matmul([&](int64_t M, int64_t N, int64_t K, bool ta, bool tb, uint64_t sa,
                          uint64_t sb) {
    const Operand a = operand(ta ? Shape{K, M} : Shape{M, K}, sa);
    const Operand b = operand(tb ? Shape{N, K} : Shape{K, N}, sb);
    const Tensor c = matmul(a.bf16, b.bf16, ta, tb);
    CHECK(c.shape() == Shape{M, N});
    CHECK(c.dtype() == DType::Float32);
    CHECK(max_abs_diff(c, reference_matmul(a.rounded, b.rounded, ta, tb)) < f32_tolerance(K));
  });
}

TEST_CASE("bf16 matmul over batches: shared 2-D weight, both batched, broadcast batch dims",
          "[bf16][matmul]") {
  for (int flags = 0; flags < 4; ++flags) {
    const bool ta = flags & 1, tb = flags & 2;
    CAPTURE(ta, tb);
    const int64_t M = 19, N = 23, K = 37;
    const Shape sa = ta ? Shape{K, M} : Shape{M, K}, sb = tb ? Shape{N, K} : Shape{K, N};
    auto with = [](Shape batch, const Shape& m) {
      batch.insert(batch.end(), m.begin(), m.end());
      return batch;
    };
    SECTION("x[3, 2, ...] @ W") {
      const Operand a = operand(with({3, 2}, sa), 10), b = operand(sb, 11);
      CHECK(max_abs_diff(matmul(a.bf16, b.bf16, ta, tb), reference_matmul(a.rounded, b.rounded, ta, tb)) <
            f32_tolerance(K));
    }
    SECTION("[4, ...] @ [4, ...]") {
      const Operand a = operand(with({4}, sa), 12), b = operand(with({4}, sb), 13);
      CHECK(max_abs_diff(matmul(a.bf16, b.bf16, ta, tb), reference_matmul(a.rounded, b.rounded, ta, tb)) <
            f32_tolerance(K));
    }
    SECTION("[2, 1, ...] @ [3, ...]") {
      const Operand a = operand(with({2, 1}, sa), 14), b = operand(with({3}, sb), 15);
      CHECK(max_abs_diff(matmul(a.bf16, b.bf16, ta, tb), reference_matmul(a.rounded, b.rounded, ta, tb)) <
            f32_tolerance(K));
    }
  }
}

TEST_CASE("bf16 matmul_into accumulates with alpha and beta, also into a strided output",
          "[bf16][matmul]") {
  const Operand a = operand({31, 45}, 20), b = operand({45, 17}, 21);
  const Tensor ref = reference_matmul(a.rounded, b.rounded, false, false);
  const Tensor c0 = uniform({31, 17}, 22);
  Tensor c = c0.clone();
  kernels::matmul_into(c, a.bf16, b.bf16, false, false, 0.5, 1.0);
  const auto r = ref.to_vector<double>(), c0v = c0.to_vector<double>();
  std::vector<double> e(r.size()), twice(r.size());
  for (size_t i = 0; i < r.size(); ++i) e[i] = 0.5 * r[i] + c0v[i], twice[i] = 2 * c0v[i];
  const Tensor expect = Tensor::from_vector(e, {31, 17});
  CHECK(max_abs_diff(c, expect) < f32_tolerance(45));
  Tensor ct_storage = c0.transpose(0, 1).contiguous();  // [17, 31]
  Tensor ct = ct_storage.transpose(0, 1);               // [31, 17] view with strided rows
  kernels::matmul_into(ct, a.bf16, b.bf16, false, false, 0.5, 1.0);
  CHECK(max_abs_diff(ct, expect) < f32_tolerance(45));
  // K = 0: C = beta * C.
  Tensor z = c0.clone();
  kernels::matmul_into(z, to_bfloat16(Tensor::zeros({31, 0})), to_bfloat16(Tensor::zeros({0, 17})), false,
                       false, 1.0, 2.0);
  CHECK(max_abs_diff(z, Tensor::from_vector(twice, {31, 17})) == 0);
}

TEST_CASE("bf16 and float32 primitives are cached apart, mixed operands are errors", "[bf16][matmul]") {
  const Tensor a = uniform({13, 29}, 30), b = uniform({29, 11}, 31);
  matmul(a, b);
  const int64_t after_f32 = kernels::matmul_primitive_cache_size();
  const Operand a16 = operand({13, 29}, 30), b16 = operand({29, 11}, 31);
  // oneDNN 2.6 has bf16 matmuls from avx512_core up; below (an ISA cap, tests/isa) the
  // reference loop runs and nothing is cached.
  const bool onednn_bf16 = std::string(kernels::onednn_cpu_isa()).starts_with("avx512_core");
  const Tensor c = matmul(a16.bf16, b16.bf16);
  CHECK(kernels::matmul_primitive_cache_size() == after_f32 + (onednn_bf16 ? 1 : 0));
  matmul(a16.bf16, b16.bf16);
  CHECK(kernels::matmul_primitive_cache_size() == after_f32 + (onednn_bf16 ? 1 : 0));
  CHECK(max_abs_diff(c, reference_matmul(a16.rounded, b16.rounded, false, false)) < f32_tolerance(29));
  CHECK_THROWS_WITH(matmul(a16.bf16, b), Catch::Contains("dtypes differ"));
  Tensor out16 = Tensor::empty({13, 11}, DType::BFloat16);
  CHECK_THROWS_WITH(kernels::matmul_into(out16, a16.bf16, b16.bf16), Catch::Contains("c is bfloat16"));
  const Tensor stepped = to_bfloat16(uniform({13, 58}, 32)).slice(1, 0, 58, 2);
  CHECK_THROWS_WITH(matmul(stepped, b16.bf16), Catch::Contains("row- or column-major"));
}

TEST_CASE("bf16_matmul_native agrees with the CPU flags the kernel reports", "[bf16][matmul]") {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line) && line.rfind("flags", 0) != 0) {
  }
  if (line.empty()) return;  // no /proc/cpuinfo: nothing independent to compare with
  const bool flags = line.find(" avx512_bf16") != std::string::npos || line.find(" amx_bf16") != std::string::npos;
  // A cap below bf16 (ONEDNN_MAX_CPU_ISA, or EMBER_MAX_ISA, which ember passes on to oneDNN) turns it off.
  const char* onednn_cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  const char* ember_cap = std::getenv("EMBER_MAX_ISA");
  const std::string cap = onednn_cap ? onednn_cap : ember_cap ? ember_cap : "";
  const bool capped = !cap.empty() && cap != "ALL" && cap.find("BF16") == std::string::npos &&
                      cap.find("AMX") == std::string::npos;
  CHECK(kernels::bf16_matmul_native() == (flags && !capped));
}
