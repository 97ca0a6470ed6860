// LoRA (nn/adapters/lora.h, docs/model.md#lora) and frozen parameters: a frozen weight
// gets no gradient and its matmul backward computes none; LoRALinear's names,
// init, gradcheck, merge and training that leaves the base untouched.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/autocast.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "nn/adapters/lora.h"
#include "optim/adamw.h"

using namespace ember;
using namespace ember::nn;

static Variable randv(const Shape& s, uint64_t seed, bool grad = true) {
  return Variable(Tensor::randn(s, seed, 0, DType::Float64), grad);
}

static double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  REQUIRE(va.size() == vb.size());
  double m = 0;
  for (size_t i = 0; i < va.size(); ++i) m = std::max(m, std::abs(va[i] - vb[i]));
  return m;
}

TEST_CASE("frozen Linear weight: no .grad, no weight-gradient matmul, input grad exact", "[lora]") {
  Generator gen(3);
  Linear lin(4, 3, false, gen, 0.5, DType::Float64);
  lin.weight().set_requires_grad(false);
  const Variable x = randv({2, 4}, 11);
  const Variable y = lin.forward(x);
  // The matmul node's backward returns no weight gradient: it is not computed.
  REQUIRE(y.grad_fn() != nullptr);
  const Grads grads = y.grad_fn()->backward(Tensor::ones({2, 3}, DType::Float64));
  REQUIRE(grads.size() == 2);
  CHECK(grads[0].defined());
  CHECK_FALSE(grads[1].defined());

  const Variable y2 = lin.forward(x);
  sum(y2).backward();
  CHECK_FALSE(lin.weight().grad().defined());
  // d sum(x W^T) / dx[i, k] = sum_o W[o, k]
  const auto w = lin.weight().data().to_vector<double>();
  const auto gx = x.grad().to_vector<double>();
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 4; ++k) CHECK(gx[i * 4 + k] == Approx(w[k] + w[4 + k] + w[8 + k]).epsilon(1e-14));
  }
}

TEST_CASE("frozen weight under bfloat16 autocast: no weight gradient either", "[lora]") {
  Generator gen(4);
  Linear lin(8, 4, true, gen, 0.5);
  lin.weight().set_requires_grad(false);
  lin.bias().set_requires_grad(false);
  const Variable x(Tensor::randn({3, 8}, 5), true);
  AutocastGuard bf16(DType::BFloat16);
  const Variable y = lin.forward(x);
  sum(y).backward();
  CHECK(x.grad().defined());
  CHECK_FALSE(lin.weight().grad().defined());
  CHECK_FALSE(lin.bias().grad().defined());
}

static std::shared_ptr<LoRALinear> make_lora(int64_t in, int64_t out, bool bias, LoRAOptions o,
                                             uint64_t seed = 7) {
  Generator gen(seed);
  auto base = std::make_shared<Linear>(in, out, bias, gen, 0.5, DType::Float64);
  return std::make_shared<LoRALinear>(base, o, gen);
}

// A parent naming its child "q_proj", as attention does.
struct Holder : Module {
  explicit Holder(std::shared_ptr<LoRALinear> l) { register_module("q_proj", std::move(l)); }
};

TEST_CASE("LoRALinear: names, frozen base, init", "[lora]") {
  auto lora = make_lora(16, 6, true, {4, 8, 0});
  Holder h(lora);
  const auto names = h.named_parameters();
  REQUIRE(names.size() == 4);
  CHECK(names[0].first == "q_proj.weight");
  CHECK(names[1].first == "q_proj.bias");
  CHECK(names[2].first == "q_proj.lora_A.weight");
  CHECK(names[3].first == "q_proj.lora_B.weight");
  CHECK_FALSE(names[0].second.requires_grad());
  CHECK_FALSE(names[1].second.requires_grad());
  CHECK(names[2].second.requires_grad());
  CHECK(names[3].second.requires_grad());
  CHECK(lora->lora_A().shape() == Shape{4, 16});
  CHECK(lora->lora_B().shape() == Shape{6, 4});
  CHECK(lora->scale() == 2.0);

  for (double b : lora->lora_B().data().to_vector<double>()) CHECK(b == 0.0);
  auto big = make_lora(64, 4, false, {32, 16, 0});
  const double bound = 1.0 / 8.0;
  double lo = 1, hi = -1, mean = 0;
  const auto a = big->lora_A().data().to_vector<double>();
  for (double v : a) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    mean += v / a.size();
  }
  CHECK(lo > -bound);
  CHECK(hi < bound);
  CHECK(lo < -0.9 * bound);  // 2048 draws fill the interval
  CHECK(hi > 0.9 * bound);
  CHECK(std::abs(mean) < 0.01);  // std of the mean: 0.125 / sqrt(3 * 2048) = 0.0016

  // B = 0: the output is the base's, exactly.
  const Variable x = randv({2, 3, 16}, 21, false);
  CHECK(max_abs_diff(lora->forward(x).data(), lora->base()->forward(x).data()) == 0.0);
}

TEST_CASE("LoRALinear: option errors name the bad value", "[lora]") {
  CHECK_THROWS_WITH(make_lora(4, 4, false, {0, 16, 0}), Catch::Contains("r must be >= 1, got 0"));
  CHECK_THROWS_WITH(make_lora(4, 4, false, {8, -1, 0}), Catch::Contains("alpha must be > 0, got -1"));
  CHECK_THROWS_WITH(make_lora(4, 4, false, {8, 16, 1}), Catch::Contains("dropout must be in [0, 1), got 1"));
  CHECK_THROWS_WITH(make_lora(4, 4, false, {8, 16, -0.5}), Catch::Contains("got -0.5"));
}

static void set_b_nonzero(const LoRALinear& l, uint64_t seed) {
  l.lora_B().data().copy_(Tensor::randn(l.lora_B().shape(), seed, 0, DType::Float64));
}

TEST_CASE("LoRALinear: float64 gradcheck w.r.t. x, A, B", "[lora][gradcheck]") {
  for (bool bias : {false, true}) {
    auto lora = make_lora(5, 3, bias, {2, 3, 0});
    set_b_nonzero(*lora, 31);
    const Variable x = randv({2, 5}, 41);
    const std::vector<Variable> inputs{x, lora->lora_A(), lora->lora_B()};
    const auto r = gradcheck([&](const std::vector<Variable>& in) { return lora->forward(in[0]); }, inputs);
    INFO(r.message);
    CHECK(r.ok);
  }
}

TEST_CASE("LoRALinear: dropout only in train mode, gradcheck with it", "[lora][gradcheck]") {
  Generator gen(8);
  auto base = std::make_shared<Linear>(6, 4, false, gen, 0.5, DType::Float64);
  auto drop_gen = std::make_shared<Generator>(99);
  LoRALinear lora(base, {2, 4, 0.5}, gen, drop_gen);
  set_b_nonzero(lora, 32);
  const Variable x = randv({3, 6}, 42);
  lora.eval();
  const Tensor y_eval = lora.forward(x).data();
  CHECK(max_abs_diff(y_eval, lora.merge()->forward(x).data()) < 1e-12);
  lora.train();
  CHECK(max_abs_diff(lora.forward(x).data(), y_eval) > 1e-6);
  // Each call draws new counters: replay the same offset for every evaluation.
  const uint64_t offset = drop_gen->offset;
  const auto r = gradcheck(
      [&](const std::vector<Variable>& in) {
        drop_gen->offset = offset;
        return lora.forward(in[0]);
      },
      {x, lora.lora_A(), lora.lora_B()});
  INFO(r.message);
  CHECK(r.ok);
}

TEST_CASE("LoRALinear: merged forward equals unmerged", "[lora]") {
  for (bool bias : {false, true}) {
    auto lora = make_lora(12, 7, bias, {3, 5, 0});
    set_b_nonzero(*lora, 33);
    const Variable x = randv({2, 4, 12}, 43, false);
    const auto merged = lora->merge();
    CHECK(max_abs_diff(merged->forward(x).data(), lora->forward(x).data()) < 1e-10);
    // W' = W + (alpha / r) B A, against sums written out here.
    const auto w = lora->base()->weight().data().to_vector<double>();
    const auto a = lora->lora_A().data().to_vector<double>();
    const auto b = lora->lora_B().data().to_vector<double>();
    const auto wm = lora->merged_weight().to_vector<double>();
    for (int o = 0; o < 7; ++o) {
      for (int i = 0; i < 12; ++i) {
        double ba = 0;
        for (int k = 0; k < 3; ++k) ba += b[o * 3 + k] * a[k * 12 + i];
        CHECK(wm[o * 12 + i] == Approx(w[o * 12 + i] + 5.0 / 3.0 * ba).epsilon(1e-13));
      }
    }
  }
}

TEST_CASE("LoRALinear: AdamW steps change A and B only, base bit-identical", "[lora]") {
  auto lora = make_lora(8, 5, true, {2, 4, 0});
  const Tensor w0 = lora->base()->weight().data().clone(), b0 = lora->base()->bias().data().clone();
  const Tensor a0 = lora->lora_A().data().clone();
  optim::ParamGroup group;
  for (const auto& [name, p] : lora->named_parameters()) {
    group.params.push_back(p);
    group.names.push_back(name);
  }
  group.weight_decay = 0.1;
  optim::AdamW opt({group});
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    const Variable x = randv({4, 8}, 50 + step, false);
    Variable loss = sum(mul(lora->forward(x), lora->forward(x)));
    loss.backward();
    CHECK_FALSE(lora->base()->weight().grad().defined());
    CHECK_FALSE(lora->base()->bias().grad().defined());
    opt.step(1e-2);
  }
  CHECK(max_abs_diff(lora->base()->weight().data(), w0) == 0.0);
  CHECK(max_abs_diff(lora->base()->bias().data(), b0) == 0.0);
  CHECK(max_abs_diff(lora->lora_A().data(), a0) > 0.0);
  for (double b : lora->lora_B().data().to_vector<double>()) CHECK(b != 0.0);
}
