// The profiler's report, per step: a text table (phases: ms/step and %;
// op families: ms/step, %, calls/step and the forward / backward split) and
// the same figures as JSON (profile.json of `ember train --profile`, the
// "profile" object of `ember bench --json`). Percentages are of the time
// inside phases, which the family split sums to. calls/step counts scope
// entries: forward op calls plus recorded backward nodes run. Then each
// profiler channel's collective traffic (the tensor-parallel all-reduces:
// calls, payload bytes and ms per step, by phase; "traffic" in the JSON).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/train/step_phases.h"

namespace ember::apps {

// warmup_steps: steps run before the snapshot's counters were reset (only
// stated); wall_ms_per_step: the step time measured around the step, to set
// the phases against (0: unknown).
std::string profile_table(const prof::Snapshot& s, int64_t warmup_steps, double wall_ms_per_step);
nlohmann::json profile_json(const prof::Snapshot& s, int64_t warmup_steps, double wall_ms_per_step);

}  // namespace ember::apps
