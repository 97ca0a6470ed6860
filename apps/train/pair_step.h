// The two passes over preference pairs that `ember align` and `ember reward` share
// (docs/model.md#loss-of-an-alignment-step, #reward-model): a step's micro-batches, forward and
// backward, each pair loss over norm = B A, this rank's share P / W of the step's P pairs (the
// reducer averages gradients over ranks, so micro-steps and ranks add up to the mean over P);
// and the held-out pairs in eval mode without a graph. batch_loss(batch, pairs, norm) returns
// a result with the differentiable `loss` and `sums` that add (+=) over batches.
#pragma once
#include <algorithm>
#include <vector>

#include "apps/train/run.h"
#include "apps/train/step_phases.h"
#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "core/profiler.h"

namespace ember::apps {

// Every micro-batch of the step (the reducer syncs on the last): this rank's sums.
template <class Sums, class BatchLoss>
Sums pair_forward_backward(TrainRun& run, BatchLoss&& batch_loss) {
  const int64_t A = run.o.grad_accum;
  dist::Reducer* reducer = run.optimization.reducer.get();
  std::vector<data::PairBatch> batches;
  {
    EMBER_PROFILE_PHASE(kDataPhase);
    EMBER_PROFILE_SCOPE(kDataFamily);
    for (int64_t u = 0; u < A; ++u) batches.push_back(run.pair_loader->batch(run.step, u));
  }
  const double norm = static_cast<double>(run.o.batch_size * A);  // P / W
  Sums sums;
  {
    AutocastGuard mixed(run.autocast);  // forward and backward only
    for (int64_t u = 0; u < A; ++u) {
      if (reducer) reducer->set_sync(u == A - 1);
      auto l = [&] {
        EMBER_PROFILE_PHASE(kForwardPhase);
        return batch_loss(batches[static_cast<size_t>(u)], *run.pairs, norm);
      }();
      {
        EMBER_PROFILE_PHASE(kBackwardPhase);
        l.loss.backward();
      }
      sums += l.sums;
    }
  }
  if (reducer) {
    EMBER_PROFILE_PHASE(kCommWaitPhase);
    reducer->finish();
  }
  return sums;
}

// The held-out pairs in batches of W x B pairs, norm = their count: the sums.
template <class Sums, class BatchLoss>
Sums pair_validation(TrainRun& run, BatchLoss&& batch_loss) {
  const std::vector<data::PreferencePair>& pairs = *run.val_pairs;
  const int64_t n = static_cast<int64_t>(pairs.size());
  const int64_t per_batch = run.world * run.o.batch_size;
  Sums sums;
  NoGradGuard no_grad;
  AutocastGuard mixed(run.autocast);
  const bool training = run.model->is_training();
  run.model->eval();
  for (int64_t start = 0; start < n; start += per_batch) {
    std::vector<int64_t> index;
    for (int64_t i = start; i < std::min(start + per_batch, n); ++i) index.push_back(i);
    sums += batch_loss(data::pair_batch(pairs, index, run.o.seq_len), pairs, static_cast<double>(n))
                .sums;
  }
  run.model->train(training);
  return sums;
}

}  // namespace ember::apps
