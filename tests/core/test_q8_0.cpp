// Q8_0 blocks (core/quant/q8_0.h) against values computed by hand: the half scale's
// bits, ggml's round-half-away-from-zero, zero blocks, negative amax, and the
// float <-> half conversions at their rounding and range edges.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/quant/q8_0.h"

using ember::quant::BlockQ8_0;
using ember::quant::dequantize_row_q8_0;
using ember::quant::fp16_bits;
using ember::quant::fp16_value;
using ember::quant::quantize_row_q8_0;

TEST_CASE("fp16_bits rounds to nearest even and saturates to infinity", "[q8_0]") {
  CHECK(fp16_bits(1.0f) == 0x3C00);
  CHECK(fp16_bits(-2.0f) == 0xC000);
  CHECK(fp16_bits(0.0f) == 0x0000);
  CHECK(fp16_bits(-0.0f) == 0x8000);
  CHECK(fp16_bits(65504.0f) == 0x7BFF);                 // the largest half
  CHECK(fp16_bits(65519.0f) == 0x7BFF);                 // below the midpoint 65520
  CHECK(fp16_bits(65520.0f) == 0x7C00);                 // tie: the even neighbour is 2^16 = inf
  CHECK(fp16_bits(1.0f + 0x1p-11f) == 0x3C00);          // tie between 1 and 1 + 2^-10: even 1
  CHECK(fp16_bits(1.0f + 3 * 0x1p-11f) == 0x3C02);      // tie between 0x3C01 and 0x3C02: even
  CHECK(fp16_bits(0x1p-24f) == 0x0001);                 // the smallest subnormal
  CHECK(fp16_bits(0x1p-25f) == 0x0000);                 // tie between 0 and 2^-24: even 0
  CHECK(fp16_bits(3 * 0x1p-25f) == 0x0002);             // 1.5 steps: tie to even 2
  CHECK(fp16_bits(0x1p-14f - 0x1p-26f) == 0x0400);      // rounds up into the smallest normal
  CHECK(fp16_bits(INFINITY) == 0x7C00);
  const uint16_t nan = fp16_bits(NAN);
  CHECK((nan & 0x7C00) == 0x7C00);
  CHECK((nan & 0x03FF) != 0);
}

TEST_CASE("fp16_value is exact", "[q8_0]") {
  CHECK(fp16_value(0x3C00) == 1.0f);
  CHECK(fp16_value(0xC000) == -2.0f);
  CHECK(fp16_value(0x7BFF) == 65504.0f);
  CHECK(fp16_value(0x0001) == 0x1p-24f);
  CHECK(fp16_value(0x83FF) == -1023 * 0x1p-24f);
  CHECK(fp16_value(0x3008) == 129.0f / 1024.0f);  // 2^-3 * (1 + 8/1024)
  CHECK(std::isinf(fp16_value(0x7C00)));
  CHECK(std::isnan(fp16_value(0x7E00)));
}

namespace {

std::vector<BlockQ8_0> quantize(const std::vector<float>& x) {
  std::vector<BlockQ8_0> blocks(x.size() / 32);
  quantize_row_q8_0(x.data(), blocks.data(), static_cast<int64_t>(x.size()));
  return blocks;
}

}  // namespace

TEST_CASE("quantize_row_q8_0 block with amax 16: d = 16/127 stored as half 0x3008", "[q8_0]") {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);  // -16 .. 15
  const BlockQ8_0 b = quantize(x)[0];
  // 16/127 = 0.12598...: 2^-3 * 1.007874, mantissa 0.007874 * 1024 = 8.06 -> 8.
  CHECK(b.d == 0x3008);
  // q = round(x * 127 / 16): -16 -> -127, -1 -> -7.94 -> -8, 1 -> 8, 2 -> 15.875 -> 16,
  // 15 -> 119.06 -> 119, 0 -> 0.
  CHECK(b.qs[0] == -127);
  CHECK(b.qs[15] == -8);
  CHECK(b.qs[16] == 0);
  CHECK(b.qs[17] == 8);
  CHECK(b.qs[18] == 16);
  CHECK(b.qs[31] == 119);
  std::vector<float> y(32);
  dequantize_row_q8_0(&b, y.data(), 32);
  CHECK(y[31] == 119.0f * 129.0f / 1024.0f);  // 14.9912109375, from the half scale
  CHECK(y[0] == -127.0f * 129.0f / 1024.0f);
}

TEST_CASE("quantize_row_q8_0 rounds ties away from zero", "[q8_0]") {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // amax 127: d = 1 exactly, id = 1
  x[1] = 0.5f;
  x[2] = -0.5f;
  x[3] = 1.5f;
  x[4] = 2.5f;    // nearest-even would give 2
  x[5] = -2.5f;
  x[6] = 0.49f;
  x[7] = -126.5f;
  const BlockQ8_0 b = quantize(x)[0];
  CHECK(b.d == 0x3C00);
  CHECK(b.qs[0] == 127);
  CHECK(b.qs[1] == 1);
  CHECK(b.qs[2] == -1);
  CHECK(b.qs[3] == 2);
  CHECK(b.qs[4] == 3);
  CHECK(b.qs[5] == -3);
  CHECK(b.qs[6] == 0);
  CHECK(b.qs[7] == -127);
  CHECK(b.qs[8] == 0);
}

TEST_CASE("quantize_row_q8_0 zeros, a negative amax, and blocks independent", "[q8_0]") {
  std::vector<float> x(96, 0.0f);
  // block 1: amax from -254, d = 2 (half 0x4000); 127 * 0.5 = 63.5 is a tie -> 64.
  x[32] = -254.0f;
  x[33] = 127.0f;
  x[34] = -1.0f;  // -0.5 -> -1
  x[35] = 3.0f;   // 1.5 -> 2
  // block 2: amax 0.25 (exact), d = 0.25/127 = 0.0019685: 2^-9 * 1.00787 -> half 0x1808.
  x[64] = 0.25f;
  x[65] = -0.1f;    // -0.1 * 508 = -50.8 -> -51
  const std::vector<BlockQ8_0> b = quantize(x);
  CHECK(b[0].d == 0x0000);
  for (int j = 0; j < 32; ++j) CHECK(b[0].qs[j] == 0);
  CHECK(b[1].d == 0x4000);
  CHECK(b[1].qs[0] == -127);
  CHECK(b[1].qs[1] == 64);
  CHECK(b[1].qs[2] == -1);
  CHECK(b[1].qs[3] == 2);
  CHECK(b[1].qs[4] == 0);
  CHECK(b[2].d == 0x1808);
  CHECK(b[2].qs[0] == 127);
  CHECK(b[2].qs[1] == -51);
  std::vector<float> y(96);
  dequantize_row_q8_0(b.data(), y.data(), 96);
  CHECK(y[0] == 0.0f);
  CHECK(y[32] == -254.0f);
  CHECK(y[33] == 128.0f);
  CHECK(y[64] == 127.0f * 0x1p-9f * (1.0f + 8.0f / 1024.0f));
}

TEST_CASE("a Q8_0 block is 34 bytes laid out as ggml reads them", "[q8_0]") {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = -1.0f;
  const BlockQ8_0 b = quantize(x)[0];
  unsigned char bytes[34];
  std::memcpy(bytes, &b, 34);
  CHECK(bytes[0] == 0x00);  // d = 0x3C00, little-endian
  CHECK(bytes[1] == 0x3C);
  CHECK(bytes[2] == 127);
  CHECK(bytes[3] == 0xFF);  // -1
}

TEST_CASE("quantize_row_q8_0 refuses a length not a multiple of 32", "[q8_0]") {
  std::vector<float> x(40, 1.0f);
  std::vector<BlockQ8_0> b(2);
  CHECK_THROWS_AS(quantize_row_q8_0(x.data(), b.data(), 40), ember::Error);
}
