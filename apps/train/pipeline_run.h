// `ember train --pp P` (docs/scaling.md#pipeline-parallelism-in-ember-train): a step's micro-batches
// through the stage's schedule, the held-out loss through the stages, each stage's part of a
// whole state, and the checkpoint's tensors of stages 1 .. P - 1 sent to rank 0, which writes
// them with its own: the file is the one a single process writes.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "apps/train/run.h"

namespace ember::apps {

// Of a whole state keyed by parameter name (or "<name>/<moment>"), the entries of the
// parameters this rank's model holds (every entry without --pp).
template <class V>
std::map<std::string, V> stage_state(const TrainRun& run, const std::map<std::string, V>& whole) {
  if (!run.pp_group) return whole;
  std::map<std::string, V> out;
  for (const auto& [name, p] : run.model->named_parameters()) {
    for (auto it = whole.lower_bound(name); it != whole.end() && it->first.starts_with(name); ++it) {
      if (it->first == name || it->first[name.size()] == '/') out.insert(*it);
    }
  }
  return out;
}

// With tied embeddings, the last stage's copy of the table: the same as stage 0's after every
// update, counted and saved once (stage 0's).
bool is_tied_copy(const TrainRun& run, const std::string& name);

// The rows of one micro-step of --grad-accum cut into the M micro-batches the schedule runs:
// what each stage's forward reads and the loss of a micro-batch (ember train's token windows,
// ember finetune's chat rows).
class MicroBatches {
 public:
  virtual ~MicroBatches() = default;
  // Micro-batch m's ids [B / M, T] and its mask of real ids (undefined: every id is real).
  virtual Tensor inputs(int m) const = 0;
  virtual Tensor real(int) const { return Tensor(); }
  // Micro-batch m's loss on this stage's output (Transformer::stage_loss): its total is what
  // the backward differentiates; its terms are added to s as the step reports them.
  virtual nn::LossTerms loss(const nn::Transformer& model, const nn::StageOutput& out, int m,
                             StepResult& s) const = 0;

 protected:
  // Micro-batch m's rows of t [B, >= first + T] (B / M of them), T columns from `first`.
  static Tensor rows(const Tensor& t, int m, int64_t M, int64_t first, int64_t T) {
    const int64_t n = t.size(0) / M;
    return t.narrow(0, m * n, n).narrow(1, first, T).contiguous();
  }
};
using MicroStep = std::function<std::unique_ptr<MicroBatches>(int64_t u)>;

// A step's forward and backward (x --grad-accum): micro-step u's micro-batches (micro_step(u))
// run by the schedule; the data-parallel all-reduce during the last backward, a trained tied
// table's gradient summed over the end stages; s's loss terms summed over the stages (every
// stage holds the step's), and every stage's times.
void pipeline_forward_backward(TrainRun& run, StepResult& s, const MicroStep& micro_step);
// ember train's: the rank's batch of B rows cut into M micro-batches of B / M rows, each
// micro-batch's loss divided by M x A.
void pipeline_forward_backward(TrainRun& run, StepResult& s);

// The idle share of a pipeline's run from each stage's forward, backward and wait times:
// 1 - (the stages' busy time) / (P x the span), the span the longest stage's forward + backward
// + wait; (P - 1) / (M + P - 1) for stages of equal cost and free transfers. And a step's.
double idle_share(const std::vector<double>& forward, const std::vector<double>& backward,
                  const std::vector<double>& wait);
double idle_share(const StepResult& s);

// The held-out loss of shard_loss, its batches sent through the stages (forward only); every
// rank of the pipeline returns the whole model's figures.
ShardLoss pipeline_shard_loss(TrainRun& run);
// ember finetune's: the held-out conversations' loss (chat_shard_loss) through the stages.
ShardLoss pipeline_chat_loss(TrainRun& run);

// Checkpoints. Rank 0 writes; the leader (data and tensor index 0) of each stage s > 0 sends
// its stage's figures and tensors to it, whole, in three parts in this order, each answered by
// the matching call of rank 0: the optimizer's per-parameter step counts, then the parameters
// (send_stage_tensors with the model's tensors, then end_stage_tensors), then the optimizer's
// moments (the same). Other ranks send nothing.
void send_param_steps(const TrainRun& run, const std::map<std::string, int64_t>& steps);
std::map<std::string, int64_t> receive_param_steps(const TrainRun& run);
nn::TensorPut send_stage_tensors(const TrainRun& run);
void end_stage_tensors(const TrainRun& run);
// Rank 0: every tensor of stages 1 .. P - 1, in stage order, passed to put.
void receive_stage_tensors(const TrainRun& run, const nn::TensorPut& put);

}  // namespace ember::apps
