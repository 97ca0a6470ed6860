// The gradcheck table: every differentiable op in autograd/ops.h, in float64,
// with broadcasting, views, non-contiguous inputs and repeated indices. One
// row per case; each runs in its own DYNAMIC_SECTION so a failure names it.
// Inputs stay away from non-differentiable points (ties, zeros, log of <= 0).
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/nf4.h"

using namespace ember;

namespace {

struct Row {
  std::string name;
  GradcheckFn fn;
  std::vector<Variable> inputs;
  GradcheckOptions options = {};
};

using In = const std::vector<Variable>&;

// Standard normal values, float64, requiring grad.
Variable rn(const Shape& shape, uint64_t seed) {
  return Variable(Tensor::randn(shape, seed, 0, DType::Float64), true);
}
// Uniform in [0.5, 2): for log, sqrt, rsqrt, pow bases and denominators.
Variable pos(const Shape& shape, uint64_t seed) {
  return Variable(Tensor::rand(shape, seed, 0, DType::Float64, 0.5, 2.0), true);
}
// A non-contiguous leaf: a [rows, cols] view of a transposed [cols, rows] tensor.
Variable rn_t(int64_t rows, int64_t cols, uint64_t seed) {
  return Variable(Tensor::randn({cols, rows}, seed, 0, DType::Float64).transpose(0, 1), true);
}
// A frozen NF4 weight quantized from standard normal values.
std::shared_ptr<const kernels::Nf4Tensor> nf4_weight(const Shape& shape, uint64_t seed) {
  const Tensor w = Tensor::randn(shape, seed);
  return std::make_shared<const kernels::Nf4Tensor>(kernels::nf4_quantize(w));
}
Tensor ids(const std::vector<int64_t>& values, const Shape& shape) {
  return Tensor::from_vector<int64_t>(values, shape);
}

std::vector<Row> elementwise_rows() {
  return {
      {"add", [](In x) { return x[0] + x[1]; }, {rn({2, 3}, 1), rn({2, 3}, 2)}},
      {"add broadcast [3,1,5] + [4,5]",
       [](In x) { return x[0] + x[1]; },
       {rn({3, 1, 5}, 3), rn({4, 5}, 4)}},
      {"add non-contiguous", [](In x) { return x[0] + x[1]; }, {rn_t(3, 4, 5), rn({3, 4}, 6)}},
      {"sub broadcast [2,3] - [3]", [](In x) { return x[0] - x[1]; }, {rn({2, 3}, 7), rn({3}, 8)}},
      {"mul broadcast [2,3] * [3]", [](In x) { return x[0] * x[1]; }, {rn({2, 3}, 9), rn({3}, 10)}},
      {"mul broadcast [3,1,5] * [4,5]",
       [](In x) { return x[0] * x[1]; },
       {rn({3, 1, 5}, 11), rn({4, 5}, 12)}},
      {"mul same input twice", [](In x) { return x[0] * x[0]; }, {rn({4}, 13)}},
      {"div broadcast", [](In x) { return x[0] / x[1]; }, {rn({2, 3}, 14), pos({2, 1}, 15)}},
      {"pow", [](In x) { return pow(x[0], x[1]); }, {pos({2, 3}, 16), rn({2, 3}, 17)}},
      {"pow broadcast exponent",
       [](In x) { return pow(x[0], x[1]); },
       {pos({2, 3}, 18), rn({3}, 19)}},
      {"maximum", [](In x) { return maximum(x[0], x[1]); }, {rn({3, 4}, 20), rn({3, 4}, 21)}},
      {"maximum broadcast",
       [](In x) { return maximum(x[0], x[1]); },
       {rn({3, 4}, 22), rn({4}, 23)}},
      {"minimum", [](In x) { return minimum(x[0], x[1]); }, {rn({3, 4}, 24), rn({1, 4}, 25)}},
      {"add_scalar", [](In x) { return x[0] + 1.5; }, {rn({2, 3}, 26)}},
      {"mul_scalar", [](In x) { return x[0] * -2.5; }, {rn({2, 3}, 27)}},
      {"div by scalar", [](In x) { return x[0] / 4.0; }, {rn({2, 3}, 28)}},
      {"pow_scalar 2.5", [](In x) { return pow_scalar(x[0], 2.5); }, {pos({2, 3}, 29)}},
      {"pow_scalar -1.5", [](In x) { return pow_scalar(x[0], -1.5); }, {pos({2, 3}, 30)}},
      {"pow_scalar 3 of negatives", [](In x) { return pow_scalar(x[0], 3); }, {rn({2, 3}, 31)}},
      {"rsub_scalar", [](In x) { return 2.0 - x[0]; }, {rn({2, 3}, 32)}},
      {"clamp", [](In x) { return clamp(x[0], -0.5, 0.7); }, {rn({4, 5}, 33)}},
      {"neg", [](In x) { return -x[0]; }, {rn({2, 3}, 34)}},
      {"exp", [](In x) { return exp(x[0]); }, {rn({2, 3}, 35)}},
      {"exp non-contiguous", [](In x) { return exp(x[0]); }, {rn_t(3, 4, 36)}},
      {"log", [](In x) { return log(x[0]); }, {pos({2, 3}, 37)}},
      {"sqrt", [](In x) { return sqrt(x[0]); }, {pos({2, 3}, 38)}},
      {"rsqrt", [](In x) { return rsqrt(x[0]); }, {pos({2, 3}, 39)}},
      {"tanh", [](In x) { return tanh(x[0]); }, {rn({2, 3}, 40)}},
      {"sigmoid", [](In x) { return sigmoid(x[0]); }, {rn({2, 3}, 41)}},
      {"silu", [](In x) { return silu(x[0]); }, {rn({2, 5}, 42)}},
      {"gelu", [](In x) { return gelu(x[0]); }, {rn({2, 5}, 43)}},
      {"gelu_tanh", [](In x) { return gelu_tanh(x[0]); }, {rn({2, 5}, 44)}},
      {"relu", [](In x) { return relu(x[0]); }, {rn({3, 4}, 45)}},
      {"relu non-contiguous", [](In x) { return relu(x[0]); }, {rn_t(3, 4, 46)}},
      {"abs", [](In x) { return abs(x[0]); }, {rn({3, 4}, 47)}},
      {"log_sigmoid", [](In x) { return log_sigmoid(x[0] * 4.0); }, {rn({3, 4}, 188)}},
      {"log1mexp", [](In x) { return log1mexp(-x[0]); }, {pos({3, 4}, 189)}},
      {"log1mexp near 0", [](In x) { return log1mexp(x[0] * -0.01); }, {pos({2, 3}, 190)}},
      {"swiglu", [](In x) { return swiglu(x[0], x[1]); }, {rn({2, 5}, 48), rn({2, 5}, 49)}},
      {"swiglu non-contiguous", [](In x) { return swiglu(x[0], x[1]); }, {rn_t(3, 4, 50), rn({3, 4}, 51)}},
      {"geglu", [](In x) { return geglu(x[0], x[1]); }, {rn({2, 5}, 52), rn({2, 5}, 53)}},
      {"grouped_linear, an empty group",
       [](In x) { return grouped_linear(x[0], {x[1], x[2], x[3]}, {}, {2, 0, 3}); },
       {rn({5, 4}, 54), rn({3, 4}, 55), rn({3, 4}, 56), rn({3, 4}, 57)}},
      {"grouped_linear with biases",
       [](In x) { return grouped_linear(x[0], {x[1], x[2]}, {x[3], x[4]}, {3, 1}); },
       {rn({4, 3}, 58), rn({2, 3}, 59), rn({2, 3}, 60), rn({2}, 61), rn({2}, 62)}},
  };
}

std::vector<Row> reduce_rows() {
  return {
      {"sum all", [](In x) { return sum(x[0]); }, {rn({2, 3, 4}, 50)}},
      {"sum dims {0,2}",
       [](In x) {
         return sum(x[0], {0, 2});
       },
       {rn({2, 3, 4}, 51)}},
      {"sum dim -1 keepdim", [](In x) { return sum(x[0], {-1}, true); }, {rn({2, 3, 4}, 52)}},
      {"sum non-contiguous", [](In x) { return sum(x[0], {1}); }, {rn_t(3, 5, 53)}},
      {"sum then mul (expanded grad)",
       [](In x) { return sum(x[0], {1}, true) * x[1]; },
       {rn({3, 4}, 54), rn({3, 4}, 55)}},
      {"mean dim 1", [](In x) { return mean(x[0], {1}); }, {rn({2, 3, 4}, 56)}},
      {"mean all keepdim", [](In x) { return mean(x[0], {}, true); }, {rn({2, 3, 4}, 57)}},
      {"mean dims {-1,0} keepdim",
       [](In x) {
         return mean(x[0], {-1, 0}, true);
       },
       {rn({2, 3, 4}, 58)}},
      {"amax dim -1", [](In x) { return amax(x[0], {-1}); }, {rn({3, 5}, 59)}},
      {"amax dims {0,2} keepdim",
       [](In x) {
         return amax(x[0], {0, 2}, true);
       },
       {rn({2, 3, 4}, 60)}},
      {"amax all", [](In x) { return amax(x[0]); }, {rn({3, 4}, 61)}},
      {"logsumexp dim -1", [](In x) { return logsumexp(x[0], {-1}); }, {rn({3, 5}, 62)}},
      {"logsumexp dims {0,1} keepdim",
       [](In x) {
         return logsumexp(x[0], {0, 1}, true);
       },
       {rn({2, 3, 4}, 63)}},
      {"logsumexp all", [](In x) { return logsumexp(x[0]); }, {rn({2, 3}, 64)}},
      {"softmax", [](In x) { return softmax(x[0]); }, {rn({3, 5}, 65)}},
      {"softmax 3-D weighted",
       [](In x) { return softmax(x[0]) * x[1]; },
       {rn({2, 3, 4}, 66), rn({4}, 67)}},
      {"softmax non-contiguous", [](In x) { return softmax(x[0]); }, {rn_t(4, 3, 68)}},
      {"log_softmax", [](In x) { return log_softmax(x[0]); }, {rn({3, 5}, 69)}},
      {"log_softmax weighted",
       [](In x) { return log_softmax(x[0]) * x[1]; },
       {rn({2, 3, 4}, 70), rn({2, 3, 4}, 71)}},
  };
}

std::vector<Row> matmul_rows() {
  auto mm = [](bool ta, bool tb) { return [ta, tb](In x) { return matmul(x[0], x[1], ta, tb); }; };
  return {
      {"matmul NN", mm(false, false), {rn({3, 4}, 80), rn({4, 5}, 81)}},
      {"matmul TN", mm(true, false), {rn({4, 3}, 82), rn({4, 5}, 83)}},
      {"matmul NT", mm(false, true), {rn({3, 4}, 84), rn({5, 4}, 85)}},
      {"matmul TT", mm(true, true), {rn({4, 3}, 86), rn({5, 4}, 87)}},
      {"matmul batched", mm(false, false), {rn({2, 3, 4}, 88), rn({2, 4, 5}, 89)}},
      {"matmul batched TT", mm(true, true), {rn({2, 4, 3}, 90), rn({2, 5, 4}, 91)}},
      {"matmul batched A, 2-D B", mm(false, false), {rn({2, 3, 4}, 92), rn({4, 5}, 93)}},
      {"matmul batched A, 2-D B^T", mm(false, true), {rn({2, 3, 4}, 94), rn({5, 4}, 95)}},
      {"matmul batched A^T, 2-D B", mm(true, false), {rn({2, 4, 3}, 96), rn({4, 5}, 97)}},
      {"matmul batched A^T, 2-D B^T", mm(true, true), {rn({2, 4, 3}, 98), rn({5, 4}, 99)}},
      {"matmul 2-D A, batched B", mm(false, false), {rn({3, 4}, 100), rn({2, 4, 5}, 101)}},
      {"matmul 2-D A^T, batched B^T", mm(true, true), {rn({4, 3}, 102), rn({2, 5, 4}, 103)}},
      {"matmul broadcast batch [2,1] x [3]",
       mm(false, false),
       {rn({2, 1, 3, 4}, 104), rn({3, 4, 2}, 105)}},
      {"matmul non-contiguous A", mm(false, false), {rn_t(3, 4, 106), rn({4, 2}, 107)}},
      {"matmul of transpose view",
       [](In x) { return matmul(transpose(x[0], 1, 2), x[1]); },
       {rn({2, 4, 3}, 108), rn({4, 2}, 109)}},
      {"nf4_linear, non-contiguous x (W frozen)",
       [w = nf4_weight({5, 70}, 110)](In x) { return nf4_linear(x[0], w); },
       {Variable(Tensor::randn({70, 3}, 111, 0, DType::Float64).transpose(0, 1), true)}},
  };
}

std::vector<Row> shape_rows() {
  return {
      {"view",
       [](In x) {
         return view(x[0], {3, 2, -1}) * x[1];
       },
       {rn({6, 4}, 120), rn({4}, 121)}},
      {"reshape non-contiguous",
       [](In x) { return reshape(x[0], {-1}) * x[1]; },
       {rn_t(3, 4, 122), rn({12}, 123)}},
      {"flatten", [](In x) { return flatten(x[0]) * x[1]; }, {rn({2, 3}, 124), rn({6}, 125)}},
      {"permute",
       [](In x) {
         return permute(x[0], {2, 0, 1}) * x[1];
       },
       {rn({2, 3, 4}, 126), rn({4, 2, 3}, 127)}},
      {"transpose then mul",
       [](In x) { return transpose(x[0], 0, -1) * x[1]; },
       {rn({3, 4}, 128), rn({4, 3}, 129)}},
      {"narrow",
       [](In x) { return narrow(x[0], 1, 1, 3) * x[1]; },
       {rn({2, 5}, 130), rn({2, 3}, 131)}},
      {"slice with step",
       [](In x) { return slice(x[0], 1, 1, 7, 2) * x[1]; },
       {rn({2, 7}, 132), rn({2, 3}, 133)}},
      {"slice negative start", [](In x) { return exp(slice(x[0], 0, -2, 4)); }, {rn({4, 2}, 134)}},
      {"select", [](In x) { return select(x[0], 1, 2) * x[1]; }, {rn({3, 4}, 135), rn({3}, 136)}},
      {"expand",
       [](In x) {
         return expand(x[0], {2, 3, 4}) * x[1];
       },
       {rn({3, 1}, 137), rn({2, 3, 4}, 138)}},
      {"squeeze",
       [](In x) { return squeeze(x[0], 1) * x[1]; },
       {rn({3, 1, 2}, 139), rn({3, 2}, 140)}},
      {"unsqueeze",
       [](In x) { return unsqueeze(x[0], -1) * x[1]; },
       {rn({3}, 141), rn({3, 2}, 142)}},
      {"contiguous of transpose",
       [](In x) { return contiguous(transpose(x[0], 0, 1)) * x[1]; },
       {rn({3, 2}, 143), rn({2, 3}, 144)}},
      {"cat dim 1",
       [](In x) {
         return cat({x[0], x[1] * 2.0, x[2]}, 1);
       },
       {rn({2, 3}, 145), rn({2, 1}, 146), rn({2, 2}, 147)}},
      {"cat dim -1 of same input",
       [](In x) {
         return cat({x[0], exp(x[0])}, -1);
       },
       {rn({2, 3}, 148)}},
      {"stack dim 0",
       [](In x) {
         return stack({x[0], x[1]}, 0) * x[1];
       },
       {rn({2, 3}, 149), rn({2, 3}, 150)}},
      {"stack dim -1",
       [](In x) {
         return stack({x[0], exp(x[1])}, -1);
       },
       {rn({3}, 151), rn({3}, 152)}},
      {"split",
       [](In x) {
         auto p = split(x[0], 2, 1);  // sizes 2, 2, 1
         return cat({p[2] * 3.0, exp(p[0]), p[1] * p[1]}, 1);
       },
       {rn({3, 5}, 153)}},
      {"split piece unused", [](In x) { return split(x[0], 3, 0)[1] * 2.0; }, {rn({6, 2}, 154)}},
      // Casts are linear, so a large step is exact despite the float32 rounding.
      {"to_dtype float64 -> float32",
       [](In x) { return to_dtype(x[0], DType::Float32) * 3.0; },
       {rn({2, 3}, 155)},
       GradcheckOptions{.eps = 0.25, .atol = 1e-4, .rtol = 1e-4}},
      {"to_dtype float32 -> float64",
       [](In x) { return to_dtype(x[0], DType::Float64) * x[1]; },
       {Variable(Tensor::randn({2, 3}, 156, 0, DType::Float32), true), rn({2, 3}, 157)}},
  };
}

std::vector<Row> index_rows() {
  const Tensor tok = ids({1, 0, 1, 3, 1, 2}, {2, 3});  // id 1 three times
  const Tensor idx = ids({2, 0, 2}, {3});
  const Tensor g_idx = ids({0, 2, 2, 1, 3, 3, 3, 0}, {2, 4});
  const Tensor cond = Tensor::from_vector<int32_t>({1, 0, 0, 1}, {4});
  const Tensor mask = Tensor::from_vector<int32_t>({0, 1, 1}, {3, 1});
  return {
      {"embedding repeated ids", [tok](In x) { return embedding(x[0], tok); }, {rn({4, 3}, 170)}},
      // The tied LM pattern: the head's gradient is pending when the lookup's runs, which then
      // adds into it in place (backward_into).
      {"embedding tied to a head",
       [tok](In x) { return matmul(embedding(x[0], tok), x[0], false, true); },
       {rn({4, 3}, 176)}},
      {"index_select dim 1 repeated",
       [idx](In x) { return index_select(x[0], 1, idx); },
       {rn({2, 4}, 171)}},
      {"index_select dim 0",
       [idx](In x) { return index_select(x[0], 0, idx) * x[1]; },
       {rn({3, 2}, 172), rn({3, 2}, 173)}},
      {"index_add repeated",
       [idx](In x) { return index_add(x[0], 0, idx, x[1]); },
       {rn({4, 2}, 174), rn({3, 2}, 175)}},
      {"index_add dim 1",
       [idx](In x) { return index_add(x[0], 1, idx, x[1]) * x[0]; },
       {rn({2, 3}, 176), rn({2, 3}, 177)}},
      {"gather dim 1", [g_idx](In x) { return gather(x[0], 1, g_idx); }, {rn({2, 4}, 178)}},
      {"gather dim 0",
       [](In x) {
         return gather(x[0], 0, ids({1, 0, 1, 1}, {2, 2}));
       },
       {rn({2, 2}, 179)}},
      {"scatter_add repeated",
       [g_idx](In x) { return scatter_add(x[0], 1, g_idx, x[1]); },
       {rn({2, 4}, 180), rn({2, 4}, 181)}},
      {"topk", [](In x) { return topk(x[0], 2).first; }, {rn({3, 5}, 182)}},
      {"gather_weighted_sum",  // 2 of src's 8 rows unnamed
       [](In x) { return gather_weighted_sum(x[0], ids({4, 1, 7, 5, 2, 0}, {3, 2}), x[1]); },
       {rn({8, 3}, 188), rn({3, 2}, 189)}},
      {"topk weighted 3-D",
       [](In x) { return topk(x[0], 3).first * x[1]; },
       {rn({2, 2, 4}, 183), rn({3}, 184)}},
      {"where broadcast cond",
       [cond](In x) { return where(cond, x[0], x[1]); },
       {rn({3, 4}, 185), rn({4}, 186)}},
      {"masked_fill broadcast mask",
       [mask](In x) { return masked_fill(x[0], mask, -1e9) * 2.0; },
       {rn({3, 4}, 187)}},
  };
}

}  // namespace

TEST_CASE("gradcheck table: every differentiable op in float64", "[autograd][gradcheck]") {
  std::vector<Row> rows;
  for (auto&& family :
       {elementwise_rows(), reduce_rows(), matmul_rows(), shape_rows(), index_rows()}) {
    rows.insert(rows.end(), family.begin(), family.end());
  }
  for (const Row& row : rows) {
    DYNAMIC_SECTION(row.name) {
      const GradcheckResult result = gradcheck(row.fn, row.inputs, row.options);
      INFO(result.message);
      REQUIRE(result.ok);
    }
  }
}

TEST_CASE("gradcheck in float32 (matmul through oneDNN, softmax)", "[autograd][gradcheck]") {
  auto f32 = [](const Shape& shape, uint64_t seed) {
    return Variable(Tensor::randn(shape, seed, 0, DType::Float32), true);
  };
  SECTION("matmul NT, batched with a 2-D operand") {
    auto r = gradcheck([](In x) { return matmul(x[0], x[1], false, true); },
                       {f32({2, 3, 4}, 200), f32({5, 4}, 201)});
    INFO(r.message);
    REQUIRE(r.ok);
  }
  SECTION("matmul TN") {
    auto r = gradcheck([](In x) { return matmul(x[0], x[1], true, false); },
                       {f32({4, 3}, 202), f32({4, 5}, 203)});
    INFO(r.message);
    REQUIRE(r.ok);
  }
  SECTION("log_softmax") {
    auto r = gradcheck([](In x) { return log_softmax(x[0]) * x[1]; },
                       {f32({3, 5}, 204), f32({3, 5}, 205)});
    INFO(r.message);
    REQUIRE(r.ok);
  }
}

TEST_CASE("a tied table's gradient is the head's plus the lookup's, bit for bit", "[autograd]") {
  // The lookup's backward adds into the pending head gradient in place; the sums must equal
  // those of two separate backward passes added afterwards.
  std::vector<int64_t> tv;
  for (int64_t i = 0; i < 96; ++i) tv.push_back((i * 7) % 13 + (i % 5 == 0 ? 20 : 0));
  const Tensor tok = Tensor::from_vector(tv, {4, 24});
  const Tensor table = Tensor::randn({33, 40}, 180, 0, DType::Float32);
  const Tensor r = Tensor::randn({4, 24, 33}, 181, 0, DType::Float32);
  auto loss = [&](const Variable& lookup_w, const Variable& head_w) {
    return sum(mul(matmul(embedding(lookup_w, tok), head_w, false, true), Variable(r, false)));
  };
  Variable tied(table.clone(), true);
  loss(tied, tied).backward();
  Variable head_only(table.clone(), true), lookup_only(table.clone(), true);
  loss(Variable(table.clone(), false), head_only).backward();
  loss(lookup_only, Variable(table.clone(), false)).backward();
  const Tensor want = kernels::add(head_only.grad(), lookup_only.grad());
  CHECK(tied.grad().to_vector<float>() == want.to_vector<float>());
}
