// The profiler's phases of a training step and the data family, owned by apps
// (core/profiler.h): the trainer and `ember bench` open them around the parts
// of each step; the report lists them in this order.
#pragma once
#include "core/profiler.h"

namespace ember::apps {

extern const prof::Phase kDataPhase;        // fetching the batch
extern const prof::Phase kForwardPhase;     // the model's forward pass and loss
extern const prof::Phase kBackwardPhase;    // loss.backward()
extern const prof::Phase kClipPhase;        // the gradient norm and clip coefficient
extern const prof::Phase kOptimizerPhase;   // the parameter update
extern const prof::Phase kCommWaitPhase;    // waiting for gradient all-reduces
extern const prof::Phase kCheckpointPhase;  // writing a checkpoint
extern const prof::Family kDataFamily;      // the batch's own work

}  // namespace ember::apps
