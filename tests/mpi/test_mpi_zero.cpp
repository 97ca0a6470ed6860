// ZeRO-1 and ZeRO-2 (dist::ZeroAdamW over a Reducer in zero mode, with
// shard_grads for stage 2) against plain
// data-parallel AdamW on every rank: the same parameters after several
// clipped steps with two parameter groups, an unused parameter and one that
// only some steps (and ranks) use, the same full (world-size independent)
// moments and per-parameter step counts, ~1/W of the state per rank, and an
// exact continuation after loading a plain AdamW state. ZeRO-2 also: no
// .grad left after finish(), only ~1/W of the gradient held, and gradient
// accumulation (the reduce-scatter on the last micro-step) as plain.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/ops.h"
#include "dist/consistency.h"
#include "dist/zero_adamw.h"
#include "mpi_testing.h"

using namespace ember;
using ember::testing::comm;

namespace {

double max_rel_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to(DType::Float64).to_vector<double>();
  const std::vector<double> y = b.to(DType::Float64).to_vector<double>();
  double scale = 1e-30, worst = 0;
  for (double v : y) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst / scale;
}

// A model's named parameters plus one that no loss ever uses and one that
// step s uses on rank 0 only (s % 3 == 0), on no rank (1) or on every rank (2),
// as a MoE expert that some steps leave idle.
struct Run {
  nn::Transformer model;
  Variable unused, sometimes;
  std::vector<std::pair<std::string, Variable>> named;
  std::vector<Variable> params;
  Run(DType dt)
      : model(testing::tiny_config(), 5, dt),
        unused(Tensor::full({3, 4}, 0.5, dt), true),
        sometimes(Tensor::full({2, 3}, 0.75, dt), true),
        named(model.named_parameters()) {
    named.emplace_back("unused.weight", unused);
    named.emplace_back("sometimes.weight", sometimes);
    for (auto& [n, p] : named) params.push_back(p);
  }
  void backward(int step) {
    model.zero_grad();
    sometimes.zero_grad();
    Variable loss = testing::tiny_loss(model, testing::tiny_batch(comm().rank(), 40 + step));
    if ((step % 3 == 0 && comm().rank() == 0) || step % 3 == 2) {
      loss = loss + sum(sometimes * sometimes) * (0.1 * (comm().rank() + 1));
    }
    loss.backward();
  }
};

// ZeRO-2 after finish(): every .grad released, the staging buffers freed, the
// gradient held is this rank's shard (~numel / W elements), not the full one.
void check_stage2_holds_shard_only(const dist::Reducer& reducer, const std::vector<Variable>& params) {
  for (const Variable& p : params) CHECK_FALSE(p.grad().defined());
  const int r = comm().rank(), w = comm().world_size();
  const int64_t elem = static_cast<int64_t>(dtype_size(params[0].dtype()));
  const int64_t shard = reducer.shard_begin(r + 1) - reducer.shard_begin(r);
  CHECK(reducer.held_bytes() == (std::max<int64_t>(shard, 1) + 1) * elem);
  CHECK(shard <= reducer.numel() / w + 16);
}

}  // namespace

TEST_CASE("ZeRO-1 and ZeRO-2 AdamW take the steps of plain data-parallel AdamW", "[mpi][zero]") {
  const int w = comm().world_size(), r = comm().rank();
  for (const bool stage2 : {false, true})
  for (DType dt : {DType::Float64, DType::Float32}) {
    INFO("ZeRO-" << (stage2 ? 2 : 1) << " " << dtype_name(dt));
    Run plain(dt), zero(dt);
    dist::Reducer plain_reducer(comm(), plain.params, {256, 2048, false});
    dist::Reducer zero_reducer(comm(), zero.params, {256, 2048, true, stage2});
    optim::AdamW plain_opt(optim::decay_groups(plain.named, 0.1));
    dist::ZeroAdamW zero_opt(zero_reducer, optim::decay_groups(zero.named, 0.1));
    // Optimizer state per rank: about 1/W of the full moments.
    const int64_t full = 2 * zero_reducer.numel() * static_cast<int64_t>(dtype_size(dt));
    CHECK(std::abs(zero_opt.state_bytes() - full / w) <= 2 * 16 * w * 8);
    CHECK(comm().all_reduce(double(zero_opt.state_bytes())) == full);

    // float32: the two paths add the ranks' gradients in different orders (ring
    // all-reduce vs reduce-scatter); Adam's normalised step magnifies the ulps,
    // by a factor that depends on the rounding of every op (after 4 steps at
    // 3 ranks: 3.5e-6 to 2.6e-5 with equally accurate attention kernels).
    const double tol = dt == DType::Float64 ? 1e-12 : 5e-5;
    const double norm_tol = dt == DType::Float64 ? 1e-9 : 1e-6;
    for (int step = 0; step < 4; ++step) {
      const double lr = 1e-2 * (step + 1);
      plain.backward(step);
      plain_reducer.finish();
      const double plain_norm = plain_reducer.clip_grad_norm(0.5);
      plain_opt.step(lr);
      zero.backward(step);
      zero_reducer.finish();
      if (stage2) check_stage2_holds_shard_only(zero_reducer, zero.params);
      const double zero_norm = zero_reducer.clip_grad_norm(0.5);
      zero_opt.step(lr);
      CHECK(zero_norm == Approx(plain_norm).epsilon(norm_tol));
      double worst = 0;
      for (size_t k = 0; k < plain.params.size(); ++k) {
        worst = std::max(worst, max_rel_diff(zero.params[k].data(), plain.params[k].data()));
      }
      CHECK(worst < tol);
    }
    // Both keep every rank's parameters bitwise equal.
    CHECK_NOTHROW(dist::check_parameters_consistent(comm(), plain.params, 4));
    CHECK_NOTHROW(dist::check_parameters_consistent(comm(), zero.params, 4));
    // Untouched: no rank ever produced its gradient, so AdamW skipped it.
    CHECK(zero.unused.data().to_vector<double>() == std::vector<double>(12, 0.5));
    // Full moments, the same keys and values as plain AdamW's (world-size independent).
    const auto zs = zero_opt.state_dict();
    const auto ps = plain_opt.state_dict();
    REQUIRE(zs.size() == ps.size());
    double worst = 0;
    for (const auto& [key, t] : ps) {
      REQUIRE(zs.count(key));
      CHECK(zs.at(key).shape() == t.shape());
      worst = std::max(worst, max_rel_diff(zs.at(key), t));
    }
    CHECK(worst < 50 * tol);
    // Gathered to one rank a parameter at a time (checkpoints): state_dict's tensors, exactly.
    const int root = w - 1;
    std::map<std::string, Tensor> streamed;
    zero_opt.gather_state(root, r == root ? dist::ZeroAdamW::StateSink(
                                                [&](const std::string& key, const Tensor& t) {
                                                  REQUIRE(!streamed.count(key));
                                                  streamed[key] = t.clone();
                                                })
                                          : dist::ZeroAdamW::StateSink());
    if (r == root) {
      REQUIRE(streamed.size() == zs.size());
      for (const auto& [key, t] : zs) {
        REQUIRE(streamed.count(key));
        CHECK(streamed.at(key).shape() == t.shape());
        CHECK(max_rel_diff(streamed.at(key), t) == 0);
      }
    } else {
      CHECK(streamed.empty());
    }
    // Steps 0, 2 and 3 had some rank's gradient of `sometimes`; no step had `unused`'s.
    CHECK(zero_opt.param_steps() == plain_opt.param_steps());
    CHECK(zero_opt.param_steps().at("sometimes.weight") == 3);
    CHECK(zero_opt.param_steps().at("unused.weight") == 0);
    CHECK(zero_opt.param_steps().at("model.norm.weight") == 4);

    // Resume: a fresh ZeroAdamW from plain AdamW's state continues identically.
    Run resumed(dt);
    for (size_t k = 0; k < resumed.params.size(); ++k)
      resumed.params[k].data().copy_(plain.params[k].data());
    dist::Reducer resumed_reducer(comm(), resumed.params, {1 << 20, 1 << 20, true, stage2});
    dist::ZeroAdamW resumed_opt(resumed_reducer, optim::decay_groups(resumed.named, 0.1));
    resumed_opt.load_state_dict(ps, plain_opt.steps(), plain_opt.param_steps());
    CHECK(resumed_opt.steps() == 4);
    CHECK(resumed_opt.param_steps() == plain_opt.param_steps());
    plain.backward(9);  // uses `sometimes` again: its 4th update, the optimizer's 5th
    plain_reducer.finish();
    plain_opt.step(1e-2);
    resumed.backward(9);
    resumed_reducer.finish();
    resumed_opt.step(1e-2);
    worst = 0;
    for (size_t k = 0; k < plain.params.size(); ++k) {
      worst = std::max(worst, max_rel_diff(resumed.params[k].data(), plain.params[k].data()));
    }
    CHECK(worst < tol);
    // Every rank holds the same parameters after the all-gather.
    const std::vector<uint64_t> sums =
        comm().all_gather(std::hash<std::string>{}(resumed.params[0].data().to_string(100)));
    CHECK(sums == std::vector<uint64_t>(w, sums[0]));
  }
}

TEST_CASE("ZeroAdamW checks its Reducer and the state it loads", "[mpi][zero]") {
  Run run(DType::Float32);
  dist::Reducer plain(comm(), run.params, {});
  CHECK_THROWS_WITH(dist::ZeroAdamW(plain, optim::decay_groups(run.named, 0.1)),
                    Catch::Contains("zero = true"));
  dist::Reducer zero(comm(), run.params, {64, 256, true});
  dist::ZeroAdamW opt(zero, optim::decay_groups(run.named, 0.1));
  auto state = opt.state_dict();
  state.erase("model.norm.weight/exp_avg_sq");
  CHECK_THROWS_WITH(opt.load_state_dict(state, 1),
                    Catch::Contains("missing model.norm.weight/exp_avg_sq"));
}

TEST_CASE("ZeRO-2 with gradient accumulation and clipping takes plain AdamW's steps", "[mpi][zero]") {
  // Two micro-steps per step: plain all-reduces the summed gradients, ZeRO-2
  // reduce-scatters them on the last micro-step; clipping at 0.05 triggers.
  Run plain(DType::Float32), zero(DType::Float32);
  dist::Reducer plain_reducer(comm(), plain.params, {256, 1024, false});
  dist::Reducer zero_reducer(comm(), zero.params, {256, 1024, true, true});
  optim::AdamW plain_opt(optim::decay_groups(plain.named, 0.1));
  dist::ZeroAdamW zero_opt(zero_reducer, optim::decay_groups(zero.named, 0.1));
  for (int step = 0; step < 3; ++step) {
    double norms[2];
    for (int which = 0; which < 2; ++which) {
      Run& run = which ? zero : plain;
      dist::Reducer& reducer = which ? zero_reducer : plain_reducer;
      run.model.zero_grad();
      for (int micro = 0; micro < 2; ++micro) {
        reducer.set_sync(micro == 1);
        (testing::tiny_loss(run.model, testing::tiny_batch(comm().rank(), 10 * step + micro)) * 0.5).backward();
      }
      reducer.finish();
      norms[which] = reducer.clip_grad_norm(0.05);
      (which ? static_cast<optim::Optimizer&>(zero_opt) : plain_opt).step(1e-2);
    }
    CHECK(norms[0] > 0.05);  // clipping is active
    CHECK(norms[1] == Approx(norms[0]).epsilon(1e-6));
    double worst = 0;
    for (size_t k = 0; k < plain.params.size(); ++k) {
      worst = std::max(worst, max_rel_diff(zero.params[k].data(), plain.params[k].data()));
    }
    CHECK(worst < 5e-5);
  }
  for (const Variable& p : zero.params) CHECK_FALSE(p.grad().defined());
  CHECK_NOTHROW(dist::check_parameters_consistent(comm(), zero.params, 3));
}

TEST_CASE("A ZeRO-2 Reducer needs zero mode", "[mpi][zero]") {
  Run run(DType::Float32);
  CHECK_THROWS_WITH(dist::Reducer(comm(), run.params, {64, 256, false, true}),
                    Catch::Contains("shard_grads (ZeRO-2) needs zero = true"));
}
