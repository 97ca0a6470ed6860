// PipelineStage: which part of the Transformer one pipeline stage holds
// (docs/scaling.md#pipeline-parallelism): blocks [first_layer, first_layer + n_layers), the
// embeddings on the first stage, the final norm, lm_head and loss on the last, a tied table on
// both ends. Made from nn/parallel_plan.h's layout; pure, nothing is built here.
#pragma once
#include <cstdint>

#include "nn/config.h"
#include "nn/parallel_plan.h"

namespace ember::nn {

struct PipelineStage {
  int64_t stage = 0, stages = 1;  // stage s of P
  int64_t first_layer = 0;        // the stage's blocks: [first_layer, first_layer + n_layers)
  int64_t n_layers = -1;          // -1: every block (one stage)
  bool first() const { return stage == 0; }
  bool last() const { return stage == stages - 1; }
  bool active() const { return stages > 1; }
};

// Stage `stage` of the layout's P stages (an Error for a stage outside [0, P)).
PipelineStage pipeline_stage(const ParallelLayout& layout, int64_t stage);

// Checks that `stage` describes a stage of cfg's blocks (P >= 1, s in [0, P), its blocks inside
// [0, n_layers), the first stage's from block 0, the last's up to n_layers) and returns it with
// n_layers -1 resolved.
PipelineStage checked_stage(const ModelConfig& cfg, PipelineStage stage);

// MoE layers among blocks [first, first + count) of cfg.
int64_t moe_layer_count(const ModelConfig& cfg, int64_t first, int64_t count);

}  // namespace ember::nn
