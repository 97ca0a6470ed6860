// The two passes over preference pairs that `ember align` and `ember reward` share
// (docs/model.md#loss-of-an-alignment-step, #reward-model): a step's micro-batches, forward and
// backward, each pair loss over norm = B A, this rank's share P / W of the step's P pairs (the
// reducer averages gradients over ranks, so micro-steps and ranks add up to the mean over P);
// and the held-out pairs in eval mode without a graph. batch_loss(batch, pairs, norm) returns
// a result with the differentiable `loss` and `sums` that add (+=) over batches.
// A micro-batch of B pairs (2B rows) goes through the model in two halves of ceil(B / 2) and
// floor(B / 2) pairs, each forward then backward: at most B + 1 rows' activations are live at a
// time, as in a fine-tune step of B rows, for the same arithmetic (the pair losses are
// independent, so the gradients of the halves add up to the micro-batch's).
#pragma once
#include <algorithm>
#include <vector>

#include "apps/train/run.h"
#include "apps/train/step_phases.h"
#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "core/profiler.h"

namespace ember::apps {

// Every micro-batch of the step, in halves (the reducer syncs on the last): this rank's sums.
template <class Sums, class BatchLoss>
Sums pair_forward_backward(TrainRun& run, BatchLoss&& batch_loss) {
  const int64_t A = run.o.grad_accum;
  dist::Reducer* reducer = run.optimization.reducer.get();
  std::vector<data::PairBatch> batches;
  {
    EMBER_PROFILE_PHASE(kDataPhase);
    EMBER_PROFILE_SCOPE(kDataFamily);
    for (int64_t u = 0; u < A; ++u) {
      const std::vector<int64_t> index = run.pair_loader->batch_pairs(run.step, u);
      for (data::PairBatch& h : data::pair_halves(*run.pairs, index, run.o.seq_len))
        batches.push_back(std::move(h));
    }
  }
  const double norm = static_cast<double>(run.o.batch_size * A);  // P / W
  Sums sums;
  {
    AutocastGuard mixed(run.autocast);  // forward and backward only
    for (size_t u = 0; u < batches.size(); ++u) {
      if (reducer) reducer->set_sync(u + 1 == batches.size());
      auto l = [&] {
        EMBER_PROFILE_PHASE(kForwardPhase);
        return batch_loss(batches[u], *run.pairs, norm);
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

// The held-out pairs in batches of W x B pairs (in halves), norm = their count: the sums.
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
    for (const data::PairBatch& half : data::pair_halves(pairs, index, run.o.seq_len))
      sums += batch_loss(half, pairs, static_cast<double>(n)).sums;
  }
  run.model->train(training);
  return sums;
}

}  // namespace ember::apps
