// NF4 weights (core/kernels/nf4.h) and the nf4_linear op: codes, packing and
// absmaxes against values worked out by hand here, partial and all-zero
// blocks, nf4-dq's absmax reconstruction, the round-trip error bound, the op
// against a plain loop, its gradcheck w.r.t. x, and the stored byte counts.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/kernels/nf4.h"

using namespace ember;
using kernels::kNf4Codes;
using kernels::Nf4Tensor;

namespace {

std::vector<uint8_t> all_codes(const Nf4Tensor& q) {
  std::vector<uint8_t> out;
  for (int64_t i = 0; i < q.numel(); ++i) out.push_back(q.code(i));
  return out;
}

}  // namespace

TEST_CASE("nf4: the code table is bitsandbytes'", "[nf4]") {
  CHECK(kNf4Codes[0] == -1.0f);
  CHECK(kNf4Codes[1] == -0.6961928009986877f);
  CHECK(kNf4Codes[6] == -0.09105003625154495f);
  CHECK(kNf4Codes[7] == 0.0f);
  CHECK(kNf4Codes[8] == 0.07958029955625534f);
  CHECK(kNf4Codes[14] == 0.7229568362236023f);
  CHECK(kNf4Codes[15] == 1.0f);
}

TEST_CASE("nf4: nearest code, ties to the lower code", "[nf4]") {
  CHECK(kernels::nf4_nearest_code(-1.0) == 0);
  CHECK(kernels::nf4_nearest_code(0.0) == 7);
  CHECK(kernels::nf4_nearest_code(1.0) == 15);
  const double mid = (double(kNf4Codes[7]) + double(kNf4Codes[8])) / 2;  // 0.0397901...
  CHECK(kernels::nf4_nearest_code(mid) == 7);
  CHECK(kernels::nf4_nearest_code(std::nextafter(mid, 1.0)) == 8);
  const double mid_top = (double(kNf4Codes[14]) + double(kNf4Codes[15])) / 2;
  CHECK(kernels::nf4_nearest_code(mid_top) == 14);
  CHECK(kernels::nf4_nearest_code(std::nextafter(mid_top, 2.0)) == 15);
}

TEST_CASE("nf4: codes, packing and absmax of a hand-made block", "[nf4]") {
  // absmax 2; w / 2 = [0.25, -0.5, 0.125, 0.05, -0.15, 0.45, 0, -1] -> nearest codes:
  // 0.25 -> 0.2461 (10), -0.5 -> -0.5251 (2), 0.125 -> 0.1609 (9; 0.0796 is 0.045 away),
  // 0.05 -> 0.0796 (8; 0 is 0.05 away), -0.15 -> -0.1848 (5), 0.45 -> 0.4407 (12),
  // 0 -> 0 (7), -1 -> -1 (0).
  const Tensor w = Tensor::from_vector<float>({0.5f, -1, 0.25f, 0.1f, -0.3f, 0.9f, 0, -2}, {2, 4});
  const Nf4Tensor q = kernels::nf4_quantize(w);
  CHECK(q.shape == Shape{2, 4});
  REQUIRE(q.absmax == std::vector<float>{2.0f});
  CHECK(all_codes(q) == std::vector<uint8_t>{10, 2, 9, 8, 5, 12, 7, 0});
  // Even element in the high nibble.
  CHECK(q.codes == std::vector<uint8_t>{0xA2, 0x98, 0x5C, 0x70});
  const std::vector<float> back = kernels::nf4_dequantize(q).to_vector<float>();
  const std::vector<int> expect_codes{10, 2, 9, 8, 5, 12, 7, 0};
  for (size_t i = 0; i < back.size(); ++i) CHECK(back[i] == kNf4Codes[expect_codes[i]] * 2.0f);
}

TEST_CASE("nf4: a partial last block and an odd element count", "[nf4]") {
  std::vector<float> v(69);
  for (int i = 0; i < 64; ++i) v[i] = 0.01f * float(i - 20);  // absmax 0.43 (i = 63)
  const std::vector<float> tail{0, 3, -1.5f, 0, 0.75f};       // / 3: 0, 1, -0.5, 0, 0.25
  std::copy(tail.begin(), tail.end(), v.begin() + 64);
  const Nf4Tensor q = kernels::nf4_quantize(Tensor::from_vector<float>(v));
  REQUIRE(q.absmax.size() == 2);
  CHECK(q.absmax[0] == 0.01f * 43);
  CHECK(q.absmax[1] == 3.0f);
  REQUIRE(q.codes.size() == 35);
  CHECK(q.code(63) == 15);
  CHECK(q.codes[32] == 0x7F);  // elements 64, 65: codes 7, 15
  CHECK(q.codes[33] == 0x27);  // 66, 67: codes 2 (-0.5 -> -0.5251), 7
  CHECK(q.codes[34] == 0xA0);  // 68: code 10 (0.25 -> 0.2461); the unused low nibble 0
  const Tensor back = kernels::nf4_dequantize(q);
  CHECK(back.at({66}) == double(kNf4Codes[2] * 3.0f));
  CHECK(back.at({68}) == double(kNf4Codes[10] * 3.0f));
}

TEST_CASE("nf4: an all-zero block stores code 7 and dequantizes to 0", "[nf4]") {
  std::vector<float> v(128, 0.0f);
  v[100] = 5;
  for (bool dq : {false, true}) {
    const Nf4Tensor q = kernels::nf4_quantize(Tensor::from_vector<float>(v), dq);
    for (int i = 0; i < 32; ++i) CHECK(q.codes[i] == 0x77);
    const std::vector<float> back = kernels::nf4_dequantize(q).to_vector<float>();
    for (int i = 0; i < 64; ++i) REQUIRE(back[i] == 0.0f);
    CHECK(back[100] == (dq ? q.block_absmax(1) : 5.0f));
  }
  CHECK(kernels::nf4_quantize(Tensor::from_vector<float>(v)).absmax[0] == 0.0f);
}

TEST_CASE("nf4-dq: absmax reconstruction by hand", "[nf4]") {
  // Three blocks with absmax 1, 2, 4.5: m = 2.5, c = -1.5, -0.5, 2, scale = 2 / 127,
  // q = round(-95.25) = -95, round(-31.75) = -32, 127.
  std::vector<float> v(3 * 64, 0.125f);
  v[5] = -1;
  v[64 + 7] = 2;
  v[128 + 63] = -4.5f;
  const Nf4Tensor q = kernels::nf4_quantize(Tensor::from_vector<float>(v), true);
  REQUIRE(q.double_quant());
  CHECK(q.absmax.empty());
  CHECK(q.absmax_mean == 2.5f);
  REQUIRE(q.absmax_scale.size() == 1);
  CHECK(q.absmax_scale[0] == float(2.0 / 127));
  CHECK(q.absmax_q == std::vector<int8_t>{-95, -32, 127});
  const float scale = float(2.0 / 127);
  CHECK(q.block_absmax(0) == -95.0f * scale + 2.5f);
  CHECK(q.block_absmax(1) == -32.0f * scale + 2.5f);
  CHECK(q.block_absmax(2) == 127.0f * scale + 2.5f);
  CHECK(q.block_absmax(0) == Approx(1.0).margin(scale / 2));
  // The codes are those of plain nf4 (chosen with the exact absmax).
  CHECK(q.codes == kernels::nf4_quantize(Tensor::from_vector<float>(v)).codes);
}

TEST_CASE("nf4-dq: equal absmaxes give scale 0 and q 0, 257 blocks give 2 scales", "[nf4]") {
  std::vector<float> v(257 * 64, 0.0f);
  for (size_t b = 0; b < 257; ++b) v[b * 64] = 0.75f;
  const Nf4Tensor q = kernels::nf4_quantize(Tensor::from_vector<float>(v), true);
  CHECK(q.absmax_scale == std::vector<float>{0.0f, 0.0f});
  CHECK(q.absmax_q == std::vector<int8_t>(257, 0));
  CHECK(q.block_absmax(256) == 0.75f);
}

TEST_CASE("nf4: round-trip error within half the largest code gap times absmax", "[nf4]") {
  double max_gap = 0;
  for (size_t k = 0; k + 1 < kNf4Codes.size(); ++k) {
    max_gap = std::max(max_gap, double(kNf4Codes[k + 1]) - double(kNf4Codes[k]));
  }
  CHECK(max_gap == Approx(1 - 0.6961928009986877));  // between -1 and the next code
  const Tensor w = Tensor::randn({37, 50}, 11);      // 1850 elements: a partial last block
  const Nf4Tensor q = kernels::nf4_quantize(w);
  const std::vector<float> x = w.to_vector<float>();
  const std::vector<float> back = kernels::nf4_dequantize(q).to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    const double bound = max_gap / 2 * q.absmax[i / 64] * (1 + 1e-6);
    REQUIRE(std::abs(double(x[i]) - double(back[i])) <= bound);
  }
}

TEST_CASE("nf4_linear: forward against a plain loop, several tiles", "[nf4][autograd]") {
  const int64_t R = 3, O = 40, C = 3000;  // 21 rows of W per tile: tiles of 21 and 19
  const Tensor x = Tensor::randn({1, R, C}, 21);
  auto w =
      std::make_shared<const Nf4Tensor>(kernels::nf4_quantize(Tensor::randn({O, C}, 22), true));
  const Tensor wd = kernels::nf4_dequantize(*w, DType::Float64);
  const Variable xv(x, true);
  const Variable y = nf4_linear(xv, w);
  REQUIRE(y.shape() == Shape{1, R, O});
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t o = 0; o < O; ++o) {
      double ref = 0;
      for (int64_t c = 0; c < C; ++c) ref += x.at({0, r, c}) * wd.at({o, c});
      REQUIRE(y.data().at({0, r, o}) == Approx(ref).margin(1e-4));
    }
  }
  sum(y).backward();  // dx[r, c] = sum_o W[o, c]
  for (int64_t c = 0; c < C; c += 7) {
    double ref = 0;
    for (int64_t o = 0; o < O; ++o) ref += wd.at({o, c});
    REQUIRE(xv.grad().at({0, 1, c}) == Approx(ref).margin(1e-4));
  }
}

TEST_CASE("nf4_linear: gradcheck w.r.t. x in float64", "[nf4][autograd][gradcheck]") {
  auto w = std::make_shared<const Nf4Tensor>(kernels::nf4_quantize(Tensor::randn({5, 70}, 31)));
  const Variable x(Tensor::randn({2, 3, 70}, 32, 0, DType::Float64), true);
  const GradcheckResult r =
      gradcheck([w](const std::vector<Variable>& in) { return nf4_linear(in[0], w); }, {x});
  INFO(r.message);
  CHECK(r.ok);
}

TEST_CASE("nf4: stored bytes of a [768, 3072] weight", "[nf4]") {
  const int64_t n = 768 * 3072, blocks = n / 64;  // 36864 blocks, 144 groups of 256
  const Tensor w = Tensor::randn({768, 3072}, 41, 0, DType::Float32, 0, 0.02);
  const Nf4Tensor q = kernels::nf4_quantize(w);
  CHECK(q.codes.size() == size_t(n / 2));
  CHECK(q.nbytes() == n / 2 + 4 * blocks);  // 1327104
  CHECK(double(q.nbytes()) / double(n) == 0.5625);
  const Nf4Tensor dq = kernels::nf4_quantize(w, true);
  CHECK(dq.absmax_q.size() == size_t(blocks));
  CHECK(dq.absmax_scale.size() == 144);
  CHECK(dq.nbytes() == n / 2 + blocks + 4 * 144 + 4);  // 1217092
  CHECK(double(dq.nbytes()) / double(n) == Approx(0.51587).margin(1e-5));
}

using kernels::nf4_columns;
using kernels::nf4_dequantize;
using kernels::nf4_quantize;
using kernels::nf4_rows;

// Tensor-parallel shards of a quantized weight (kernels::nf4_rows / nf4_columns): the shard's
// dequantized values are the whole's dequantized values at its elements, bit for bit.
static void check_shard(const Nf4Tensor& whole, const Nf4Tensor& shard, bool rows, int64_t first) {
  const Tensor w = nf4_dequantize(whole), s = nf4_dequantize(shard);
  const Tensor want = w.narrow(rows ? 0 : 1, first, s.size(rows ? 0 : 1)).contiguous();
  CHECK(s.to_vector<float>() == want.to_vector<float>());
}

TEST_CASE("nf4 shards: rows and columns keep the whole's codes and absmaxes", "[nf4]") {
  for (bool dq : {false, true}) {
    INFO((dq ? "nf4-dq" : "nf4"));
    // in 16: a block holds 4 rows; a column half keeps 32-element parts of them
    const Tensor a = Tensor::randn({16, 16}, 7, 0, DType::Float32);
    const Nf4Tensor qa = nf4_quantize(a, dq);
    for (int64_t t = 0; t < 2; ++t) {
      check_shard(qa, nf4_rows(qa, 8 * t, 8, "w"), true, 8 * t);
      const Nf4Tensor c = nf4_columns(qa, 8 * t, 8, "w");
      CHECK(c.block == 32);
      CHECK(!c.double_quant());
      check_shard(qa, c, false, 8 * t);
    }
    // in 256, 4 ranks: every row part is a whole block; 1000 blocks (4 int8 scales under dq)
    const Tensor b = Tensor::randn({250, 256}, 8, 0, DType::Float32);
    const Nf4Tensor qb = nf4_quantize(b, dq);
    for (int64_t t = 0; t < 4; ++t) check_shard(qb, nf4_columns(qb, 64 * t, 64, "w"), false, 64 * t);
    check_shard(qb, nf4_rows(qb, 125, 125, "w"), true, 125);
  }
  // Blocks that straddle the split: refused, naming the tensor.
  const Nf4Tensor q = nf4_quantize(Tensor::randn({8, 48}, 9, 0, DType::Float32));
  CHECK_THROWS_WITH(nf4_columns(q, 24, 24, "--tp 2: model.layers.0.self_attn.o_proj.weight"),
                    "--tp 2: model.layers.0.self_attn.o_proj.weight: the NF4 blocks of 64 elements "
                    "of [8, 48] do not align with its columns [24, 48), so the shard cannot keep "
                    "the one-process quantization");
  CHECK_THROWS_WITH(nf4_rows(q, 1, 7, "w"), Catch::Contains("do not align with its rows [1, 8)"));
}
