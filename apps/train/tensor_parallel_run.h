// `ember train --tp T` (docs/scaling.md#tensor-parallelism-in-ember-train): the checks of the
// options that combine with it, the tensor group of this rank, and the whole tensors of the
// run as the tensor ranks hold them in shards: checkpoints are written whole (each tensor
// gathered from its shards) and read whole (each rank keeps its shard), so a run saved at one
// T resumes at any other; the global gradient norm counts each parameter once.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "apps/train/run.h"
#include "optim/optimizer.h"

namespace ember::apps {

// Collective: the layout and the options --tp does not take yet refused in one line naming
// both; then run.tp_group (nothing without --tp).
void setup_tensor_parallel(TrainRun& run);

// Each whole tensor of a state (parameters by name, or "<name>/<moment>") cut to this rank's shard.
std::map<std::string, Tensor> shard_state(const TrainRun& run, const std::map<std::string, Tensor>& whole);

// Collective over the tensor group: each parameter's whole tensor in turn, passed to put (which
// may be empty off rank 0), so that one whole tensor at a time is held.
void gather_model(const TrainRun& run, const nn::TensorPut& put);

// An optimizer state sink that gathers each tensor whole before passing it to put (every rank
// streams; put may be empty off rank 0), and a source that cuts each whole tensor read to
// this rank's shard.
optim::Optimizer::StateSink gathering_sink(const TrainRun& run, optim::Optimizer::StateSink put);
optim::Optimizer::StateSource sharding_source(const TrainRun& run, optim::Optimizer::StateSource get);

// The L2 norm of all gradients, each parameter counted once: the split ones' squares summed
// over the tensor group, the whole ones' (the same on every rank) taken once.
double tensor_parallel_grad_norm(const TrainRun& run);

}  // namespace ember::apps
