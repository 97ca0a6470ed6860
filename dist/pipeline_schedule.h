// Pipeline schedules (docs/scaling.md#rank-layout-and-pipeline-schedules): the ordered
// forwards and backwards of micro-batches that one stage runs under 1F1B or GPipe, and a pure
// simulation of P stages running their lists with given per-operation costs (each stage's
// timeline, peak in-flight micro-batches and idle fraction). No MPI.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ember::dist {

enum class ScheduleKind { OneFOneB, GPipe };
enum class Pass { Forward, Backward };

// "1f1b" or "gpipe"; anything else is an error listing the two.
ScheduleKind parse_schedule(std::string_view name);
const char* schedule_name(ScheduleKind kind);

struct PipelineOp {
  Pass pass = Pass::Forward;
  int micro_batch = 0;
  bool operator==(const PipelineOp&) const = default;
};
// "F3" / "B0": for messages and test output.
std::string to_string(const PipelineOp& op);

// The operations stage `stage` (0 .. stages - 1) runs, in order, for `micro_batches` micro-batches.
// 1f1b: min(P - s - 1, M) forwards, then one forward and one backward alternately until every
// forward is done, then the remaining backwards. gpipe: all M forwards, then all M backwards.
// Micro-batches go in order 0 .. M - 1 in both passes.
std::vector<PipelineOp> schedule(ScheduleKind kind, int stages, int stage, int micro_batches);
// Every stage's list: schedule(kind, stages, s, micro_batches) for s = 0 .. stages - 1.
std::vector<std::vector<PipelineOp>> schedule_all(ScheduleKind kind, int stages, int micro_batches);
// The most micro-batches a list holds activations for at once (forwarded, not yet backwarded).
int peak_in_flight(const std::vector<PipelineOp>& ops);

// What one operation costs on a stage (any time unit).
struct StageCost {
  double forward = 1;
  double backward = 1;
};

struct TimedOp {
  PipelineOp op;
  double start = 0, end = 0;
};

struct StageTimeline {
  std::vector<TimedOp> ops;  // in the stage's order
  int peak_in_flight = 0;
  double busy = 0;           // the sum of its operations' costs
  double idle = 0;           // makespan - busy
  double idle_fraction = 0;  // idle / makespan
};

struct PipelineTimeline {
  std::vector<StageTimeline> stages;
  double makespan = 0;       // the last operation's end (every stage starts at 0)
  double idle_fraction = 0;  // the stages' idle time / (P * makespan)
};

// Runs stage s's list ops[s] in order, each operation as early as its dependencies allow:
// F(s, m) after F(s - 1, m); B(s, m) after F(s, m) and, below the last stage, after B(s + 1, m).
// costs holds one StageCost for every stage or one per stage. Throws ember::Error when an
// operation repeats on a stage or the lists cannot finish (naming each stage's blocked operation).
PipelineTimeline simulate(const std::vector<std::vector<PipelineOp>>& ops,
                          const std::vector<StageCost>& costs = {StageCost{}});

}  // namespace ember::dist
