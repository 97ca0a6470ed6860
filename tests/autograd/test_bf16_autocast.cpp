// Autocast (autograd/autocast.h): the switch and its guard, matmul forward
// and backward on bfloat16-rounded operands against triple loops in double,
// float64 untouched (gradcheck under the guard), the per-region cache of
// parameter copies, and a small Transformer's gradients against float32.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>

#include "autograd/autocast.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/transformer.h"

using namespace ember;

namespace {

// x rounded to the nearest bfloat16 (ties to even) and widened back, in double.
double round_bf16(double x) {
  const uint32_t u = std::bit_cast<uint32_t>(static_cast<float>(x));
  const uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u;
  const double dlo = std::abs(x - std::bit_cast<float>(lo)), dhi = std::abs(x - std::bit_cast<float>(hi));
  const uint32_t pick = dlo != dhi ? (dlo < dhi ? lo : hi) : ((lo >> 16) & 1 ? hi : lo);
  return std::bit_cast<float>(pick);
}

std::vector<double> rounded(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  for (double& x : v) x = round_bf16(x);
  return v;
}

// C = A B for row-major A [M, K], B [K, N] in double.
std::vector<double> gemm(const std::vector<double>& A, const std::vector<double>& B, int64_t M,
                         int64_t K, int64_t N) {
  std::vector<double> C(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += A[i * K + k] * B[k * N + j];
      C[i * N + j] = s;
    }
  return C;
}

std::vector<double> transposed(const std::vector<double>& A, int64_t rows, int64_t cols) {
  std::vector<double> T(A.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) T[j * rows + i] = A[i * cols + j];
  return T;
}

double max_abs_diff(const Tensor& x, const std::vector<double>& y) {
  const auto v = x.to_vector<double>();
  REQUIRE(v.size() == y.size());
  double m = 0;
  for (size_t i = 0; i < v.size(); ++i) m = std::max(m, std::abs(v[i] - y[i]));
  return m;
}

}  // namespace

TEST_CASE("autocast is off by default, the guard sets and restores it", "[bf16][autocast]") {
  CHECK(autocast_dtype() == DType::Float32);
  {
    AutocastGuard outer(DType::BFloat16);
    CHECK(autocast_dtype() == DType::BFloat16);
    {
      AutocastGuard inner(DType::Float32);
      CHECK(autocast_dtype() == DType::Float32);
    }
    CHECK(autocast_dtype() == DType::BFloat16);
  }
  CHECK(autocast_dtype() == DType::Float32);
  CHECK_THROWS_WITH(set_autocast_dtype(DType::Float64), Catch::Contains("expected float32 or bfloat16"));
  CHECK(parse_autocast_dtype("bf16") == DType::BFloat16);
  CHECK(parse_autocast_dtype("bfloat16") == DType::BFloat16);
  CHECK(parse_autocast_dtype("float32") == DType::Float32);
  CHECK_THROWS_WITH(parse_autocast_dtype("fp16"), Catch::Contains("--dtype: expected float32 or bf16, got 'fp16'"));
}

TEST_CASE("under autocast, matmul and its gradients multiply bfloat16-rounded operands", "[bf16][autocast]") {
  // y = x W^T (a Linear), L = sum(y * w): G = w, dx = G W, dW = G^T x, all on rounded values.
  const int64_t M = 37, K = 70, N = 29;
  const Variable x(Tensor::rand({M, K}, 1, 0, DType::Float32, -1, 1), true);
  const Variable W(Tensor::rand({N, K}, 2, 0, DType::Float32, -1, 1), true);
  const Variable w(Tensor::rand({M, N}, 3, 0, DType::Float32, -1, 1));
  Variable y;
  {
    AutocastGuard bf16(DType::BFloat16);
    y = matmul(x, W, false, true);
    sum(mul(y, w)).backward();
  }
  const auto xr = rounded(x.data()), Wr = rounded(W.data()), gr = rounded(w.data());
  const double tol = 2e-6 * 100;  // float32 accumulation of <= 70 exact products in [-1, 1)
  CHECK(max_abs_diff(y.data(), gemm(xr, transposed(Wr, N, K), M, K, N)) < tol);
  CHECK(max_abs_diff(x.grad(), gemm(gr, Wr, M, N, K)) < tol);
  CHECK(max_abs_diff(W.grad(), gemm(transposed(gr, M, N), xr, N, M, K)) < tol);
  // And the unrounded float32 product is measurably different (bfloat16 was used).
  const auto x64 = x.data().to_vector<double>(), W64 = W.data().to_vector<double>();
  CHECK(max_abs_diff(y.data(), gemm(x64, transposed(W64, N, K), M, K, N)) > 1e-3);
}

TEST_CASE("autocast leaves float64 alone: identical results and gradcheck passes", "[bf16][autocast]") {
  const Variable a(Tensor::rand({2, 5, 6}, 4, 0, DType::Float64, -1, 1), true);
  const Variable b(Tensor::rand({4, 6}, 5, 0, DType::Float64, -1, 1), true);
  const Tensor plain = matmul(a, b, false, true).data();
  AutocastGuard bf16(DType::BFloat16);
  const Tensor cast = matmul(a, b, false, true).data();
  CHECK(cast.dtype() == DType::Float64);
  CHECK(cast.to_vector<double>() == plain.to_vector<double>());
  const GradcheckResult r = gradcheck(
      [](const std::vector<Variable>& in) { return tanh(matmul(in[0], in[1], false, true)); }, {a, b});
  INFO(r.message);
  CHECK(r.ok);
}

TEST_CASE("a parameter is rounded once per autocast region, again after it is written", "[bf16][autocast]") {
  const Variable p(Tensor::rand({8, 16}, 6, 0, DType::Float32, -1, 1), true);
  const Variable activation(Tensor::rand({8, 16}, 7, 0, DType::Float32, -1, 1));  // no grad: not cached
  Tensor first;
  {
    AutocastGuard bf16(DType::BFloat16);
    first = autocast_to_bfloat16(p);
    CHECK(first.dtype() == DType::BFloat16);
    CHECK(autocast_to_bfloat16(p).shares_storage(first));
    CHECK_FALSE(autocast_to_bfloat16(activation).shares_storage(autocast_to_bfloat16(activation)));
    p.data().fill_(0.25);  // an in-place write bumps the version
    const Tensor after = autocast_to_bfloat16(p);
    CHECK_FALSE(after.shares_storage(first));
    CHECK(*static_cast<const uint16_t*>(after.raw_data()) == 0x3E80);  // 0.25
  }
  AutocastGuard again(DType::BFloat16);
  CHECK_FALSE(autocast_to_bfloat16(p).shares_storage(first));  // the region ended: cache dropped
}

TEST_CASE("a small Transformer's gradients under autocast match float32 within bfloat16 rounding",
          "[bf16][autocast]") {
  const nn::ModelConfig c = nn::ModelConfig::from_json(R"({"vocab_size": 97, "d_model": 64, "n_layers": 2,
    "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 96, "max_seq_len": 32, "tie_embeddings": true})");
  nn::Transformer model(c, 1);
  const Tensor ids = Tensor::rand({2, 17}, 8, 0, DType::Float64, 0, 97).to(DType::Int64);
  const Tensor targets = Tensor::rand({2, 17}, 9, 0, DType::Float64, 0, 97).to(DType::Int64);
  const auto params = model.named_parameters();
  auto grads = [&](DType dt, double& loss) {
    model.zero_grad();
    AutocastGuard guard(dt);
    nn::LossTerms l = model.loss(model.forward(ids), targets);
    l.total.backward();
    loss = l.total.item();
    std::vector<std::vector<double>> g;
    for (const auto& [name, p] : params) g.push_back(p.grad().to_vector<double>());
    return g;
  };
  double loss32 = 0, loss16 = 0;
  const auto g32 = grads(DType::Float32, loss32), g16 = grads(DType::BFloat16, loss16);
  CHECK(std::abs(loss16 - loss32) < 1e-3);
  CHECK(loss16 != loss32);
  double diff2 = 0, norm2 = 0, worst = 0;
  for (size_t i = 0; i < g32.size(); ++i) {
    double d2 = 0, n2 = 0;
    for (size_t j = 0; j < g32[i].size(); ++j) {
      d2 += (g16[i][j] - g32[i][j]) * (g16[i][j] - g32[i][j]);
      n2 += g32[i][j] * g32[i][j];
    }
    diff2 += d2;
    norm2 += n2;
    const double rel = std::sqrt(d2 / n2);
    worst = std::max(worst, rel);
    CAPTURE(params[i].first, rel);
    CHECK(rel < 2e-2);
  }
  const double rel_all = std::sqrt(diff2 / norm2);
  CAPTURE(rel_all, worst);
  CHECK(rel_all < 1e-2);
  CHECK(rel_all > 1e-4);  // bfloat16 was really used
}
