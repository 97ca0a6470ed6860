// The forward and backward passes of one `ember reward` step (docs/model.md#reward-model): each
// micro-batch's B pairs go through the model as one batch of 2B rows (chosen sides, then
// rejected), each side scored by score.weight on the final-norm output at its last input
// position (a side of L <= T+1 ids feeds min(L, T) of them: read at min(L, T) - 1), and the
// Bradley-Terry loss with the pairs' margins and --center-rewards is taken over norm = B A, this
// rank's share of the step's P = B A W pairs (pair_step.h). No reference, no z-loss, no MoE aux.
// The metrics (loss, accuracy, margin) are summed over micro-batches and ranks, then divided by
// P; the same over the held-out pairs (rank 0, eval mode, no graph).
#include "apps/train/pair_step.h"
#include "autograd/ops.h"
#include "nn/alignment/reward_model.h"

namespace ember::apps {
namespace {

// The last input position of each row of b [2B] (chosen sides, then rejected), and each
// pair's margin [B] (float64), from the batch's pairs in `pairs`.
void sides_of(const data::PairBatch& b, const std::vector<data::PreferencePair>& pairs, int64_t T,
              Tensor& last, Tensor& margin) {
  const int64_t B = static_cast<int64_t>(b.pairs.size());
  last = Tensor::zeros({2 * B}, DType::Int64);
  margin = Tensor::zeros({B}, DType::Float64);
  const auto last_input = [T](const data::PreferenceSide& side) {
    return std::min(static_cast<int64_t>(side.ids.size()), T) - 1;
  };
  for (int64_t i = 0; i < B; ++i) {
    const data::PreferencePair& p = pairs.at(static_cast<size_t>(b.pairs[static_cast<size_t>(i)]));
    last.data<int64_t>()[i] = last_input(p.chosen);
    last.data<int64_t>()[B + i] = last_input(p.rejected);
    margin.data<double>()[i] = p.margin;
  }
}

// The reward loss of one batch under the model (as it is: train or eval mode, graph or not).
nn::RewardLossResult batch_loss(TrainRun& run, const data::PairBatch& b,
                                const std::vector<data::PreferencePair>& pairs, double norm) {
  const int64_t T = run.o.seq_len, B = static_cast<int64_t>(b.pairs.size());
  Tensor last, margin;
  sides_of(b, pairs, T, last, margin);
  const Variable r = run.model->scores(b.tokens.narrow(1, 0, T).contiguous(), last);
  return nn::reward_loss(narrow(r, 0, 0, B), narrow(r, 0, B, B), margin.to(r.dtype()),
                         run.o.center_rewards, norm);
}

// The sums over ranks, then divided by the pair count: the metrics.jsonl keys.
std::vector<std::pair<std::string, double>> global_means(const TrainRun& run, nn::RewardMetrics m) {
  if (run.world > 1) {
    const std::vector<double> sums = run.comm.all_reduce(
        std::vector<double>{m.loss, m.correct, m.margin, m.pairs}, dist::ReduceOp::Sum);
    m = {sums[0], sums[1], sums[2], sums[3]};
  }
  return m.means();
}

}  // namespace

void reward_forward_backward(TrainRun& run, StepResult& s) {
  const auto sums = pair_forward_backward<nn::RewardMetrics>(
      run, [&](const data::PairBatch& b, const std::vector<data::PreferencePair>& pairs,
               double norm) { return batch_loss(run, b, pairs, norm); });
  s.metrics = global_means(run, sums);
  s.ce = s.metrics.front().second;  // "loss": the same on every rank
}

std::vector<std::pair<std::string, double>> reward_validation(TrainRun& run) {
  return pair_validation<nn::RewardMetrics>(
             run,
             [&](const data::PairBatch& b, const std::vector<data::PreferencePair>& pairs,
                 double norm) { return batch_loss(run, b, pairs, norm); })
      .means();
}

}  // namespace ember::apps
