// dist::Reducer with real backward passes of a tiny Transformer on every
// rank: bucket layout (reverse registration order, small first bucket), the
// same gradients as a manual all-reduce average, buckets started by hooks
// while backward still runs, unused parameters, gradient accumulation with
// no communication before the synchronizing micro-step, and clipping.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/ops.h"
#include "core/allocator.h"
#include "dist/reducer.h"
#include "mpi_testing.h"
#include "optim/adamw.h"
#include "optim/clip.h"

using namespace ember;
using ember::testing::comm;

namespace {

// Largest |a - b| / (|b| + 1e-8 * scale) over two parameter lists' gradients.
double max_grad_rel_err(const std::vector<Variable>& a, const std::vector<Variable>& b) {
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    const bool da = a[k].grad().defined(), db = b[k].grad().defined();
    if (da != db) return 1e30;
    if (!da) continue;
    const std::vector<double> x = a[k].grad().to(DType::Float64).to_vector<double>();
    const std::vector<double> y = b[k].grad().to(DType::Float64).to_vector<double>();
    double scale = 0;
    for (double v : y) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::abs(x[i] - y[i]) / (scale + 1e-30));
    }
  }
  return worst;
}

// Reference: the same model's local gradients, all-reduced one by one and averaged.
void manual_average(const std::vector<Variable>& params) {
  for (const Variable& p : params) {
    if (p.grad().defined()) comm().all_reduce(p.grad(), dist::ReduceOp::Average);
  }
}

}  // namespace

TEST_CASE("buckets hold parameters in reverse registration order, small first", "[mpi][reducer]") {
  nn::Transformer model(testing::tiny_config(), 1);
  const auto params = model.parameters();
  dist::Reducer reducer(comm(), params, {256, 2048, false});
  const auto& buckets = reducer.buckets();
  REQUIRE(buckets.size() > 2);
  CHECK(buckets[0].params.front() == params.size() - 1);
  CHECK(buckets.back().params.back() == 0);
  int64_t expect_begin = 0;
  size_t expect_param = params.size();
  for (size_t b = 0; b < buckets.size(); ++b) {
    CHECK(buckets[b].begin == expect_begin);
    const int64_t cap = b == 0 ? 256 : 2048;
    if (buckets[b].params.size() > 1) CHECK((buckets[b].end - buckets[b].begin) * 4 <= cap);
    for (size_t k : buckets[b].params) {
      CHECK(k == --expect_param);
      CHECK(reducer.flat_offset(k) >= buckets[b].begin);
    }
    expect_begin = buckets[b].end;
  }
  CHECK(reducer.numel() == expect_begin);
}

TEST_CASE("bucketed all-reduce gives the averaged gradients, started during backward",
          "[mpi][reducer]") {
  const int w = comm().world_size(), r = comm().rank();
  for (DType dt : {DType::Float64, DType::Float32}) {
    nn::Transformer model(testing::tiny_config(), 1, dt), ref(testing::tiny_config(), 1, dt);
    const auto params = model.parameters(), ref_params = ref.parameters();
    dist::Reducer reducer(comm(), params, {256, 2048, false});
    const int64_t n_buckets = static_cast<int64_t>(reducer.buckets().size());
    // A second hook on every parameter records how many buckets were in flight.
    std::vector<int64_t> seen;
    for (const Variable& p : params) {
      p.register_post_accumulate_grad_hook(
          [&](Variable&) { seen.push_back(reducer.launched_buckets()); });
    }
    for (int step = 0; step < 2; ++step) {
      model.zero_grad();
      ref.zero_grad();
      seen.clear();
      const Tensor ids = testing::tiny_batch(r, step);
      testing::tiny_loss(model, ids).backward();
      if (w > 1) {
        // Every bucket started from a hook before backward returned; some while
        // gradients of other parameters were still to come.
        CHECK(reducer.launched_buckets() == n_buckets);
        bool mid = false;
        for (int64_t s : seen) mid = mid || (s > 0 && s < n_buckets);
        CHECK(mid);
      }
      reducer.finish();
      testing::tiny_loss(ref, ids).backward();
      manual_average(ref_params);
      CHECK(max_grad_rel_err(params, ref_params) < (dt == DType::Float64 ? 1e-13 : 1e-6));
      if (w > 1) {
        CHECK(reducer.stats().buckets == n_buckets);
        CHECK(reducer.stats().launched_in_backward == n_buckets);
        CHECK(reducer.stats().bytes == reducer.numel() * static_cast<int64_t>(dtype_size(dt)));
        CHECK(reducer.stats().wait_seconds <= reducer.stats().comm_seconds + 1e-9);
      }
      CHECK(reducer.launched_buckets() == 0);
    }
    // Clipping: the global norm of the averaged gradients, identical on every rank.
    const double norm = reducer.clip_grad_norm(0.01);
    CHECK(norm == Approx(optim::grad_norm(ref_params)).epsilon(1e-6));
    CHECK(comm().all_reduce(norm, dist::ReduceOp::Max) ==
          comm().all_reduce(norm, dist::ReduceOp::Min));
    CHECK(optim::grad_norm(params) == Approx(0.01).epsilon(1e-4));
  }
}

TEST_CASE("buckets over message_bytes go out in pieces and sum the same", "[mpi][reducer]") {
  // 100-byte messages (12 doubles): every bucket of the tiny model is several pieces, each
  // started after the previous one completes; plain, ZeRO-1 and ZeRO-2 against one message
  // per bucket.
  const int r = comm().rank();
  for (const bool zero : {false, true}) {
    for (const bool shard_grads : {false, true}) {
      if (shard_grads && !zero) continue;
      INFO("zero " << zero << ", shard_grads " << shard_grads);
      nn::Transformer whole(testing::tiny_config(), 5, DType::Float64),
          pieces(testing::tiny_config(), 5, DType::Float64);
      dist::ReducerOptions one{256, 2048, zero, shard_grads};
      dist::ReducerOptions many = one;
      many.message_bytes = 100;
      dist::Reducer a(comm(), whole.parameters(), one), b(comm(), pieces.parameters(), many);
      REQUIRE(b.buckets().size() == a.buckets().size());
      for (int step = 0; step < 2; ++step) {
        whole.zero_grad();
        pieces.zero_grad();
        const Tensor ids = testing::tiny_batch(r, step);
        testing::tiny_loss(whole, ids).backward();
        a.finish();
        testing::tiny_loss(pieces, ids).backward();
        b.finish();
        if (zero) {
          const std::vector<double> x = b.shard_grad().to_vector<double>();
          const std::vector<double> y = a.shard_grad().to_vector<double>();
          REQUIRE(x.size() == y.size());
          double worst = 0;
          for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
          CHECK(worst < 1e-12);
        } else {
          CHECK(max_grad_rel_err(pieces.parameters(), whole.parameters()) < 1e-13);
        }
        CHECK(b.stats().bytes == a.stats().bytes);
        CHECK(b.launched_buckets() == 0);
      }
    }
  }
}

TEST_CASE("parameters used on some ranks only, or on none", "[mpi][reducer]") {
  const int w = comm().world_size(), r = comm().rank();
  Variable a(Tensor::full({3}, 1.0, DType::Float64), true);
  Variable some(Tensor::full({5}, 2.0, DType::Float64), true);  // used on rank 0 only
  Variable none(Tensor::full({2}, 3.0, DType::Float64), true);  // never used
  Variable b(Tensor::full({4}, 1.0, DType::Float64), true);
  dist::Reducer reducer(comm(), {a, some, none, b}, {8, 16, false});
  Variable loss = add(sum(mul_scalar(a, r + 1.0)), sum(mul(b, b)));
  if (r == 0) loss = add(loss, sum(mul_scalar(some, 4.0)));
  loss.backward();
  reducer.finish();
  CHECK(a.grad().to_vector<double>() == std::vector<double>(3, (w + 1) / 2.0));
  CHECK(b.grad().to_vector<double>() == std::vector<double>(4, 2.0));
  REQUIRE(some.grad().defined());
  CHECK(some.grad().to_vector<double>() == std::vector<double>(5, 4.0 / w));
  CHECK_FALSE(none.grad().defined());
  CHECK(reducer.has_grad() == std::vector<bool>{true, true, false, true});
}

TEST_CASE("gradient accumulation communicates on the last micro-step only", "[mpi][reducer]") {
  const int w = comm().world_size(), r = comm().rank();
  const int accum = 3;
  nn::Transformer model(testing::tiny_config(), 2, DType::Float64),
      ref(testing::tiny_config(), 2, DType::Float64);
  const auto params = model.parameters(), ref_params = ref.parameters();
  dist::Reducer reducer(comm(), params, {512, 4096, false});
  for (int u = 0; u < accum; ++u) {
    reducer.set_sync(u == accum - 1);
    const Tensor ids = testing::tiny_batch(r, 10 + u);
    Variable loss = mul_scalar(testing::tiny_loss(model, ids), 1.0 / accum);
    loss.backward();
    if (u < accum - 1) CHECK(reducer.launched_buckets() == 0);  // nothing communicated yet
    mul_scalar(testing::tiny_loss(ref, ids), 1.0 / accum).backward();
  }
  if (w > 1) CHECK(reducer.launched_buckets() == static_cast<int64_t>(reducer.buckets().size()));
  reducer.finish();
  manual_average(ref_params);
  CHECK(max_grad_rel_err(params, ref_params) < 1e-13);
  // A backward in a synchronized step without finish() is caught on the next.
  reducer.set_sync(true);
  model.zero_grad();
  testing::tiny_loss(model, testing::tiny_batch(r, 20)).backward();
  if (w > 1) {
    CHECK_THROWS_WITH(testing::tiny_loss(model, testing::tiny_batch(r, 21)).backward(),
                      Catch::Contains("became final twice"));
  }
  reducer.finish();
}

TEST_CASE("finish() alone synchronizes when no hook ran (set_sync(false) throughout)",
          "[mpi][reducer]") {
  const int r = comm().rank();
  nn::Transformer model(testing::tiny_config(), 3, DType::Float64),
      ref(testing::tiny_config(), 3, DType::Float64);
  dist::Reducer reducer(comm(), model.parameters(), {});
  reducer.set_sync(false);
  testing::tiny_loss(model, testing::tiny_batch(r, 30)).backward();
  CHECK(reducer.launched_buckets() == 0);
  reducer.finish();
  CHECK(reducer.stats().launched_in_backward == 0);
  testing::tiny_loss(ref, testing::tiny_batch(r, 30)).backward();
  manual_average(ref.parameters());
  CHECK(max_grad_rel_err(model.parameters(), ref.parameters()) < 1e-13);
}

TEST_CASE("W ranks of B rows take the step of one process with W * B rows", "[mpi][reducer]") {
  const int w = comm().world_size(), r = comm().rank();
  const int64_t B = 2;
  nn::Transformer model(testing::tiny_config(), 4, DType::Float64);
  nn::Transformer whole(testing::tiny_config(), 4, DType::Float64);
  dist::Reducer reducer(comm(), model.parameters(), {256, 2048, false});
  optim::AdamW opt(optim::decay_groups(model.named_parameters(), 0.1));
  optim::AdamW whole_opt(optim::decay_groups(whole.named_parameters(), 0.1));
  for (int step = 0; step < 3; ++step) {
    const Tensor all = testing::tiny_batch(0, 60 + step, w * B);  // the global batch, on every rank
    opt.zero_grad();
    testing::tiny_loss(model, all.narrow(0, r * B, B).contiguous()).backward();
    reducer.finish();
    reducer.clip_grad_norm(1.0);
    opt.step(1e-2);
    whole_opt.zero_grad();
    testing::tiny_loss(whole, all).backward();
    optim::clip_grad_norm(whole.parameters(), 1.0);
    whole_opt.step(1e-2);
  }
  const auto a = model.parameters(), b = whole.parameters();
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    const auto x = a[k].data().to_vector<double>(), y = b[k].data().to_vector<double>();
    for (size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::abs(x[i] - y[i]) / (std::abs(y[i]) + 1e-3));
    }
  }
  CHECK(worst < 1e-10);
}

// Plain data parallelism keeps one flat buffer of the gradients and nothing more; ZeRO keeps
// this rank's shard of it besides (a shard allocated without ZeRO cost 1/W of the model).
TEST_CASE("the reducer keeps a shard of the gradient only under ZeRO", "[mpi][reducer]") {
  const int64_t n = int64_t{1} << 20;  // 4 MiB of float32 in two parameters
  std::vector<Variable> params{Variable(Tensor::zeros({n / 2}), true), Variable(Tensor::zeros({n / 2}), true)};
  const int W = comm().world_size();
  const size_t flat = allocator_bucket_size(static_cast<size_t>(n) * 4), small = 4096;  // flags and the like
  for (const bool zero : {false, true}) {
    const size_t before = allocator_stats().bytes_in_use;
    dist::Reducer reducer(comm(), params, dist::ReducerOptions{.zero = zero});
    const size_t grown = allocator_stats().bytes_in_use - before;
    INFO("zero " << zero << ": the reducer holds " << grown << " bytes; the flat buffer is " << flat);
    if (!zero) {
      CHECK(grown <= flat + small);
      CHECK(reducer.shard_grad().numel() == 0);
    } else {
      CHECK(reducer.shard_grad().numel() == reducer.shard_numel());
      CHECK(grown >= flat + static_cast<size_t>(n / W) * 4 - 64);
    }
  }
}
