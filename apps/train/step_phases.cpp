// The phases of a training step and the data family (see step_phases.h),
// registered in report order: apps ranks 500-599 (the last layer before core's
// "other" family and "outside" phase).
#include "apps/train/step_phases.h"

namespace ember::apps {

const prof::Phase kDataPhase = prof::register_phase("data", 500);
const prof::Phase kForwardPhase = prof::register_phase("forward", 510);
const prof::Phase kBackwardPhase = prof::register_phase("backward", 520);
const prof::Phase kClipPhase = prof::register_phase("clip", 530);
const prof::Phase kOptimizerPhase = prof::register_phase("optimizer", 540);
const prof::Phase kCommWaitPhase = prof::register_phase("comm_wait", 550);
const prof::Phase kCheckpointPhase = prof::register_phase("checkpoint", 560);
const prof::Family kDataFamily = prof::register_family("data", 500);

}  // namespace ember::apps
