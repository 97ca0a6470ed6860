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

// Each whole tensor of a state (parameters by name, or "<name>/<moment>") cut to this rank's shard.
std::map<std::string, Tensor> shard_state(const TrainRun& run, const std::map<std::string, Tensor>& whole);

// Collective over the tensor group: each parameter's whole tensor in turn (a LoRA run: each
// trained one's), passed to put (which may be empty off rank 0), so that one whole tensor at a
// time is held.
void gather_model(const TrainRun& run, const nn::TensorPut& put);

// An optimizer state sink that gathers each tensor whole before passing it to put (every rank
// streams; put may be empty off rank 0), and a source that cuts each whole tensor read to
// this rank's shard.
optim::Optimizer::StateSink gathering_sink(const TrainRun& run, optim::Optimizer::StateSink put);
optim::Optimizer::StateSource sharding_source(const TrainRun& run, optim::Optimizer::StateSource get);

// The L2 norm of all gradients over the tensor ranks and the stages, each parameter counted
// once: the split ones' squares summed over the tensor group, the whole ones' (the same on
// every tensor rank) taken once, the tied table's last-stage copy left out; then summed over
// the stages. Under --zero 1 (a data rank holds its shard of the averaged gradient only) each
// parameter's part of the shard is counted so, summed over the data ranks first. Collective
// over the slice's data ranks (ZeRO), tensor group and stages.
double parallel_grad_norm(const TrainRun& run);

}  // namespace ember::apps
