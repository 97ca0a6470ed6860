// dist::Group and make_layout_groups on every rank, for every layout (T, P, D) of the world
// (at -np 4: (2,2,1), (2,1,2), (1,2,2), (1,4,1), (4,1,1), (1,1,4)): group sizes and ranks,
// sums and maxima that identify the contributing world ranks, and tensors sent to the next
// stage and back, blocking and non-blocking; each group's count of its all-reduces (calls and
// payload bytes), the tensor group's also on the profiler's tp_all_reduce channel. Without
// mpirun: size-1 groups, no MPI.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/profiler.h"
#include "dist/group.h"
#include "mpi_testing.h"

using namespace ember;
using ember::testing::comm;

namespace {

// Every (T, P) whose product divides the world.
std::vector<dist::ParallelLayout> all_layouts() {
  std::vector<dist::ParallelLayout> layouts;
  const int w = comm().world_size();
  for (int tp = 1; tp <= w; ++tp) {
    for (int pp = 1; tp * pp <= w; ++pp) {
      if (w % (tp * pp) == 0) layouts.emplace_back(w, tp, pp);
    }
  }
  return layouts;
}

// World rank q contributes 2^q (so a sum is the set of contributors), q and -q (so the max is
// the largest contributor and minus the smallest).
void check_reductions(const dist::Group& group, const std::vector<int>& members, DType dt) {
  const int r = comm().rank();
  Tensor sum = Tensor::full({2}, std::ldexp(1.0, r), dt);
  Tensor max = Tensor::from_vector(std::vector<double>{double(r), -double(r)}).to(dt);
  group.all_reduce_sum(sum);
  group.all_reduce_max(max);
  double mask = 0;
  for (int q : members) mask += std::ldexp(1.0, q);
  CHECK(sum.to_vector<double>() == std::vector<double>{mask, mask});
  CHECK(max.to_vector<double>() ==
        std::vector<double>{double(members.back()), -double(members.front())});
}

// What world rank q sends to its neighbours: its rank, a direction and a running index.
Tensor message(int from, double direction, DType dt = DType::Float32) {
  return Tensor::from_vector(std::vector<double>{double(from), direction, 7.0}).to(dt);
}

}  // namespace

TEST_CASE("each layout's groups have the layout's sizes and ranks", "[mpi]") {
  const int r = comm().rank();
  for (const dist::ParallelLayout& l : all_layouts()) {
    INFO("T " << l.tp << " P " << l.pp << " D " << l.dp << " rank " << r);
    const dist::LayoutGroups g = dist::make_layout_groups(comm(), l);
    CHECK(g.tensor.size() == l.tp);
    CHECK(g.data.size() == l.dp);
    CHECK(g.pipeline.size() == l.pp);
    CHECK(g.tensor.rank() == l.tensor_index(r));
    CHECK(g.data.rank() == l.data_index(r));
    CHECK(g.pipeline.rank() == l.stage(r));
  }
  CHECK_THROWS_WITH(
      dist::make_layout_groups(comm(), dist::ParallelLayout(2 * comm().world_size(), 2, 1)),
      Catch::Contains("the layout is for " + std::to_string(2 * comm().world_size()) +
                      " ranks but the world has"));
}

TEST_CASE("sums and maxima within the tensor, data and pipeline groups", "[mpi]") {
  const int r = comm().rank();
  for (const dist::ParallelLayout& l : all_layouts()) {
    INFO("T " << l.tp << " P " << l.pp << " D " << l.dp << " rank " << r);
    const dist::LayoutGroups g = dist::make_layout_groups(comm(), l);
    for (DType dt : {DType::Float32, DType::Float64}) {
      check_reductions(g.tensor, l.tensor_group(r), dt);
      check_reductions(g.data, l.data_group(r), dt);
      check_reductions(g.pipeline, l.pipeline_group(r), dt);
    }
    CHECK_THROWS_WITH(g.tensor.all_reduce_sum(Tensor::zeros({2}, DType::Int64)),
                      "Group::all_reduce_sum: needs a float32 or float64 tensor, got int64");
    CHECK_THROWS_WITH(g.data.all_reduce_max(Tensor::zeros({3, 2}).transpose(0, 1)),
                      Catch::Contains("contiguous"));
  }
}

TEST_CASE("a group counts its all-reduces: calls, payload bytes, seconds", "[mpi]") {
  for (const dist::ParallelLayout& l : all_layouts()) {
    INFO("T " << l.tp << " P " << l.pp << " D " << l.dp << " rank " << comm().rank());
    prof::enable();
    prof::reset();
    dist::LayoutGroups g = dist::make_layout_groups(comm(), l);
    for (const dist::Group* group : {&g.tensor, &g.data}) {
      group->all_reduce_sum(Tensor::zeros({3, 5}, DType::Float32));  // 60 bytes
      group->all_reduce_max(Tensor::zeros({7}, DType::Float64));     // 56 bytes
      CHECK_THROWS(group->all_reduce_sum(Tensor::zeros({2}, DType::Int64)));  // refused, uncounted
      const prof::Traffic& t = group->all_reduce_traffic();
      const bool moves = group->size() > 1;  // a group of one moves nothing
      CHECK(t.calls == (moves ? 2 : 0));
      CHECK(t.bytes == (moves ? 116 : 0));
      CHECK(t.seconds >= 0);
      if (!moves) CHECK(t.seconds == 0);
    }
    // Only the tensor group is the profiler's tp_all_reduce channel.
    const prof::Traffic p = prof::snapshot().channel_traffic(dist::kTensorParallelChannel, true);
    prof::enable(false);
    prof::reset();
    CHECK(p.calls == (l.tp > 1 ? 2 : 0));
    CHECK(p.bytes == (l.tp > 1 ? 116 : 0));
    const dist::Group moved = std::move(g.tensor);  // the counts move along
    CHECK(moved.all_reduce_traffic().bytes == (l.tp > 1 ? 116 : 0));
  }
}

TEST_CASE("blocking send to the next stage and back", "[mpi]") {
  const int r = comm().rank();
  for (const dist::ParallelLayout& l : all_layouts()) {
    INFO("T " << l.tp << " P " << l.pp << " D " << l.dp << " rank " << r);
    const dist::LayoutGroups g = dist::make_layout_groups(comm(), l);
    const int s = l.stage(r), prev = l.previous_stage(r), next = l.next_stage(r);
    // Forward: from each stage's predecessor; backward: from its successor (this order never
    // waits on a send that waits on this rank).
    Tensor forward = Tensor::zeros({3}), backward = Tensor::zeros({3}, DType::Float64);
    if (prev >= 0) g.pipeline.recv(forward, s - 1);
    if (next >= 0) {
      g.pipeline.send(message(r, 1), s + 1);
      g.pipeline.recv(backward, s + 1);
    }
    if (prev >= 0) g.pipeline.send(message(r, -1, DType::Float64), s - 1);
    if (prev >= 0) CHECK(forward.to_vector<double>() == message(prev, 1).to_vector<double>());
    if (next >= 0) CHECK(backward.to_vector<double>() == message(next, -1).to_vector<double>());
    // A receiver that expects more elements than were sent.
    if (next >= 0) g.pipeline.send(Tensor::ones({3}), s + 1, 3);
    if (prev >= 0) {
      CHECK_THROWS_WITH(
          g.pipeline.recv(Tensor::zeros({5}), s - 1, 3),
          "Group::recv: expected 5 elements from group rank " + std::to_string(s - 1) + ", got 3");
    }
    CHECK_THROWS_WITH(g.pipeline.send(forward, s),
                      Catch::Contains("is not another rank of this group"));
    CHECK_THROWS_WITH(g.pipeline.recv(forward, l.pp),
                      Catch::Contains("is not another rank of this group"));
  }
}

TEST_CASE("non-blocking send to the next stage and back", "[mpi]") {
  const int r = comm().rank();
  for (const dist::ParallelLayout& l : all_layouts()) {
    INFO("T " << l.tp << " P " << l.pp << " D " << l.dp << " rank " << r);
    dist::LayoutGroups g = dist::make_layout_groups(comm(), l);
    const int s = l.stage(r), prev = l.previous_stage(r), next = l.next_stage(r);
    // Every transfer posted at once, receives first; the buffers live until the waits.
    Tensor forward = Tensor::zeros({3}), backward = Tensor::zeros({3});
    const Tensor to_next = message(r, 1), to_prev = message(r, -1);
    std::vector<dist::Request> requests;
    if (prev >= 0) requests.push_back(g.pipeline.irecv(forward, s - 1, 1));
    if (next >= 0) requests.push_back(g.pipeline.irecv(backward, s + 1, 2));
    if (next >= 0) requests.push_back(g.pipeline.isend(to_next, s + 1, 1));
    if (prev >= 0) requests.push_back(g.pipeline.isend(to_prev, s - 1, 2));
    CHECK(static_cast<int>(requests.size()) == 2 * ((prev >= 0) + (next >= 0)));
    if (!requests.empty()) {
      while (!g.pipeline.test(requests.front())) {
      }
      CHECK_FALSE(requests.front().pending());
    }
    for (dist::Request& request : requests) g.pipeline.wait(request);
    for (const dist::Request& request : requests) CHECK_FALSE(request.pending());
    if (prev >= 0) CHECK(forward.to_vector<double>() == message(prev, 1).to_vector<double>());
    if (next >= 0) CHECK(backward.to_vector<double>() == message(next, -1).to_vector<double>());
  }
}

TEST_CASE("a default Group is one rank without MPI", "[mpi]") {
  dist::Group alone;
  CHECK(alone.rank() == 0);
  CHECK(alone.size() == 1);
  Tensor t = Tensor::full({2}, 3.5);
  alone.all_reduce_sum(t);
  alone.all_reduce_max(t);
  CHECK(t.to_vector<float>() == std::vector<float>{3.5f, 3.5f});
  CHECK_THROWS_WITH(alone.send(t, 0),
                    "Group::send: group rank 0 is not another rank of this group (rank 0 of 1)");
}
