// Per-rank memory of each pipeline stage of a (T, P, D) layout in float32 (`ember info --tp T
// --pp P --world-size N`; docs/scaling.md, "Choosing T, P and D"): this rank's parameter
// shards, their gradients and AdamW moments (--zero 1: sharded over the D data ranks), the
// activations of the micro-batches the schedule holds, and the data-parallel buffers of
// nn/sizing/memory_plan.h over those shards.
#pragma once
#include <cstdint>
#include <vector>

#include "nn/config.h"
#include "nn/parallel_plan.h"
#include "nn/sizing/memory_plan.h"

namespace ember::nn {

struct StagePlan {
  TrainingPlan run;        // world_size N, zero (0 or 1), batch B per rank, seq_len, checkpointing, buckets
  ParallelLayout layout;   // T and the blocks of each stage
  int64_t micro_batches = 0;  // M; 0: P
  bool gpipe = false;         // --pp-schedule gpipe (else 1f1b)
  int64_t data_parallel() const { return run.world_size / (layout.tp * layout.pp()); }  // D
  int64_t micro_batch_count() const { return micro_batches > 0 ? micro_batches : layout.pp(); }
};

struct StageMemory {
  int64_t first_layer = 0, layers = 0;  // its blocks
  int64_t in_flight = 0;                // micro-batches whose activations it holds at once
  int64_t rank_params = 0;              // elements of one rank's shards
  RankMemory memory;                    // per rank of this stage
};

// Throws ember::Error on N not divisible by T x P ("--world-size 6 is not divisible by --tp 2 x
// --pp 2 = 4"), a --zero other than 0 or 1 (naming --zero and the layout), M < 1, B not
// divisible by M, and on what rank_memory refuses.
void check_stage_plan(const StagePlan& plan);

std::vector<StageMemory> stage_memory(const ModelConfig& cfg, const StagePlan& plan);

// Activations one rank of `stage` keeps: per token of a micro-batch of `rows` rows, each of its
// blocks' whole part plus its split part / T (a checkpointed block: its input, d_model), and
// on the last stage the logits and their gradient, 2 x padded vocab / T; times in_flight
// micro-batches, plus one checkpointed block recomputed at a time.
int64_t stage_activation_bytes(const ModelConfig& cfg, const ParallelLayout& layout, int64_t stage, int64_t rows,
                               int64_t seq_len, int64_t checkpoint_every, int64_t in_flight);

}  // namespace ember::nn
