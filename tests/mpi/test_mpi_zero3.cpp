// ZeRO-3 (dist::ShardedParameters with apps::Zero3Residency over a Reducer
// with one unit per block): outside a block's window a rank holds only its
// shard of the block's parameters (about 1/W of every bucket, balanced), and
// during the forward at most the current block, the one prefetched and the
// non-block unit; after a step, the shard alone. Several clipped steps take
// the same parameters as plain data-parallel AdamW (every parameter gathered
// to compare), also with activation checkpointing (the recompute gathers
// again); tensors saved for backward survive the release and re-gather.
#include <catch2/catch.hpp>
#include <cmath>

#include "apps/train/zero3_residency.h"
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

// Parameter bytes of unit u (block u, or the rest for u = n_layers).
int64_t unit_bytes(const std::vector<std::pair<std::string, Variable>>& named,
                   const std::vector<int64_t>& units, int64_t u) {
  int64_t bytes = 0;
  for (size_t k = 0; k < named.size(); ++k) {
    if (units[k] == u) bytes += static_cast<int64_t>(named[k].second.data().nbytes());
  }
  return bytes;
}

// Zero3Residency that checks, as each block's forward starts, which units are resident and
// how many bytes this rank holds.
class Watched : public apps::Zero3Residency {
 public:
  Watched(dist::ShardedParameters& s, int64_t blocks, int64_t limit)
      : Zero3Residency(s, blocks), s_(s), blocks_(blocks), limit_(limit) {}
  void before_forward(size_t i) override {
    Zero3Residency::before_forward(i);
    CHECK(s_.resident(static_cast<int64_t>(i)));
    CHECK(s_.resident(blocks_));      // the non-block units: the rest
    CHECK(s_.resident(blocks_ + 1));  // and the token table
    for (int64_t u = 0; u < blocks_; ++u) {
      if (u != static_cast<int64_t>(i)) CHECK_FALSE(s_.resident(u));
    }
    CHECK(s_.held_bytes() <= limit_);
    ++forwards;
  }
  void after_backward(size_t i) override {
    Zero3Residency::after_backward(i);
    CHECK_FALSE(s_.resident(static_cast<int64_t>(i)));
    CHECK_FALSE(s_.resident(blocks_));  // the non-block units went after the head's backward
    CHECK_FALSE(s_.resident(blocks_ + 1));
    ++backwards;
  }
  int forwards = 0, backwards = 0;

 private:
  dist::ShardedParameters& s_;
  int64_t blocks_, limit_;
};

nn::ModelConfig four_blocks() {
  nn::ModelConfig cfg = testing::tiny_config();
  cfg.n_layers = 4;
  return cfg;
}

}  // namespace

TEST_CASE("ZeRO-3 holds only the shard outside a block's window", "[mpi][zero3]") {
  const int w = comm().world_size();
  nn::Transformer model(four_blocks(), 3);
  const auto named = model.named_parameters();
  const int64_t L = model.config().n_layers;
  dist::ReducerOptions ro{256, 2048, true, true};
  ro.units = apps::block_units(named, L);
  dist::Reducer reducer(comm(), model.parameters(), ro);
  dist::ShardedParameters sharded(reducer);
  sharded.shard();
  const int64_t elem = 4, shard = std::max<int64_t>(reducer.shard_numel(), 1) * elem;
  // Every bucket (a block's, or the rest's) is split evenly: about numel / W each.
  CHECK(reducer.shard_numel() <= reducer.numel() / w + 16 * static_cast<int64_t>(reducer.buckets().size()));
  CHECK(comm().all_reduce(double(reducer.shard_numel())) == reducer.numel());
  for (size_t b = 0; b < reducer.buckets().size(); ++b) {
    const auto& counts = reducer.bucket_shard_counts(b);
    const int64_t n = reducer.buckets()[b].end - reducer.buckets()[b].begin;
    for (int r = 0; r < w; ++r) CHECK(counts[r] <= n / w + 16);
  }
  CHECK(sharded.held_bytes() == shard);
  for (int64_t u = 0; u <= L + 1; ++u) {
    CHECK_FALSE(sharded.resident(u));
    for (size_t k = 0; k < named.size(); ++k) {
      if (ro.units[k] == u) CHECK(named[k].second.data().storage()->data() == nullptr);
    }
  }
  sharded.gather(1);
  CHECK(sharded.held_bytes() == shard + unit_bytes(named, ro.units, 1));
  sharded.release(1);
  CHECK(sharded.held_bytes() == shard);

  // A training forward and backward: at each block's start the block, the next (in flight or
  // resident) and the rest; the block released after its backward; the shard alone at the end.
  const int64_t block = unit_bytes(named, ro.units, 0);
  auto watched = std::make_shared<Watched>(
      sharded, L,
      shard + unit_bytes(named, ro.units, L) + unit_bytes(named, ro.units, L + 1) + 2 * block);
  model.set_block_residency(watched);
  testing::tiny_loss(model, testing::tiny_batch(comm().rank(), 0)).backward();
  reducer.finish();
  sharded.release_all();
  CHECK(watched->forwards == L);
  CHECK(watched->backwards == L);
  CHECK(sharded.held_bytes() == shard);
}

TEST_CASE("ZeRO-3 takes the steps of plain data-parallel AdamW", "[mpi][zero3]") {
  for (const int64_t checkpoint_every : {0, 1}) {
    INFO("checkpoint every " << checkpoint_every);
    nn::Transformer plain(four_blocks(), 7), zero(four_blocks(), 7);
    plain.set_activation_checkpointing(checkpoint_every);
    zero.set_activation_checkpointing(checkpoint_every);
    const auto plain_named = plain.named_parameters(), zero_named = zero.named_parameters();
    dist::Reducer plain_reducer(comm(), plain.parameters(), {256, 2048, false});
    dist::ReducerOptions ro{256, 2048, true, true};
    ro.units = apps::block_units(zero_named, zero.config().n_layers);
    dist::Reducer zero_reducer(comm(), zero.parameters(), ro);
    dist::ShardedParameters sharded(zero_reducer);
    sharded.shard();
    optim::AdamW plain_opt(optim::decay_groups(plain_named, 0.1));
    dist::ZeroAdamW zero_opt(zero_reducer, optim::decay_groups(zero_named, 0.1));
    zero_opt.set_parameter_shard(sharded.values());
    zero.set_block_residency(std::make_shared<apps::Zero3Residency>(sharded, zero.config().n_layers));
    for (int step = 0; step < 3; ++step) {
      const double lr = 1e-2 * (step + 1);
      const Tensor batch = testing::tiny_batch(comm().rank(), 10 + step);
      plain_opt.zero_grad();
      testing::tiny_loss(plain, batch).backward();
      plain_reducer.finish();
      const double plain_norm = plain_reducer.clip_grad_norm(0.5);
      plain_opt.step(lr);
      zero_opt.zero_grad();
      testing::tiny_loss(zero, batch).backward();
      zero_reducer.finish();
      sharded.release_all();
      const double zero_norm = zero_reducer.clip_grad_norm(0.5);
      zero_opt.step(lr);
      CHECK(zero_norm == Approx(plain_norm).epsilon(1e-6));
    }
    sharded.hold_all();
    double worst = 0;
    for (size_t k = 0; k < plain_named.size(); ++k) {
      worst = std::max(worst, max_rel_diff(zero_named[k].second.data(), plain_named[k].second.data()));
    }
    CHECK(worst < 5e-5);
    CHECK_NOTHROW(dist::check_parameters_consistent(comm(), zero.parameters(), 3));
    // The full moments, as plain AdamW's.
    const auto zs = zero_opt.state_dict(), ps = plain_opt.state_dict();
    REQUIRE(zs.size() == ps.size());
    double worst_state = 0;
    for (const auto& [key, t] : ps) worst_state = std::max(worst_state, max_rel_diff(zs.at(key), t));
    CHECK(worst_state < 1e-3);
    sharded.release_all();
  }
}
