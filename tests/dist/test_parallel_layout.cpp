// dist::ParallelLayout against tables written by hand from the layout formula (tensor index
// r mod T, data index (r div T) mod D, stage r div (T * D)) for the 4-rank layouts (T, P, D),
// round-trip properties for many worlds, and the error lines for layouts that cannot be made.
#include <catch2/catch.hpp>

#include "dist/parallel_layout.h"

using ember::dist::ParallelLayout;

namespace {

struct Row {
  int tensor, data, stage;
  std::vector<int> tensor_group, data_group;
  int previous, next;
};

void check_table(const ParallelLayout& layout, const std::vector<Row>& rows) {
  REQUIRE(static_cast<int>(rows.size()) == layout.world);
  for (int r = 0; r < layout.world; ++r) {
    INFO("rank " << r);
    CHECK(layout.tensor_index(r) == rows[r].tensor);
    CHECK(layout.data_index(r) == rows[r].data);
    CHECK(layout.stage(r) == rows[r].stage);
    CHECK(layout.tensor_group(r) == rows[r].tensor_group);
    CHECK(layout.data_group(r) == rows[r].data_group);
    CHECK(layout.previous_stage(r) == rows[r].previous);
    CHECK(layout.next_stage(r) == rows[r].next);
  }
}

}  // namespace

TEST_CASE("layout (T, P, D) = (2, 2, 1): tensor pairs, two stages", "[dist]") {
  const ParallelLayout l(4, 2, 2);
  CHECK(l.dp == 1);
  check_table(l, {{0, 0, 0, {0, 1}, {0}, -1, 2},
                  {1, 0, 0, {0, 1}, {1}, -1, 3},
                  {0, 0, 1, {2, 3}, {2}, 0, -1},
                  {1, 0, 1, {2, 3}, {3}, 1, -1}});
  CHECK(l.pipeline_group(1) == std::vector<int>{1, 3});
}

TEST_CASE("layout (T, P, D) = (2, 1, 2): tensor pairs, two data replicas", "[dist]") {
  const ParallelLayout l(4, 2, 1);
  CHECK(l.dp == 2);
  check_table(l, {{0, 0, 0, {0, 1}, {0, 2}, -1, -1},
                  {1, 0, 0, {0, 1}, {1, 3}, -1, -1},
                  {0, 1, 0, {2, 3}, {0, 2}, -1, -1},
                  {1, 1, 0, {2, 3}, {1, 3}, -1, -1}});
  CHECK(l.pipeline_group(2) == std::vector<int>{2});
}

TEST_CASE("layout (T, P, D) = (1, 2, 2): two stages of two data replicas", "[dist]") {
  const ParallelLayout l(4, 1, 2);
  CHECK(l.dp == 2);
  check_table(l, {{0, 0, 0, {0}, {0, 1}, -1, 2},
                  {0, 1, 0, {1}, {0, 1}, -1, 3},
                  {0, 0, 1, {2}, {2, 3}, 0, -1},
                  {0, 1, 1, {3}, {2, 3}, 1, -1}});
  CHECK(l.pipeline_group(3) == std::vector<int>{1, 3});
}

TEST_CASE("layout (T, P, D) = (1, 4, 1): four stages", "[dist]") {
  const ParallelLayout l(4, 1, 4);
  CHECK(l.dp == 1);
  check_table(l, {{0, 0, 0, {0}, {0}, -1, 1},
                  {0, 0, 1, {1}, {1}, 0, 2},
                  {0, 0, 2, {2}, {2}, 1, 3},
                  {0, 0, 3, {3}, {3}, 2, -1}});
  CHECK(l.pipeline_group(2) == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("layout (T, P, D) = (4, 1, 1): one tensor group of four", "[dist]") {
  const ParallelLayout l(4, 4, 1);
  CHECK(l.dp == 1);
  check_table(l, {{0, 0, 0, {0, 1, 2, 3}, {0}, -1, -1},
                  {1, 0, 0, {0, 1, 2, 3}, {1}, -1, -1},
                  {2, 0, 0, {0, 1, 2, 3}, {2}, -1, -1},
                  {3, 0, 0, {0, 1, 2, 3}, {3}, -1, -1}});
}

TEST_CASE("layout (T, P, D) = (2, 2, 2): spot checks of an 8-rank world", "[dist]") {
  const ParallelLayout l(8, 2, 2);
  CHECK(l.dp == 2);
  // rank 5 = tensor 1 + 2 * (data 0 + 2 * stage 1)
  CHECK(l.tensor_index(5) == 1);
  CHECK(l.data_index(5) == 0);
  CHECK(l.stage(5) == 1);
  CHECK(l.tensor_group(5) == std::vector<int>{4, 5});
  CHECK(l.data_group(5) == std::vector<int>{5, 7});
  CHECK(l.previous_stage(5) == 1);
  CHECK(l.next_stage(5) == -1);
  CHECK(l.next_stage(2) == 6);
}

TEST_CASE("every rank's coordinates name it, and its groups hold it at its index", "[dist]") {
  for (int world : {1, 2, 3, 4, 6, 8, 12, 16}) {
    for (int tp = 1; tp <= world; ++tp) {
      for (int pp = 1; tp * pp <= world; ++pp) {
        if (world % (tp * pp) != 0) continue;
        const ParallelLayout l(world, tp, pp);
        REQUIRE(l.tp * l.pp * l.dp == world);
        for (int r = 0; r < world; ++r) {
          INFO("world " << world << " T " << tp << " P " << pp << " rank " << r);
          const int t = l.tensor_index(r), d = l.data_index(r), s = l.stage(r);
          CHECK(l.rank_of(t, d, s) == r);
          CHECK(l.tensor_group(r).at(t) == r);
          CHECK(l.data_group(r).at(d) == r);
          CHECK(l.pipeline_group(r).at(s) == r);
          CHECK(static_cast<int>(l.tensor_group(r).size()) == tp);
          CHECK(static_cast<int>(l.data_group(r).size()) == l.dp);
          CHECK(l.previous_stage(r) == (s == 0 ? -1 : l.pipeline_group(r)[s - 1]));
          CHECK(l.next_stage(r) == (s == pp - 1 ? -1 : l.pipeline_group(r)[s + 1]));
        }
      }
    }
  }
}

TEST_CASE("layouts that cannot be made are one error line naming N, T and P", "[dist]") {
  CHECK_THROWS_WITH(ParallelLayout(6, 2, 2),
                    "--tp 2 --pp 2 needs a world size divisible by 4, got 6");
  CHECK_THROWS_WITH(ParallelLayout(4, 3, 1),
                    "--tp 3 --pp 1 needs a world size divisible by 3, got 4");
  CHECK_THROWS_WITH(ParallelLayout(2, 1, 4),
                    "--tp 1 --pp 4 needs a world size divisible by 4, got 2");
  CHECK_THROWS_WITH(ParallelLayout(4, 0, 1), "--tp must be at least 1, got 0");
  CHECK_THROWS_WITH(ParallelLayout(4, 1, 0), "--pp must be at least 1, got 0");
  CHECK_THROWS_WITH(ParallelLayout(4, 2, -1), "--pp must be at least 1, got -1");
  CHECK_THROWS_WITH(ParallelLayout(4, 2, 2).stage(4),
                    "ParallelLayout: rank 4 is outside the world of 4 ranks");
}
