// The forward and backward passes of one `ember align` step
// (docs/model.md#loss-of-an-alignment-step): each micro-batch's B pairs go through the model as
// one batch of 2B rows (chosen sides, then rejected), the per-side log-probabilities are summed
// over the scored tokens (nn::sequence_logprobs) and the pair loss is taken with norm = the
// step's pair count P = B A W, so the gradients of the micro-batches and ranks add up to the
// gradient of the mean over all P pairs. The reducer averages gradients over ranks, so each rank
// differentiates W x its share: its pair losses are divided by P / W = B A. No z-loss, no MoE
// aux. The metrics (loss, rewards/...) are summed over micro-batches and ranks, then divided by
// P. And the same metrics over the held-out pairs (rank 0, eval mode, no graph). The loops are
// pair_step.h's, shared with ember reward.
#include "apps/train/pair_step.h"
#include "autograd/ops.h"
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
  const auto sums = pair_forward_backward<nn::PreferenceMetrics>(
      run, [&](const data::PairBatch& b, const std::vector<data::PreferencePair>&, double norm) {
        return batch_loss(run, b, run.ref_logps, norm);
      });
  s.metrics = global_means(run, sums);
  s.ce = s.metrics.front().second;  // "loss": the same on every rank
}

std::vector<std::pair<std::string, double>> align_validation(TrainRun& run) {
  return pair_validation<nn::PreferenceMetrics>(
             run,
             [&](const data::PairBatch& b, const std::vector<data::PreferencePair>&, double norm) {
               return batch_loss(run, b, run.val_ref_logps, norm);
             })
      .means();
}

}  // namespace ember::apps
