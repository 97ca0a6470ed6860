// The parallel layout of `ember train --tp T --pp P` on N = T x P x D ranks (docs/scaling.md,
// "Tensor and pipeline parallelism in ember train"): the options the layout does not combine
// with, refused up front in one line naming both; then this rank's tensor group, pipeline group
// and data-parallel communicator, its stage of the model's blocks and the stage's schedule.
#pragma once
#include "apps/train/run.h"

namespace ember::apps {

// Collective (every rank, after the ranks agreed on the options and config). Without --tp and
// --pp it does nothing.
void setup_parallel_layout(TrainRun& run);

}  // namespace ember::apps
