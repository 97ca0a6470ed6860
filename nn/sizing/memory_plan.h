// Per-rank memory of an `ember train` run in float32 (`ember info --world-size N
// --zero K`), by what holds it: parameters, gradients, AdamW moments,
// activations, communication buffers, the checkpoint save's gathered state and
// the process's own runtime. A closed-form plan from the config (nn/sizing/parameter_layout.h lists
// the parameters, autograd/gradient_buckets.h cuts the Reducer's buckets from them), for P
// parameters on W ranks (docs/scaling.md, "Per-rank memory"):
//   --zero 0: 4P params, 4P .grad, 8P moments; W > 1: the Reducer's 4P flat buffer
//   --zero 1: 4P, 4P .grad + 4P/W shard, 8P/W; 4P flat buffer; the save gathers each
//             moment whole on rank 0, one tensor at a time
//   --zero 2: 4P, 4P/W shard + the .grad of one block and the root unit (W = 1: all 4P),
//             8P/W; the staging buffers of buckets of several parameters; the save as ZeRO-1
//   --zero 3: zero3_parameters() in memory_plan.cpp
// plus activations, Open MPI's temporaries of two buckets (W > 1; at most 32 MiB each, the
// Reducer's message size) and the measured runtime.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/config.h"

namespace ember::nn {

struct TrainingPlan {
  int64_t world_size = 1;
  int zero = 0;  // ZeRO stage, 0..3
  int64_t batch = 8, seq_len = 256;  // per rank
  int64_t checkpoint_every = 0;      // 0: no activation checkpointing; K: blocks 0, K, 2K, ...
  int64_t bucket_bytes = int64_t{25} << 20;      // `ember train --bucket-mb`
  int64_t first_bucket_bytes = int64_t{1} << 20;  // min(1 MiB, bucket_bytes), as the trainer sets it
  int64_t message_bytes = int64_t{32} << 20;      // dist::ReducerOptions::message_bytes
};

// Bytes resident on the busiest rank at the run's peak.
struct RankMemory {
  int64_t parameters = 0;
  int64_t gradients = 0;       // .grad tensors and this rank's gradient shard
  int64_t optimizer = 0;       // AdamW's exp_avg and exp_avg_sq (this rank's shard)
  int64_t activations = 0;     // kept by forward for backward (an estimate; see activation_bytes)
  int64_t communication = 0;   // Reducer flat buffer or bucket staging, MPI temporaries
  int64_t checkpoint_save = 0; // ZeRO: what rank 0 gathers to save a checkpoint
  int64_t runtime = 0;         // the process before any model: code, libraries, threads, MPI
  int64_t total() const;
};

// Throws ember::Error on a world size outside 1..2^20, a stage outside 0..3, a batch, length
// or bucket size < 1, checkpoint_every < 0, or a figure beyond 2^63 bytes.
RankMemory rank_memory(const ModelConfig& cfg, const TrainingPlan& plan);

// Activations kept at batch B, length T: per token, every block's figure (model_stats'
// estimate) and the head's 2 x vocab (logits and their gradient); a checkpointed block
// keeps its input (d_model) instead, and the backward recomputes one checkpointed block
// at a time (the largest counted once). checkpoint_every = 0 gives model_stats().activation_bytes.
int64_t activation_bytes(const ModelConfig& cfg, int64_t batch, int64_t seq_len, int64_t checkpoint_every);

// The sum of one caching-allocator block per size class float32 tensors of these element counts
// fall in: what stays resident after they were allocated and freed one at a time (a ZeRO save).
int64_t size_class_bytes(const std::vector<int64_t>& numels);

// a * b and a + b, throwing instead of wrapping (huge --batch-size x --seq-len).
int64_t plan_mul(int64_t a, int64_t b);
int64_t plan_add(int64_t a, int64_t b);

// The largest rank's part of `elements` cut over `ranks` as dist::Reducer cuts its flat buffer
// (rank r owns [N r / W, N (r+1) / W), at multiples of 16 elements): a ZeRO shard.
int64_t largest_shard(int64_t elements, int64_t ranks);

// The fixed footprint of the `ember train` process with a model of a few thousand
// parameters (measured peak RSS; docs/scaling.md, "Per-rank memory"): one process, or a
// rank of an mpirun job.
int64_t runtime_bytes(int64_t world_size);

}  // namespace ember::nn
