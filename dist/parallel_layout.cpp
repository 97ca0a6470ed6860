// ParallelLayout's arithmetic: the coordinates of a world rank (tensor fastest, then data, then
// stage, as Megatron-LM orders them) and the world ranks sharing two of the three coordinates.
#include "dist/parallel_layout.h"

#include "core/error.h"

namespace ember::dist {

ParallelLayout::ParallelLayout(int world_size, int tp_size, int pp_size)
    : world(world_size), tp(tp_size), pp(pp_size) {
  EMBER_CHECK(tp >= 1, "--tp must be at least 1, got ", tp);
  EMBER_CHECK(pp >= 1, "--pp must be at least 1, got ", pp);
  EMBER_CHECK(world >= 1 && world % (tp * pp) == 0, "--tp ", tp, " --pp ", pp,
              " needs a world size divisible by ", tp * pp, ", got ", world);
  dp = world / (tp * pp);
}

void ParallelLayout::check_rank(int rank) const {
  EMBER_CHECK(rank >= 0 && rank < world, "ParallelLayout: rank ", rank, " is outside the world of ",
              world, " ranks");
}

int ParallelLayout::tensor_index(int rank) const {
  check_rank(rank);
  return rank % tp;
}

int ParallelLayout::data_index(int rank) const {
  check_rank(rank);
  return (rank / tp) % dp;
}

int ParallelLayout::stage(int rank) const {
  check_rank(rank);
  return rank / (tp * dp);
}

int ParallelLayout::rank_of(int tensor, int data, int stage_index) const {
  EMBER_CHECK(
      tensor >= 0 && tensor < tp && data >= 0 && data < dp && stage_index >= 0 && stage_index < pp,
      "ParallelLayout: no rank has tensor index ", tensor, ", data index ", data, " and stage ",
      stage_index, " with T = ", tp, ", D = ", dp, ", P = ", pp);
  return tensor + tp * (data + dp * stage_index);
}

std::vector<int> ParallelLayout::tensor_group(int rank) const {
  std::vector<int> ranks;
  for (int t = 0; t < tp; ++t) ranks.push_back(rank_of(t, data_index(rank), stage(rank)));
  return ranks;
}

std::vector<int> ParallelLayout::data_group(int rank) const {
  std::vector<int> ranks;
  for (int d = 0; d < dp; ++d) ranks.push_back(rank_of(tensor_index(rank), d, stage(rank)));
  return ranks;
}

std::vector<int> ParallelLayout::pipeline_group(int rank) const {
  std::vector<int> ranks;
  for (int s = 0; s < pp; ++s) ranks.push_back(rank_of(tensor_index(rank), data_index(rank), s));
  return ranks;
}

int ParallelLayout::previous_stage(int rank) const {
  const int s = stage(rank);
  return s == 0 ? -1 : rank_of(tensor_index(rank), data_index(rank), s - 1);
}

int ParallelLayout::next_stage(int rank) const {
  const int s = stage(rank);
  return s == pp - 1 ? -1 : rank_of(tensor_index(rank), data_index(rank), s + 1);
}

}  // namespace ember::dist
