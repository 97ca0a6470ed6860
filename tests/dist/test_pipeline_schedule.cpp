// dist::schedule and dist::simulate: the exact 1F1B and GPipe operation lists written out by
// hand, properties for P in {2, 4} and M in {1, 2, 4, 8} (each micro-batch forwarded then
// backwarded once, the in-flight bound, no deadlock, the bubble (P - 1) / (M + P - 1)), timelines
// derived by hand for f = 1, b = 2, and the errors (unknown names, deadlocks, repeats).
#include <catch2/catch.hpp>
#include <string>

#include "dist/pipeline_schedule.h"

using namespace ember::dist;

namespace {

std::string str(const std::vector<PipelineOp>& ops) {
  std::string out;
  for (const PipelineOp& op : ops) {
    if (!out.empty()) out += ' ';
    out += to_string(op);
  }
  return out;
}

std::string ops_of(ScheduleKind kind, int P, int s, int M) {
  return str(schedule(kind, P, s, M));
}

std::vector<PipelineOp> parse_ops(const std::string& text) {
  std::vector<PipelineOp> ops;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != 'F' && text[i] != 'B') continue;
    ops.push_back({text[i] == 'F' ? Pass::Forward : Pass::Backward, std::stoi(text.substr(i + 1))});
  }
  return ops;
}

const int kStages[] = {2, 4};
const int kMicroBatches[] = {1, 2, 4, 8};
const ScheduleKind kKinds[] = {ScheduleKind::OneFOneB, ScheduleKind::GPipe};

}  // namespace

TEST_CASE("1f1b operation lists for P = 2, written out", "[dist]") {
  const auto k = ScheduleKind::OneFOneB;
  CHECK(ops_of(k, 2, 0, 1) == "F0 B0");
  CHECK(ops_of(k, 2, 1, 1) == "F0 B0");
  CHECK(ops_of(k, 2, 0, 2) == "F0 F1 B0 B1");
  CHECK(ops_of(k, 2, 1, 2) == "F0 B0 F1 B1");
  CHECK(ops_of(k, 2, 0, 4) == "F0 F1 B0 F2 B1 F3 B2 B3");
  CHECK(ops_of(k, 2, 1, 4) == "F0 B0 F1 B1 F2 B2 F3 B3");
  CHECK(ops_of(k, 2, 0, 8) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7");
}

TEST_CASE("1f1b operation lists for P = 4, written out", "[dist]") {
  const auto k = ScheduleKind::OneFOneB;
  CHECK(ops_of(k, 4, 0, 1) == "F0 B0");
  CHECK(ops_of(k, 4, 0, 2) == "F0 F1 B0 B1");
  CHECK(ops_of(k, 4, 2, 2) == "F0 F1 B0 B1");
  CHECK(ops_of(k, 4, 3, 2) == "F0 B0 F1 B1");
  CHECK(ops_of(k, 4, 0, 4) == "F0 F1 F2 F3 B0 B1 B2 B3");
  CHECK(ops_of(k, 4, 1, 4) == "F0 F1 F2 B0 F3 B1 B2 B3");
  CHECK(ops_of(k, 4, 2, 4) == "F0 F1 B0 F2 B1 F3 B2 B3");
  CHECK(ops_of(k, 4, 3, 4) == "F0 B0 F1 B1 F2 B2 F3 B3");
  CHECK(ops_of(k, 4, 0, 8) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  CHECK(ops_of(k, 4, 3, 8) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
}

TEST_CASE("gpipe operation lists, written out", "[dist]") {
  const auto k = ScheduleKind::GPipe;
  CHECK(ops_of(k, 2, 0, 1) == "F0 B0");
  CHECK(ops_of(k, 2, 1, 2) == "F0 F1 B0 B1");
  CHECK(ops_of(k, 4, 0, 4) == "F0 F1 F2 F3 B0 B1 B2 B3");
  CHECK(ops_of(k, 4, 3, 4) == "F0 F1 F2 F3 B0 B1 B2 B3");
  CHECK(ops_of(k, 2, 1, 8) == "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7");
}

TEST_CASE("every micro-batch is forwarded then backwarded once, within the in-flight bound",
          "[dist]") {
  for (ScheduleKind kind : kKinds) {
    for (int P : kStages) {
      for (int M : kMicroBatches) {
        for (int s = 0; s < P; ++s) {
          INFO(schedule_name(kind) << " P " << P << " M " << M << " stage " << s);
          const std::vector<PipelineOp> ops = schedule(kind, P, s, M);
          REQUIRE(static_cast<int>(ops.size()) == 2 * M);
          std::vector<int> forwards(M, 0), backwards(M, 0);
          int next_forward = 0, next_backward = 0;
          for (const PipelineOp& op : ops) {
            if (op.pass == Pass::Forward) {
              CHECK(op.micro_batch == next_forward++);  // in order 0 .. M - 1
              ++forwards.at(op.micro_batch);
            } else {
              CHECK(op.micro_batch == next_backward++);
              CHECK(forwards.at(op.micro_batch) == 1);  // forwarded before
              ++backwards.at(op.micro_batch);
            }
          }
          CHECK(forwards == std::vector<int>(M, 1));
          CHECK(backwards == std::vector<int>(M, 1));
          const int expected = kind == ScheduleKind::GPipe ? M : std::min(P - s, M);
          CHECK(peak_in_flight(ops) == expected);
        }
      }
    }
  }
}

TEST_CASE("with f = b on equal stages both schedules idle (P - 1) / (M + P - 1) exactly",
          "[dist]") {
  for (ScheduleKind kind : kKinds) {
    for (int P : kStages) {
      for (int M : kMicroBatches) {
        INFO(schedule_name(kind) << " P " << P << " M " << M);
        const PipelineTimeline t = simulate(schedule_all(kind, P, M));
        REQUIRE(static_cast<int>(t.stages.size()) == P);
        CHECK(t.makespan == 2.0 * (M + P - 1));
        CHECK(t.idle_fraction == static_cast<double>(P - 1) / (M + P - 1));
        for (int s = 0; s < P; ++s) {
          const StageTimeline& st = t.stages[s];
          CHECK(static_cast<int>(st.ops.size()) == 2 * M);
          CHECK(st.busy == 2.0 * M);
          // idle / makespan as a fraction: idle * (M + P - 1) == (P - 1) * makespan
          CHECK(st.idle * (M + P - 1) == (P - 1) * t.makespan);
          CHECK(st.idle_fraction == static_cast<double>(P - 1) / (M + P - 1));
          CHECK(st.peak_in_flight == (kind == ScheduleKind::GPipe ? M : std::min(P - s, M)));
        }
      }
    }
  }
}

namespace {

// "F0 0 1, F1 1 2": each operation with its start and end.
std::string timeline_str(const StageTimeline& stage) {
  std::string out;
  for (const TimedOp& op : stage.ops) {
    if (!out.empty()) out += ", ";
    out += to_string(op.op);
    out += ' ';
    out += std::to_string(int(op.start));
    out += ' ';
    out += std::to_string(int(op.end));
  }
  return out;
}

}  // namespace

TEST_CASE("f = 1, b = 2: timelines derived by hand", "[dist]") {
  const std::vector<StageCost> cost = {{1, 2}};
  // 1f1b P = 2 M = 2. Stage 1's B0 waits for nothing but its F0; stage 0's B0 waits for
  // stage 1's B0 (ends at 4), stage 1's F1 for its own B0, stage 0's B1 for stage 1's B1 (7).
  PipelineTimeline t = simulate(schedule_all(ScheduleKind::OneFOneB, 2, 2), cost);
  CHECK(timeline_str(t.stages[0]) == "F0 0 1, F1 1 2, B0 4 6, B1 7 9");
  CHECK(timeline_str(t.stages[1]) == "F0 1 2, B0 2 4, F1 4 5, B1 5 7");
  CHECK(t.makespan == 9);
  CHECK(t.idle_fraction == 1.0 / 3);
  // gpipe P = 2 M = 2: the same makespan, the backwards later on stage 1.
  t = simulate(schedule_all(ScheduleKind::GPipe, 2, 2), cost);
  CHECK(timeline_str(t.stages[0]) == "F0 0 1, F1 1 2, B0 5 7, B1 7 9");
  CHECK(timeline_str(t.stages[1]) == "F0 1 2, F1 2 3, B0 3 5, B1 5 7");
  CHECK(t.makespan == 9);
  // 1f1b P = 4 M = 2: stage 3's F1 waits for its B0 (ends at 6); every backward below waits
  // for the stage above it.
  t = simulate(schedule_all(ScheduleKind::OneFOneB, 4, 2), cost);
  CHECK(timeline_str(t.stages[3]) == "F0 3 4, B0 4 6, F1 6 7, B1 7 9");
  CHECK(timeline_str(t.stages[2]) == "F0 2 3, F1 3 4, B0 6 8, B1 9 11");
  CHECK(timeline_str(t.stages[1]) == "F0 1 2, F1 2 3, B0 8 10, B1 11 13");
  CHECK(timeline_str(t.stages[0]) == "F0 0 1, F1 1 2, B0 10 12, B1 13 15");
  CHECK(t.makespan == 15);
}

TEST_CASE("f = 1, b = 2: the bubble is (P - 1)(f + b) of (M + P - 1)(f + b)", "[dist]") {
  // The critical path: F0 down the P stages (P f), the last stage's M (f + b) minus the f
  // already counted, then the last backward up the P - 1 stages above ((P - 1) b). Every stage
  // is busy M (f + b), so each idles (P - 1)(f + b): the fraction (P - 1) / (M + P - 1) again.
  for (ScheduleKind kind : kKinds) {
    for (int P : kStages) {
      for (int M : kMicroBatches) {
        INFO(schedule_name(kind) << " P " << P << " M " << M);
        const PipelineTimeline t = simulate(schedule_all(kind, P, M), {{1, 2}});
        CHECK(t.makespan == 3.0 * (M + P - 1));
        for (const StageTimeline& st : t.stages) CHECK(st.idle == 3.0 * (P - 1));
        CHECK(t.idle_fraction == static_cast<double>(P - 1) / (M + P - 1));
      }
    }
  }
}

TEST_CASE("per-stage costs: a slower second stage", "[dist]") {
  // P = 2 M = 1, stage 1 twice as slow: F0 [0, 1], then [1, 3] and B0 [3, 5] on stage 1, B0
  // [5, 6] on stage 0; idle 4 of 6 on stage 0, 2 of 6 on stage 1.
  const PipelineTimeline t = simulate(schedule_all(ScheduleKind::OneFOneB, 2, 1), {{1, 1}, {2, 2}});
  CHECK(timeline_str(t.stages[0]) == "F0 0 1, B0 5 6");
  CHECK(timeline_str(t.stages[1]) == "F0 1 3, B0 3 5");
  CHECK(t.stages[0].idle == 4);
  CHECK(t.stages[1].idle == 2);
  CHECK(t.idle_fraction == 0.5);
  CHECK_THROWS_WITH(simulate(schedule_all(ScheduleKind::GPipe, 4, 2), {{1, 1}, {1, 1}}),
                    "pipeline simulation: 2 stage costs for 4 stages (give one for all or one "
                    "per stage)");
}

TEST_CASE("a list that cannot finish is a deadlock error naming the blocked operations", "[dist]") {
  // Stage 1 wants F1 first, which needs stage 0's F1, which comes after stage 0's B0, which
  // needs stage 1's B0, which needs stage 1's F0: a cycle.
  CHECK_THROWS_WITH(simulate({parse_ops("F0 B0 F1 B1"), parse_ops("F1 F0 B0 B1")}),
                    "pipeline simulation: the schedule deadlocks (stage 0 at B0, stage 1 at F1)");
  // A backward before its own forward.
  CHECK_THROWS_WITH(simulate({parse_ops("B0 F0")}),
                    "pipeline simulation: the schedule deadlocks (stage 0 at B0)");
  // A micro-batch stage 0 never forwards.
  CHECK_THROWS_WITH(simulate({parse_ops("F0 B0"), parse_ops("F0 B0 F1 B1")}),
                    "pipeline simulation: the schedule deadlocks (stage 1 at F1)");
  CHECK_THROWS_WITH(simulate({parse_ops("F0 F0 B0")}),
                    "pipeline simulation: stage 0 runs F0 twice");
}

TEST_CASE("schedule names and arguments", "[dist]") {
  CHECK(parse_schedule("1f1b") == ScheduleKind::OneFOneB);
  CHECK(parse_schedule("gpipe") == ScheduleKind::GPipe);
  CHECK(std::string(schedule_name(parse_schedule("gpipe"))) == "gpipe");
  CHECK(std::string(schedule_name(parse_schedule("1f1b"))) == "1f1b");
  CHECK_THROWS_WITH(parse_schedule("interleaved"),
                    "unknown --pp-schedule 'interleaved': choose 1f1b or gpipe");
  CHECK_THROWS_WITH(parse_schedule("1F1B"), "unknown --pp-schedule '1F1B': choose 1f1b or gpipe");
  CHECK_THROWS_WITH(schedule(ScheduleKind::OneFOneB, 2, 0, 0),
                    "pipeline schedule: --micro-batches must be at least 1, got 0");
  CHECK_THROWS_WITH(schedule(ScheduleKind::OneFOneB, 2, 2, 4),
                    "pipeline schedule: stage 2 is outside 0 .. 1");
  CHECK_THROWS_WITH(schedule(ScheduleKind::GPipe, 0, 0, 4),
                    "pipeline schedule: the stage count must be at least 1, got 0");
}
