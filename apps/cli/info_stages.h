// `ember info --tp T --pp P --world-size N [--micro-batches M] [--pp-layers a,b,...]
// [--pp-schedule 1f1b|gpipe]`: the options, and the per-stage memory table they print
// (nn/sizing/stage_memory.h; docs/cli.md, "Tensor and pipeline layouts").
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "nn/config.h"
#include "nn/sizing/memory_plan.h"

namespace ember::apps {

struct StageOptions {
  int64_t tp = 1, pp = 1, micro_batches = 0;  // micro_batches 0: P
  std::string pp_layers;                      // "a,b,...": blocks per stage; empty: even
  std::string schedule = "1f1b";
};

void add_stage_options(CLI::App* sub, StageOptions& o);

// Whether any of --tp, --pp, --micro-batches, --pp-layers, --pp-schedule was given.
bool stage_plan_requested(const CLI::App* sub);

// The layout, pipeline and per-stage lines. Throws ember::Error on a bad value (the caller
// computes it before printing anything). run: the data-parallel plan of sub's other options;
// its world size becomes T x P when sub was given no --world-size.
std::string stage_report(const nn::ModelConfig& cfg, nn::TrainingPlan run, const CLI::App* sub,
                         const StageOptions& o);

}  // namespace ember::apps
