// Data-parallel pieces of the trainer (see data_parallel.h).
#include "apps/train/data_parallel.h"

#include <cstdio>

#include "apps/train/zero3_residency.h"
#include "dist/zero_adamw.h"
#include "optim/adamw.h"

namespace ember::apps {

Optimization make_optimization(dist::Communicator& comm, nn::Transformer& model,
                               const std::vector<std::pair<std::string, Variable>>& named,
                               const TrainOptions& o) {
  Optimization r;
  std::vector<Variable> params;
  for (const auto& [name, v] : named) params.push_back(v);
  if (comm.world_size() > 1 || o.zero) {
    dist::ReducerOptions ro;
    ro.bucket_bytes = o.bucket_mb << 20;
    ro.first_bucket_bytes = std::min<int64_t>(ro.first_bucket_bytes, ro.bucket_bytes);
    ro.zero = o.zero != 0;
    ro.shard_grads = o.zero >= 2;
    if (o.zero == 3) {
      EMBER_CHECK(named.size() == model.named_parameters().size(),
                  "--zero 3 shards every parameter and needs all of them trained");
      ro.units = block_units(named, model.config().n_layers);
    }
    r.reducer = std::make_unique<dist::Reducer>(comm, params, ro);
  }
  const optim::AdamWOptions adamw{o.beta1, o.beta2, 1e-8};
  auto groups = optim::decay_groups(named, o.weight_decay);
  if (o.zero) {
    auto zero = std::make_unique<dist::ZeroAdamW>(*r.reducer, std::move(groups), adamw);
    if (o.zero == 3) {
      r.sharded = std::make_unique<dist::ShardedParameters>(*r.reducer);
      r.sharded->shard();
      zero->set_parameter_shard(r.sharded->values());
      model.set_block_residency(
          std::make_shared<Zero3Residency>(*r.sharded, model.config().n_layers));
    }
    r.optimizer = std::move(zero);
  } else {
    r.optimizer = std::make_unique<optim::AdamW>(std::move(groups), adamw);
  }
  return r;
}

HeldParameters::HeldParameters(const Optimization& optimization, bool hold) {
  if (!hold || !optimization.sharded) return;
  sharded_ = optimization.sharded.get();
  sharded_->hold_all();
}

HeldParameters::~HeldParameters() {
  if (sharded_) sharded_->release_all();
}

void note_global_batch_change(const dist::Communicator& comm, int64_t saved_world, int64_t saved_batch, int64_t world,
                              int64_t batch) {
  const long long saved_rows = saved_world * saved_batch, rows = world * batch;
  if (!comm.is_root() || saved_batch <= 0 || saved_rows == rows) return;
  std::printf("note: the checkpoint was written by %lld rank(s) x batch %lld = %lld rows per micro-step; this run "
              "has %lld x %lld = %lld, so the data order and the gradient noise change",
              static_cast<long long>(saved_world), static_cast<long long>(saved_batch), saved_rows,
              static_cast<long long>(world), static_cast<long long>(batch), rows);
  if (saved_rows % world == 0) {
    std::printf(" (give --batch-size %lld to keep them)", saved_rows / world);
  }
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace ember::apps
