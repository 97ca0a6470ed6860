// The tensor-parallel ops (autograd/parallel_ops.h) without MPI: copy_to_group and
// reduce_from_group over a group of threads and in float64 gradchecks on the local group;
// vocab_parallel_cross_entropy against a plain loop, against cross_entropy on one rank, and
// over 2 to 4 threads (padding included) against the whole vocabulary's loss and gradient.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/local_group.h"
#include "autograd/parallel_ops.h"
#include "thread_group.h"

using namespace ember;
using ember::testing::run_ranks;

namespace {

constexpr int64_t kN = 6;

// Loss and gradient [N, V] of sum_n w_n (lse_n - x[n, y_n] + coef lse_n^2) / norm, written out.
struct Reference {
  double loss = 0, ce = 0, z = 0;
  std::vector<double> grad;
};

Reference reference(const Tensor& logits, const std::vector<int64_t>& y,
                    const std::vector<double>& w, double norm, double coef) {
  const int64_t N = logits.size(0), V = logits.size(1);
  const std::vector<double> x = logits.to_vector<double>();
  Reference r;
  r.grad.assign(static_cast<size_t>(N * V), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    if (w[n] == 0) continue;
    const double* xr = x.data() + n * V;
    double m = xr[0], s = 0;
    for (int64_t i = 0; i < V; ++i) m = std::max(m, xr[i]);
    for (int64_t i = 0; i < V; ++i) s += std::exp(xr[i] - m);
    const double lse = m + std::log(s);
    r.ce += w[n] * (lse - xr[y[n]]) / norm;
    r.z += w[n] * lse * lse / norm;
    for (int64_t i = 0; i < V; ++i) {
      const double p = std::exp(xr[i] - lse);
      r.grad[n * V + i] = w[n] / norm * (p * (1 + 2 * coef * lse) - (i == y[n] ? 1.0 : 0.0));
    }
  }
  r.loss = r.ce + coef * r.z;
  return r;
}

// Targets covering the first and the last vocabulary row.
std::vector<int64_t> targets_for(int64_t V) {
  std::vector<int64_t> y(kN);
  for (int64_t n = 0; n < kN; ++n) y[n] = (n * 5 + 3) % V;
  y[0] = V - 1;
  y[1] = 0;
  return y;
}

// Weights with two skipped rows.
std::vector<double> weights() {
  return {1.0, 0.0, 2.5, 1.0, 0.0, 0.5};
}

// Rank t's columns [t Vs, (t + 1) Vs) of logits [N, V]; columns >= V hold `pad`.
Tensor shard_of(const Tensor& logits, int rank, int64_t Vs, double pad) {
  const int64_t N = logits.size(0), V = logits.size(1);
  std::vector<double> out(static_cast<size_t>(N * Vs), pad);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < Vs && rank * Vs + j < V; ++j)
      out[n * Vs + j] = logits.at({n, rank * Vs + j});
  return Tensor::from_vector(out, {N, Vs});
}

bool near(double a, double b, double tol = 1e-12) {
  return std::abs(a - b) <= tol * (1 + std::abs(b));
}

}  // namespace

TEST_CASE("copy_to_group is the identity forward and sums the gradient over the group",
          "[parallel]") {
  const int T = 3;
  const Tensor x = Tensor::randn({2, 3}, 1, 0, DType::Float64);
  struct Seen {
    std::vector<double> y, dx;
  };
  const std::vector<Seen> seen = run_ranks(T, [&](const ParallelGroup& group) {
    Variable xv(x.clone(), true);
    const Variable y = copy_to_group(xv, group);
    const Tensor c = Tensor::randn({2, 3}, 10 + group.rank(), 0, DType::Float64);
    sum(mul(y, Variable(c))).backward();
    return Seen{y.data().to_vector<double>(), xv.grad().to_vector<double>()};
  });
  std::vector<double> expected(6, 0.0);
  for (int r = 0; r < T; ++r) {
    const std::vector<double> c =
        Tensor::randn({2, 3}, 10 + r, 0, DType::Float64).to_vector<double>();
    for (size_t i = 0; i < c.size(); ++i) expected[i] += c[i];
  }
  for (int r = 0; r < T; ++r) {
    CHECK(seen[r].y == x.to_vector<double>());
    for (size_t i = 0; i < expected.size(); ++i) CHECK(near(seen[r].dx[i], expected[i]));
  }
}

TEST_CASE("reduce_from_group sums the forward over the group and passes the gradient through",
          "[parallel]") {
  const int T = 3;
  struct Seen {
    std::vector<double> y, x_after, dx;
  };
  const std::vector<Seen> seen = run_ranks(T, [&](const ParallelGroup& group) {
    Variable xv(Tensor::randn({2, 3}, 20 + group.rank(), 0, DType::Float64), true);
    const Variable y = reduce_from_group(xv, group);
    y.backward(Tensor::randn({2, 3}, 30 + group.rank(), 0, DType::Float64));
    return Seen{y.data().to_vector<double>(), xv.data().to_vector<double>(),
                xv.grad().to_vector<double>()};
  });
  std::vector<double> expected(6, 0.0);
  for (int r = 0; r < T; ++r) {
    const std::vector<double> x =
        Tensor::randn({2, 3}, 20 + r, 0, DType::Float64).to_vector<double>();
    for (size_t i = 0; i < x.size(); ++i) expected[i] += x[i];
  }
  for (int r = 0; r < T; ++r) {
    for (size_t i = 0; i < expected.size(); ++i) CHECK(near(seen[r].y[i], expected[i]));
    // The input is left as it was; the gradient is this rank's own, not summed.
    CHECK(seen[r].x_after == Tensor::randn({2, 3}, 20 + r, 0, DType::Float64).to_vector<double>());
    CHECK(seen[r].dx == Tensor::randn({2, 3}, 30 + r, 0, DType::Float64).to_vector<double>());
  }
}

TEST_CASE("copy_to_group and reduce_from_group pass gradcheck on the local group", "[parallel]") {
  const LocalGroup group;
  CHECK(group.rank() == 0);
  CHECK(group.size() == 1);
  Variable x(Tensor::randn({3, 4}, 2, 0, DType::Float64), true);
  Variable w(Tensor::randn({3, 4}, 3, 0, DType::Float64), true);
  const GradcheckResult r = gradcheck(
      [&](const std::vector<Variable>& v) {
        return reduce_from_group(mul(tanh(copy_to_group(v[0], group)), v[1]), group);
      },
      {x, w});
  INFO(r.message);
  CHECK(r.ok);
  CHECK_THROWS_WITH(copy_to_group(Variable(Tensor::zeros({2}, DType::Int64)), group),
                    Catch::Contains("copy_to_group: expected a float32 or float64 tensor"));
}

TEST_CASE("vocab-parallel cross-entropy on the local group matches a plain loop and gradcheck",
          "[parallel][vocab]") {
  const LocalGroup group;
  const int64_t V = 7;
  const Tensor x = Tensor::randn({kN, V}, 4, 0, DType::Float64);
  const std::vector<int64_t> yv = targets_for(V);
  const Tensor y = Tensor::from_vector(yv), w = Tensor::from_vector(weights());
  for (double coef : {0.0, 0.3}) {
    INFO("z_loss_coef " << coef);
    const Reference plain = reference(x, yv, std::vector<double>(kN, 1.0), kN, coef);
    const CrossEntropyResult r = vocab_parallel_cross_entropy(Variable(x), y, V, group, coef);
    CHECK(near(r.loss.item(), plain.loss));
    CHECK(near(r.ce, plain.ce));
    CHECK(near(r.z, plain.z));
    const Reference weighted = reference(x, yv, weights(), 3.5, coef);
    CHECK(near(vocab_parallel_cross_entropy(Variable(x), y, V, w, 3.5, group, coef).loss.item(),
               weighted.loss));
    Variable xv(x.clone(), true);
    for (bool weigh : {false, true}) {
      const GradcheckResult g = gradcheck(
          [&](const std::vector<Variable>& v) {
            return weigh ? vocab_parallel_cross_entropy(v[0], y, V, w, 3.5, group, coef).loss
                         : vocab_parallel_cross_entropy(v[0], y, V, group, coef).loss;
          },
          {xv});
      INFO("weighted " << weigh << ": " << g.message);
      CHECK(g.ok);
    }
  }
}

TEST_CASE("vocab-parallel cross-entropy on one rank equals cross_entropy", "[parallel][vocab]") {
  const LocalGroup group;
  const int64_t V = 9;
  const Tensor y = Tensor::from_vector(targets_for(V)), w = Tensor::from_vector(weights());
  for (DType dt : {DType::Float64, DType::Float32}) {
    const double tol = dt == DType::Float64 ? 1e-12 : 1e-6;
    const Tensor x = Tensor::randn({kN, V}, 5, 0, dt);
    for (int form = 0; form < 4; ++form) {
      const double coef = form % 2 == 0 ? 0.0 : 0.25;
      const bool weigh = form >= 2;
      INFO(dtype_name(dt) << " z_loss_coef " << coef << " weighted " << weigh);
      Variable a(x.clone(), true), b(x.clone(), true);
      const CrossEntropyResult whole =
          weigh ? cross_entropy(a, y, w, 4.0, coef) : cross_entropy(a, y, coef);
      const CrossEntropyResult split =
          weigh ? vocab_parallel_cross_entropy(b, y, V, w, 4.0, group, coef)
                : vocab_parallel_cross_entropy(b, y, V, group, coef);
      CHECK(near(split.loss.item(), whole.loss.item(), tol));
      CHECK(near(split.ce, whole.ce, tol));
      CHECK(near(split.z, whole.z, tol));
      whole.loss.backward();
      split.loss.backward();
      const std::vector<double> ga = a.grad().to_vector<double>(),
                                gb = b.grad().to_vector<double>();
      for (size_t i = 0; i < ga.size(); ++i) CHECK(near(gb[i], ga[i], tol));
    }
  }
}

namespace {

struct RankLoss {
  double loss = 0, ce = 0, z = 0;
  std::vector<double> grad;
};

// vocab_parallel_cross_entropy over T threads, each with its shard of x (padding `pad`).
std::vector<RankLoss> split_loss(const Tensor& x, int T, const Tensor& y, const Tensor& w,
                                 double norm, double coef, double pad) {
  const int64_t V = x.size(1), Vs = (V + T - 1) / T;
  return run_ranks(T, [&](const ParallelGroup& group) {
    Variable xs(shard_of(x, group.rank(), Vs, pad), true);
    const CrossEntropyResult r = w.defined()
                                     ? vocab_parallel_cross_entropy(xs, y, V, w, norm, group, coef)
                                     : vocab_parallel_cross_entropy(xs, y, V, group, coef);
    r.loss.backward();
    return RankLoss{r.loss.item(), r.ce, r.z, xs.grad().to_vector<double>()};
  });
}

// Every rank's loss and its shard of the gradient against the plain loop; 0 in padding columns.
void check_split(const std::vector<RankLoss>& ranks, const Reference& whole, int64_t V) {
  const int T = static_cast<int>(ranks.size());
  const int64_t Vs = (V + T - 1) / T;
  for (int r = 0; r < T; ++r) {
    INFO("rank " << r << " of " << T);
    CHECK(near(ranks[r].loss, whole.loss));
    CHECK(near(ranks[r].ce, whole.ce));
    CHECK(near(ranks[r].z, whole.z));
    for (int64_t n = 0; n < kN; ++n) {
      for (int64_t j = 0; j < Vs; ++j) {
        const int64_t col = r * Vs + j;
        const double got = ranks[r].grad[n * Vs + j];
        if (col >= V) {
          CHECK(got == 0.0);
        } else {
          CHECK(near(got, whole.grad[n * V + col]));
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("vocab-parallel cross-entropy over 2, 3 and 4 ranks equals the whole vocabulary's",
          "[parallel][vocab]") {
  // (T, V): V padded to 8, 9 and 8; with T = 4 the last rank holds padding only.
  for (const auto& [T, V] : {std::pair<int, int64_t>{2, 7}, {3, 7}, {4, 5}}) {
    const Tensor x = Tensor::randn({kN, V}, 6, 0, DType::Float64);
    const std::vector<int64_t> yv = targets_for(V);
    const Tensor y = Tensor::from_vector(yv), w = Tensor::from_vector(weights());
    for (double coef : {0.0, 0.2}) {
      INFO("T " << T << ", V " << V << ", z_loss_coef " << coef);
      const std::vector<RankLoss> plain = split_loss(x, T, y, Tensor(), kN, coef, 0.0);
      check_split(plain, reference(x, yv, std::vector<double>(kN, 1.0), kN, coef), V);
      check_split(split_loss(x, T, y, w, 3.5, coef, 0.0), reference(x, yv, weights(), 3.5, coef),
                  V);
      // Padding logits never count: large ones leave the loss and the gradient as they were.
      const std::vector<RankLoss> padded = split_loss(x, T, y, Tensor(), kN, coef, 50.0);
      for (int r = 0; r < T; ++r) {
        CHECK(padded[r].loss == plain[r].loss);
        CHECK(padded[r].grad == plain[r].grad);
      }
    }
  }
}

TEST_CASE("vocab-parallel cross-entropy refuses a wrong shard width and a padding target",
          "[parallel][vocab]") {
  const LocalGroup group;
  const Variable x(Tensor::randn({kN, 6}, 7, 0, DType::Float64));
  const Tensor y = Tensor::from_vector(targets_for(6));
  CHECK_THROWS_WITH(vocab_parallel_cross_entropy(x, y, 7, group),
                    Catch::Contains("not this rank's share of a vocabulary of 7"));
  CHECK_THROWS_WITH(vocab_parallel_cross_entropy(x, y, 5, group),
                    Catch::Contains("not this rank's share of a vocabulary of 5"));
  // Over 2 ranks V = 7 is padded to 8: row 7 is padding, never a target.
  std::vector<int64_t> bad = targets_for(7);
  bad[3] = 7;
  const Tensor logits = Tensor::randn({kN, 7}, 8, 0, DType::Float64);
  CHECK_THROWS_WITH(split_loss(logits, 2, Tensor::from_vector(bad), Tensor(), kN, 0.0, 0.0),
                    Catch::Contains("target 7 at row 3 is outside the vocabulary [0, 7)"));
  // A skipped row's target is not read.
  CHECK_NOTHROW(split_loss(logits, 2, Tensor::from_vector(bad),
                           Tensor::from_vector<double>({1, 1, 1, 0, 1, 1}), 5, 0.0, 0.0));
}
