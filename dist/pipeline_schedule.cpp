// The 1F1B and GPipe operation lists of a pipeline stage, and the event simulation that runs
// every stage's list against the forward / backward dependencies between neighbouring stages.
#include "dist/pipeline_schedule.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/error.h"

namespace ember::dist {

ScheduleKind parse_schedule(std::string_view name) {
  if (name == "1f1b") return ScheduleKind::OneFOneB;
  if (name == "gpipe") return ScheduleKind::GPipe;
  throw Error(detail::concat("unknown --pp-schedule '", name, "': choose 1f1b or gpipe"));
}

const char* schedule_name(ScheduleKind kind) {
  return kind == ScheduleKind::GPipe ? "gpipe" : "1f1b";
}

std::string to_string(const PipelineOp& op) {
  return detail::concat(op.pass == Pass::Forward ? "F" : "B", op.micro_batch);
}

std::vector<PipelineOp> schedule(ScheduleKind kind, int stages, int stage, int micro_batches) {
  EMBER_CHECK(stages >= 1, "pipeline schedule: the stage count must be at least 1, got ", stages);
  EMBER_CHECK(stage >= 0 && stage < stages, "pipeline schedule: stage ", stage, " is outside 0 .. ",
              stages - 1);
  EMBER_CHECK(micro_batches >= 1, "pipeline schedule: --micro-batches must be at least 1, got ",
              micro_batches);
  const int warmup =
      kind == ScheduleKind::GPipe ? micro_batches : std::min(stages - stage - 1, micro_batches);
  std::vector<PipelineOp> ops;
  int forwards = 0, backwards = 0;
  while (forwards < warmup) ops.push_back({Pass::Forward, forwards++});
  while (forwards < micro_batches) {  // the steady state: one forward, one backward
    ops.push_back({Pass::Forward, forwards++});
    ops.push_back({Pass::Backward, backwards++});
  }
  while (backwards < micro_batches) ops.push_back({Pass::Backward, backwards++});
  return ops;
}

std::vector<std::vector<PipelineOp>> schedule_all(ScheduleKind kind, int stages,
                                                  int micro_batches) {
  std::vector<std::vector<PipelineOp>> all;
  for (int s = 0; s < stages; ++s) all.push_back(schedule(kind, stages, s, micro_batches));
  return all;
}

int peak_in_flight(const std::vector<PipelineOp>& ops) {
  int now = 0, peak = 0;
  for (const PipelineOp& op : ops) {
    now += op.pass == Pass::Forward ? 1 : -1;
    peak = std::max(peak, now);
  }
  return peak;
}

namespace {

using OpKey = std::pair<int, int>;  // (pass, micro-batch)
OpKey key_of(const PipelineOp& op) {
  return {static_cast<int>(op.pass), op.micro_batch};
}

// Each stage's end time of every operation it has run, looked up by (pass, micro-batch).
struct Finished {
  std::vector<std::map<OpKey, double>> ends;
  // The end of F/B(stage, m), or false when it has not run (yet).
  bool end_of(int stage, Pass pass, int m, double& end) const {
    const auto it = ends[stage].find({static_cast<int>(pass), m});
    if (it == ends[stage].end()) return false;
    end = std::max(end, it->second);
    return true;
  }
};

// The earliest start of `op` on stage s given what has finished, or false when a dependency has
// not.
bool ready(const Finished& done, int s, int last, const PipelineOp& op, double& start) {
  const int m = op.micro_batch;
  if (op.pass == Pass::Forward) return s == 0 || done.end_of(s - 1, Pass::Forward, m, start);
  if (!done.end_of(s, Pass::Forward, m, start)) return false;
  return s == last || done.end_of(s + 1, Pass::Backward, m, start);
}

void check_no_repeats(const std::vector<std::vector<PipelineOp>>& ops) {
  for (size_t s = 0; s < ops.size(); ++s) {
    std::map<OpKey, int> seen;
    for (const PipelineOp& op : ops[s]) {
      EMBER_CHECK(++seen[key_of(op)] == 1, "pipeline simulation: stage ", s, " runs ",
                  to_string(op), " twice");
    }
  }
}

std::string blocked_ops(const std::vector<std::vector<PipelineOp>>& ops,
                        const std::vector<size_t>& next) {
  std::string out;
  for (size_t s = 0; s < ops.size(); ++s) {
    if (next[s] == ops[s].size()) continue;
    out += detail::concat(out.empty() ? "" : ", ", "stage ", s, " at ", to_string(ops[s][next[s]]));
  }
  return out;
}

void summarise(PipelineTimeline& timeline, const std::vector<std::vector<PipelineOp>>& ops) {
  double idle = 0;
  for (size_t s = 0; s < ops.size(); ++s) {
    StageTimeline& stage = timeline.stages[s];
    stage.peak_in_flight = peak_in_flight(ops[s]);
    stage.idle = timeline.makespan - stage.busy;
    stage.idle_fraction = timeline.makespan > 0 ? stage.idle / timeline.makespan : 0;
    idle += stage.idle;
  }
  const double total = timeline.makespan * static_cast<double>(ops.size());
  timeline.idle_fraction = total > 0 ? idle / total : 0;
}

}  // namespace

PipelineTimeline simulate(const std::vector<std::vector<PipelineOp>>& ops,
                          const std::vector<StageCost>& costs) {
  const int stages = static_cast<int>(ops.size());
  EMBER_CHECK(stages >= 1, "pipeline simulation: no stages");
  EMBER_CHECK(costs.size() == 1 || static_cast<int>(costs.size()) == stages,
              "pipeline simulation: ", costs.size(), " stage costs for ", stages,
              " stages (give one for all or one per stage)");
  check_no_repeats(ops);
  PipelineTimeline timeline;
  timeline.stages.resize(stages);
  Finished done{std::vector<std::map<OpKey, double>>(stages)};
  std::vector<size_t> next(stages, 0);
  std::vector<double> free_at(stages, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < stages; ++s) {
      const StageCost& cost = costs.size() == 1 ? costs[0] : costs[s];
      for (double start = free_at[s]; next[s] < ops[s].size(); start = free_at[s]) {
        const PipelineOp& op = ops[s][next[s]];
        if (!ready(done, s, stages - 1, op, start)) break;
        const double spent = op.pass == Pass::Forward ? cost.forward : cost.backward;
        const double end = start + spent;
        timeline.stages[s].ops.push_back({op, start, end});
        timeline.stages[s].busy += spent;
        done.ends[s][key_of(op)] = end;
        free_at[s] = end;
        timeline.makespan = std::max(timeline.makespan, end);
        ++next[s];
        progress = true;
      }
    }
  }
  const std::string blocked = blocked_ops(ops, next);
  EMBER_CHECK(blocked.empty(), "pipeline simulation: the schedule deadlocks (", blocked, ")");
  summarise(timeline, ops);
  return timeline;
}

}  // namespace ember::dist
