// The forward and backward passes of one `ember finetune` step
// (docs/model.md#loss-of-a-step): N = the step's trained tokens over A micro-batches, W ranks,
//   loss = sum over those tokens of (ce + z_coef lse^2) / N
//        + (1 / (A W)) sum over micro-batches and ranks of the MoE terms (over real tokens),
// so accumulation and data parallelism give the gradient of one large batch whatever the padding.
// W counts the data-parallel ranks (--tp: a data index's tensor ranks compute one share together).
// The reducer averages gradients over ranks, so each rank differentiates W x its share:
// its CE is divided by N / W, its MoE terms by A. With --pp W is the D data-parallel ranks
// (the stages read the same rows) and each micro-step's rows run as M micro-batches through
// the stages (apps/train/pipeline_run.h).
#include <algorithm>

#include "apps/train/pipeline_run.h"
#include "apps/train/run.h"
#include "apps/train/step_phases.h"
#include "autograd/autocast.h"
#include "core/profiler.h"

namespace ember::apps {
namespace {

// float32 [B, T]: 1 where input position t of row b holds a real id (t < its length).
Tensor real_inputs(const data::ChatBatch& b, int64_t T) {
  const int64_t B = static_cast<int64_t>(b.lengths.size());
  Tensor real = Tensor::zeros({B, T}, DType::Float32);
  float* r = real.data<float>();
  for (int64_t row = 0; row < B; ++row) {
    const int64_t n = std::min(b.lengths[static_cast<size_t>(row)], T);
    std::fill(r + row * T, r + row * T + n, 1.0f);
  }
  return real;
}

// The step's micro-batches and their trained-token count over the data-parallel ranks (one
// all-reduce; --tp and --pp: the tensor ranks and stages of a data index read the same rows,
// counted once).
std::vector<data::ChatBatch> step_batches(TrainRun& run, int64_t& trained_tokens) {
  EMBER_PROFILE_PHASE(kDataPhase);
  EMBER_PROFILE_SCOPE(kDataFamily);
  std::vector<data::ChatBatch> batches;
  double count = 0;
  for (int64_t u = 0; u < run.o.grad_accum; ++u) {
    batches.push_back(run.chat_loader->batch(run.step, u));
    count += static_cast<double>(batches.back().trained_tokens);
  }
  if (run.data_world > 1) count = run.data_parallel().all_reduce(count, dist::ReduceOp::Sum);
  trained_tokens = static_cast<int64_t>(count);
  return batches;
}

// --pp: micro-step u's chat batch of B rows cut into M micro-batches of B / M rows; the last
// stage's loss over the step's norm, every stage's MoE terms scaled by 1 / (M A) (the
// micro-batches are the one process's of --batch-size B / M --grad-accum M A D).
class ChatMicroBatches : public MicroBatches {
 public:
  ChatMicroBatches(const TrainRun& run, const data::ChatBatch& b, double norm)
      : b_(b), M_(run.o.micro_batches), T_(run.o.seq_len), norm_(norm),
        moe_scale_(1.0 / static_cast<double>(run.o.micro_batches * run.o.grad_accum)) {
    if (run.cfg.moe) real_ = real_inputs(b, T_);
  }

  Tensor inputs(int m) const override { return rows(b_.tokens, m, M_, 0, T_); }
  Tensor real(int m) const override { return real_.defined() ? rows(real_, m, M_, 0, T_) : Tensor(); }

  nn::LossTerms loss(const nn::Transformer& model, const nn::StageOutput& out, int m,
                     StepResult& s) const override {
    const Tensor targets = rows(b_.tokens, m, M_, 1, T_), weight = rows(b_.trained, m, M_, 0, T_);
    const nn::LossTerms l = model.stage_loss(out, targets, weight, norm_, moe_scale_);
    s.ce += l.ce;
    s.z += l.z;
    s.aux += l.aux * moe_scale_;
    return l;
  }

 private:
  const data::ChatBatch& b_;
  const int64_t M_, T_;
  const double norm_, moe_scale_;
  Tensor real_;
};

}  // namespace

void chat_forward_backward(TrainRun& run, StepResult& s) {
  const int64_t A = run.o.grad_accum, T = run.o.seq_len;
  dist::Reducer* reducer = run.optimization.reducer.get();
  const std::vector<data::ChatBatch> batches = step_batches(run, s.trained_tokens);
  // A step without a trained token has loss 0 and no CE gradient (all weights 0).
  const double norm = static_cast<double>(s.trained_tokens) / static_cast<double>(run.data_world);
  if (run.pipeline) {
    pipeline_forward_backward(run, s, [&](int64_t u) {
      return std::make_unique<ChatMicroBatches>(run, batches[static_cast<size_t>(u)], norm);
    });
    return;
  }
  AutocastGuard mixed(run.autocast);  // forward and backward only
  for (int64_t u = 0; u < A; ++u) {
    if (reducer) reducer->set_sync(u == A - 1);
    const data::ChatBatch& b = batches[static_cast<size_t>(u)];
    const Tensor x = b.tokens.narrow(1, 0, T).contiguous(),
                 y = b.tokens.narrow(1, 1, T).contiguous();
    nn::LossTerms l;
    {
      EMBER_PROFILE_PHASE(kForwardPhase);
      l = run.model->loss(run.model->forward(x, run.cfg.moe ? real_inputs(b, T) : Tensor()), y, b.trained, norm,
                          1.0 / static_cast<double>(A));
    }
    {
      EMBER_PROFILE_PHASE(kBackwardPhase);
      l.total.backward();
    }
    s.ce += l.ce;
    s.z += l.z;
    s.aux += l.aux / static_cast<double>(A);
  }
  if (reducer) {
    EMBER_PROFILE_PHASE(kCommWaitPhase);
    reducer->finish();
  }
}

}  // namespace ember::apps
