// dist::PipelineRunner: one pipeline stage running its schedule (dist/pipeline_schedule.h) over
// M micro-batches (docs/scaling.md#pipeline-parallelism): receives activations from the previous
// stage and gradients from the next, calls the stage's forward and backward on Tensors, sends
// outputs and input gradients on without blocking, and times forward, backward and waiting.
// And the tied table's gradient summed over the first and last stage.
#pragma once
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "dist/group.h"
#include "dist/pipeline_schedule.h"

namespace ember::dist {

// What a stage computes; the runner calls them in its schedule's order.
struct StageFunctions {
  // Micro-batch m's forward of `input`, the previous stage's output (undefined on the first
  // stage); returns the output the next stage receives (ignored on the last stage).
  std::function<Tensor(int m, const Tensor& input)> forward;
  // Micro-batch m's backward from `grad_output`, the gradient of its output that the next stage
  // sent (undefined on the last stage, whose loss starts it); returns the gradient of its input
  // (ignored on the first stage).
  std::function<Tensor(int m, const Tensor& grad_output)> backward;
};

// One run of a stage's schedule.
struct PipelineTimes {
  double forward = 0, backward = 0;  // seconds in StageFunctions::forward / backward
  double wait = 0;       // seconds waiting for receives: the stage's bubble, plus transfers
  double send_wait = 0;  // seconds waiting at the end for the last sends to complete
  int peak_in_flight = 0;  // most micro-batches forwarded and not yet backwarded at once
};

class PipelineRunner {
 public:
  // pipeline: this rank's pipeline group (its rank is the stage, its size P; it outlives the
  // runner). Every micro-batch's activations and their gradients have `shape` and `dtype`
  // (float32/64) on both sides of every pair of neighbouring stages.
  PipelineRunner(Group& pipeline, ScheduleKind kind, int micro_batches, Shape shape, DType dtype);

  // Runs the stage's operations in order; every stage of the group calls it at the same point.
  // An output or input gradient of another shape or dtype than the runner's is an Error.
  PipelineTimes run(const StageFunctions& f);
  const std::vector<PipelineOp>& ops() const { return ops_; }
  int stage() const { return stage_; }
  int stages() const { return stages_; }

 private:
  struct PendingSend {
    Request request;
    Tensor buffer;  // alive until the send completes
  };
  void forward(int m, const StageFunctions& f, PipelineTimes& t);
  void backward(int m, const StageFunctions& f, PipelineTimes& t);
  Tensor receive(int peer, int tag, PipelineTimes& t);
  void send(const Tensor& t, int peer, int tag, const char* what);
  void progress_sends();  // frees the buffers of completed sends (and drives MPI's progress)

  Group& pipeline_;
  int stage_, stages_, micro_batches_;
  Shape shape_;
  DType dtype_;
  std::vector<PipelineOp> ops_;
  std::vector<PendingSend> sends_;
  std::vector<char> live_;  // micro-batches forwarded and not yet backwarded
  int in_flight_ = 0;
};

// With tied embeddings the first and last stage each hold the table: each calls this with its
// gradient (contiguous float32/64, same shape) before the update, which becomes the sum of the
// two (the same on both, bit for bit). Other stages, and P = 1, return at once.
void sum_tied_gradient(Group& pipeline, const Tensor& grad);

}  // namespace ember::dist
