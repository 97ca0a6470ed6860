// A pipeline stage's blocks from a layout, its checks, and MoE layer counts.
#include "nn/pipeline_stage.h"

#include "core/error.h"

namespace ember::nn {

PipelineStage pipeline_stage(const ParallelLayout& layout, int64_t stage) {
  EMBER_CHECK(stage >= 0 && stage < layout.pp(), "pipeline stage ", stage, " is outside [0, ",
              layout.pp(), ")");
  PipelineStage s;
  s.stage = stage;
  s.stages = layout.pp();
  s.first_layer = layout.first_layer(stage);
  s.n_layers = layout.stage_layers[static_cast<size_t>(stage)];
  return s;
}

PipelineStage checked_stage(const ModelConfig& cfg, PipelineStage s) {
  if (s.n_layers < 0) s.n_layers = cfg.n_layers - s.first_layer;
  EMBER_CHECK(s.stages >= 1 && s.stage >= 0 && s.stage < s.stages, "pipeline stage ", s.stage,
              " of ", s.stages, ": expected a stage in [0, ", s.stages, ")");
  EMBER_CHECK(s.first_layer >= 0 && s.n_layers >= 1 && s.first_layer + s.n_layers <= cfg.n_layers,
              "pipeline stage ", s.stage, ": blocks [", s.first_layer, ", ",
              s.first_layer + s.n_layers, ") are not blocks of a model of n_layers ", cfg.n_layers);
  EMBER_CHECK(!s.first() || s.first_layer == 0, "pipeline stage 0 must start at block 0, not ",
              s.first_layer);
  EMBER_CHECK(!s.last() || s.first_layer + s.n_layers == cfg.n_layers, "the last pipeline stage ",
              "must end at block ", cfg.n_layers, ", not ", s.first_layer + s.n_layers);
  return s;
}

int64_t moe_layer_count(const ModelConfig& cfg, int64_t first, int64_t count) {
  int64_t n = 0;
  for (int64_t i = first; i < first + count; ++i) n += cfg.layer_is_moe(i) ? 1 : 0;
  return n;
}

}  // namespace ember::nn
