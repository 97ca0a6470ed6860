// ParallelLayout: where a world rank sits when N = T * P * D ranks run tensor (T), pipeline (P)
// and data (D) parallelism together (docs/scaling.md#rank-layout-and-pipeline-schedules):
// tensor index r mod T, data index (r div T) mod D, stage r div (T * D), and the world ranks of
// the rank's tensor group, data group and pipeline neighbours. Pure arithmetic, no MPI.
#pragma once
#include <vector>

namespace ember::dist {

struct ParallelLayout {
  // Throws ember::Error when tp or pp is below 1 or world is not divisible by tp * pp.
  ParallelLayout(int world, int tp, int pp);

  int world = 1;  // N
  int tp = 1;     // T: ranks per tensor group
  int pp = 1;     // P: pipeline stages
  int dp = 1;     // D = N / (T * P): ranks per data group

  int tensor_index(int rank) const;  // r mod T
  int data_index(int rank) const;    // (r div T) mod D
  int stage(int rank) const;         // r div (T * D)
  // The world rank with these coordinates: tensor + T * (data + D * stage).
  int rank_of(int tensor, int data, int stage) const;

  // World ranks in group-rank order (a rank's group rank is its tensor, data or stage index).
  std::vector<int> tensor_group(int rank) const;    // same data index and stage, T ranks
  std::vector<int> data_group(int rank) const;      // same tensor index and stage, D ranks
  std::vector<int> pipeline_group(int rank) const;  // same tensor and data index, P ranks
  // The same tensor and data index one stage earlier / later; -1 at the first / last stage.
  int previous_stage(int rank) const;
  int next_stage(int rank) const;

 private:
  void check_rank(int rank) const;
};

}  // namespace ember::dist
