// The forward and backward passes of one `ember align` step
// (docs/model.md#loss-of-an-alignment-step): each micro-batch's B pairs go through the model as
// one batch of 2B rows (chosen sides, then rejected), the per-side log-probabilities are summed
// over the scored tokens (nn::sequence_logprobs) and the pair loss is taken with norm = the
// step's pair count P = B A W, so the gradients of the micro-batches and ranks add up to the
// gradient of the mean over all P pairs. The reducer averages gradients over ranks, so each rank
// differentiates W x its share: its pair losses are divided by P / W = B A. No z-loss, no MoE
// aux. The metrics (loss, rewards/...) are summed over micro-batches and ranks, then divided by
// P. And the same metrics over the held-out pairs (rank 0, eval mode, no graph).
#include <algorithm>

#include "apps/train/run.h"
#include "apps/train/step_phases.h"
#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/profiler.h"
#include "nn/alignment/sequence_logprobs.h"

namespace ember::apps {
namespace {

// The reference's sums of the batch's pairs, [B] each (undefined when the loss reads none).
void reference_of(const std::vector<double>& ref, const std::vector<int64_t>& pairs, DType dtype,
                  Tensor& ref_c, Tensor& ref_r) {
  if (ref.empty()) return;
  const int64_t B = static_cast<int64_t>(pairs.size());
  Tensor c = Tensor::zeros({B}, DType::Float64), r = Tensor::zeros({B}, DType::Float64);
  for (int64_t b = 0; b < B; ++b) {
    const size_t p = static_cast<size_t>(pairs[static_cast<size_t>(b)]);
    c.data<double>()[b] = ref[2 * p];
    r.data<double>()[b] = ref[2 * p + 1];
  }
  ref_c = c.to(dtype);
  ref_r = r.to(dtype);
}

// The pair loss of one batch under the model (as it is: train or eval mode, graph or not).
nn::PreferenceLossResult batch_loss(TrainRun& run, const data::PairBatch& b,
                                    const std::vector<double>& ref, double norm) {
  const int64_t T = run.o.seq_len, B = static_cast<int64_t>(b.pairs.size());
  const Tensor x = b.tokens.narrow(1, 0, T).contiguous(), y = b.tokens.narrow(1, 1, T).contiguous();
  const nn::SequenceLogprobs s = nn::sequence_logprobs(run.model->forward(x).logits, y, b.scored);
  nn::PairLogprobs p;
  p.logp_c = narrow(s.logp, 0, 0, B);
  p.logp_r = narrow(s.logp, 0, B, B);
  p.n_c = s.n.narrow(0, 0, B).contiguous();
  p.n_r = s.n.narrow(0, B, B).contiguous();
  reference_of(ref, b.pairs, s.logp.dtype(), p.ref_c, p.ref_r);
  return nn::preference_loss(run.preference, p, norm);
}

// The sums over ranks, then divided by the pair count: the metrics.jsonl keys.
std::vector<std::pair<std::string, double>> global_means(const TrainRun& run,
                                                         nn::PreferenceMetrics m) {
  if (run.world > 1) {
    const std::vector<double> sums = run.comm.all_reduce(
        std::vector<double>{m.loss, m.chosen, m.rejected, m.correct, m.pairs}, dist::ReduceOp::Sum);
    m = {sums[0], sums[1], sums[2], sums[3], sums[4]};
  }
  return m.means();
}

}  // namespace

void align_forward_backward(TrainRun& run, StepResult& s) {
  const int64_t A = run.o.grad_accum;
  dist::Reducer* reducer = run.optimization.reducer.get();
  std::vector<data::PairBatch> batches;
  {
    EMBER_PROFILE_PHASE(kDataPhase);
    EMBER_PROFILE_SCOPE(kDataFamily);
    for (int64_t u = 0; u < A; ++u) batches.push_back(run.pair_loader->batch(run.step, u));
  }
  const double norm = static_cast<double>(run.o.batch_size * A);  // P / W
  nn::PreferenceMetrics sums;
  {
    AutocastGuard mixed(run.autocast);  // forward and backward only
    for (int64_t u = 0; u < A; ++u) {
      if (reducer) reducer->set_sync(u == A - 1);
      nn::PreferenceLossResult l;
      {
        EMBER_PROFILE_PHASE(kForwardPhase);
        l = batch_loss(run, batches[static_cast<size_t>(u)], run.ref_logps, norm);
      }
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
  s.metrics = global_means(run, sums);
  s.ce = s.metrics.front().second;  // "loss": the same on every rank
}

std::vector<std::pair<std::string, double>> align_validation(TrainRun& run) {
  const std::vector<data::PreferencePair>& pairs = *run.val_pairs;
  const int64_t n = static_cast<int64_t>(pairs.size());
  const int64_t per_batch = run.world * run.o.batch_size;
  nn::PreferenceMetrics sums;
  NoGradGuard no_grad;
  AutocastGuard mixed(run.autocast);
  const bool training = run.model->is_training();
  run.model->eval();
  for (int64_t start = 0; start < n; start += per_batch) {
    std::vector<int64_t> index;
    for (int64_t i = start; i < std::min(start + per_batch, n); ++i) index.push_back(i);
    sums += batch_loss(run, data::pair_batch(pairs, index, run.o.seq_len), run.val_ref_logps,
                       static_cast<double>(n))
                .sums;
  }
  run.model->train(training);
  return sums.means();
}

}  // namespace ember::apps
