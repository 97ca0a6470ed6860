// The tensor-parallel ops (autograd/parallel_ops.h) over the ranks of the job
// (dist::Group: the world as one split), float64: vocab-parallel cross-entropy against cross_entropy of
// the whole logits, a Megatron MLP (column- then row-parallel Linear) against the whole MLP,
// and a gradcheck of the composed function (MLP, vocab-parallel head, loss).
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/parallel_ops.h"
#include "mpi_testing.h"
#include "dist/group.h"

using namespace ember;
using ember::testing::comm;

namespace {

// kH divides 1, 2 and 3 ranks; kV = 7 is padded to 8 over 2 ranks and to 9 over 3.
constexpr int64_t kN = 5, kD = 6, kH = 12, kV = 7;

// The whole model, the same on every rank: x [N, D], W1 [H, D], b1 [H], W2 [D, H], b [D],
// the head E [V, D].
struct Whole {
  Tensor x, w1, b1, w2, b, e;
};

Whole whole_model() {
  const DType f64 = DType::Float64;
  return {Tensor::randn({kN, kD}, 70, 0, f64), Tensor::randn({kH, kD}, 71, 0, f64),
          Tensor::randn({kH}, 72, 0, f64),     Tensor::randn({kD, kH}, 73, 0, f64),
          Tensor::randn({kD}, 74, 0, f64),     Tensor::randn({kV, kD}, 75, 0, f64)};
}

// Rows [lo, lo + count) of t [R, C] as a new tensor; rows >= R hold `pad` (vocabulary padding).
Tensor rows_padded(const Tensor& t, int64_t lo, int64_t count, double pad) {
  Tensor out = Tensor::full({count, t.size(1)}, pad, t.dtype());
  const int64_t real = std::min(count, std::max<int64_t>(0, t.size(0) - lo));
  if (real > 0) out.narrow(0, 0, real).copy_(t.narrow(0, lo, real));
  return out;
}

// Rank r's hidden units [r Hs, (r + 1) Hs): b1, W1 by output rows, W2 by input columns; and its
// rows of the padded head.
std::vector<Tensor> shards_of(const Whole& m, int r, int T) {
  const int64_t Hs = kH / T, Vs = (kV + T - 1) / T;
  return {m.b1.narrow(0, r * Hs, Hs).clone(), m.w1.narrow(0, r * Hs, Hs).clone(),
          m.w2.narrow(1, r * Hs, Hs).clone(), rows_padded(m.e, r * Vs, Vs, 0.5)};
}

Variable linear(const Variable& x, const Variable& w) {
  return matmul(x, w, false, true);
}

Variable whole_mlp(const Variable& x, const Variable& w1, const Variable& b1, const Variable& w2,
                   const Variable& b) {
  return add(linear(gelu(add(linear(x, w1), b1)), w2), b);
}

// The same MLP with W1, b1 split by output rows and W2 by input columns; b added once.
Variable parallel_mlp(const Variable& x, const Variable& w1, const Variable& b1, const Variable& w2,
                      const Variable& b, const ParallelGroup& group) {
  const Variable h = gelu(add(linear(copy_to_group(x, group), w1), b1));
  return add(reduce_from_group(linear(h, w2), group), b);
}

// max over elements of |a - b| / (1 + |b|).
double max_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> av = a.contiguous().to_vector<double>();
  const std::vector<double> bv = b.contiguous().to_vector<double>();
  if (av.size() != bv.size()) return INFINITY;
  double d = 0;
  for (size_t i = 0; i < av.size(); ++i)
    d = std::max(d, std::abs(av[i] - bv[i]) / (1 + std::abs(bv[i])));
  return d;
}

Tensor targets() {
  std::vector<int64_t> y(kN);
  for (int64_t n = 0; n < kN; ++n) y[n] = (n * 3 + 1) % kV;
  y[0] = kV - 1;  // the last real row, next to the padding
  return Tensor::from_vector(y);
}

}  // namespace

TEST_CASE("vocab-parallel cross-entropy over the ranks equals cross_entropy of the whole logits",
          "[mpi][tp]") {
  const dist::Group group = comm().split(0, comm().rank());
  const int T = group.size(), r = group.rank();
  const int64_t Vs = (kV + T - 1) / T;
  const Tensor logits = Tensor::randn({kN, kV}, 50, 0, DType::Float64), y = targets();
  const Tensor w = Tensor::from_vector<double>({1.0, 0.0, 2.0, 1.0, 0.5});
  // This rank's columns, padding columns 40 (they would dominate the sum if they counted).
  const Tensor shard = rows_padded(logits.transpose(0, 1).contiguous(), r * Vs, Vs, 40.0)
                           .transpose(0, 1)
                           .contiguous();
  for (int form = 0; form < 4; ++form) {
    const double coef = form % 2 == 0 ? 0.0 : 0.2;
    const bool weigh = form >= 2;
    INFO("z_loss_coef " << coef << ", weighted " << weigh << ", rank " << r << " of " << T);
    Variable a(logits.clone(), true), b(shard.clone(), true);
    const CrossEntropyResult whole =
        weigh ? cross_entropy(a, y, w, 3.5, coef) : cross_entropy(a, y, coef);
    const CrossEntropyResult split =
        weigh ? vocab_parallel_cross_entropy(b, y, kV, w, 3.5, group, coef)
              : vocab_parallel_cross_entropy(b, y, kV, group, coef);
    CHECK(std::abs(split.loss.item() - whole.loss.item()) <= 1e-12);
    CHECK(std::abs(split.ce - whole.ce) <= 1e-12);
    CHECK(std::abs(split.z - whole.z) <= 1e-12);
    whole.loss.backward();
    split.loss.backward();
    const int64_t real = std::min(Vs, kV - r * Vs);  // > 0 for T <= 3
    CHECK(max_diff(b.grad().narrow(1, 0, real), a.grad().narrow(1, r * Vs, real)) <= 1e-12);
    const Tensor pad_grad = b.grad().narrow(1, real, Vs - real);
    CHECK(max_diff(pad_grad, Tensor::zeros(pad_grad.shape(), DType::Float64)) == 0.0);
  }
}

TEST_CASE("a Megatron MLP over the ranks equals the whole MLP, output and gradients", "[mpi][tp]") {
  const dist::Group group = comm().split(0, comm().rank());
  const int T = group.size(), r = group.rank();
  const int64_t Hs = kH / T;
  const Whole m = whole_model();
  const Variable proj(Tensor::randn({kN, kD}, 76, 0, DType::Float64));  // loss = sum(y * proj)
  Variable x(m.x.clone(), true), w1(m.w1.clone(), true), b1(m.b1.clone(), true),
      w2(m.w2.clone(), true), b(m.b.clone(), true);
  const Variable y = whole_mlp(x, w1, b1, w2, b);
  sum(mul(y, proj)).backward();

  const std::vector<Tensor> s = shards_of(m, r, T);
  Variable px(m.x.clone(), true), pb1(s[0], true), pw1(s[1], true), pw2(s[2], true),
      pb(m.b.clone(), true);
  const Variable py = parallel_mlp(px, pw1, pb1, pw2, pb, group);
  sum(mul(py, proj)).backward();

  INFO("rank " << r << " of " << T);
  CHECK(max_diff(py.data(), y.data()) <= 1e-12);
  CHECK(max_diff(px.grad(), x.grad()) <= 1e-12);
  CHECK(max_diff(pw1.grad(), w1.grad().narrow(0, r * Hs, Hs)) <= 1e-12);
  CHECK(max_diff(pb1.grad(), b1.grad().narrow(0, r * Hs, Hs)) <= 1e-12);
  CHECK(max_diff(pw2.grad(), w2.grad().narrow(1, r * Hs, Hs)) <= 1e-12);
  CHECK(max_diff(pb.grad(), b.grad()) <= 1e-12);
}

namespace {

// The composed loss: vocab-parallel cross-entropy with z-loss of the vocab-parallel head over
// the parallel MLP. v = {x, b, then rank turn's b1, W1, W2, E shards}: every rank holds the
// same v; rank turn computes with its shards, the others with their own (`own`) plus 0 times
// v's, and copy_to_group hands every rank the gradient of v's shards.
Variable composed_loss(const std::vector<Variable>& v, const std::vector<Tensor>& own, int turn,
                       const ParallelGroup& group) {
  std::vector<Variable> s(4);
  for (size_t i = 0; i < 4; ++i) {
    const Variable shared = copy_to_group(v[2 + i], group);
    s[i] = group.rank() == turn ? shared : add(Variable(own[i]), mul_scalar(shared, 0.0));
  }
  const Variable h = parallel_mlp(v[0], s[1], s[0], s[2], v[1], group);
  const Variable logits = linear(copy_to_group(h, group), s[3]);
  return vocab_parallel_cross_entropy(logits, targets(), kV, group, 0.1).loss;
}

}  // namespace

TEST_CASE("the composed tensor-parallel function passes a float64 gradcheck on every rank",
          "[mpi][tp]") {
  const dist::Group group = comm().split(0, comm().rank());
  const int T = group.size(), r = group.rank();
  const Whole m = whole_model();
  const std::vector<Tensor> own = shards_of(m, r, T);
  // x and b are whole on every rank and perturbed alike: the check sees the full derivative,
  // which the analytic gradient reaches only through copy_to_group's sum.
  for (int turn = 0; turn < T; ++turn) {
    std::vector<Variable> inputs{Variable(m.x.clone(), true), Variable(m.b.clone(), true)};
    for (const Tensor& t : shards_of(m, turn, T)) inputs.emplace_back(t, true);
    const GradcheckResult g = gradcheck(
        [&](const std::vector<Variable>& v) { return composed_loss(v, own, turn, group); }, inputs);
    INFO("shards of rank " << turn << ", on rank " << r << " of " << T << ": " << g.message);
    CHECK(g.ok);
  }
}
