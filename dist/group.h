// dist::Group: a sub-communicator of the world (Communicator::split), the ember::ParallelGroup
// the tensor-parallel ops reduce over, plus point-to-point sends and receives between its ranks
// for the pipeline; and the tensor, data and pipeline groups of a rank in a ParallelLayout
// (docs/scaling.md#rank-layout-and-pipeline-schedules). A group counts its all-reduces' traffic
// (docs/scaling.md#tensor-parallel-traffic).
#pragma once
#include "autograd/parallel_group.h"
#include "core/profiler.h"
#include "dist/communicator.h"
#include "dist/parallel_layout.h"

namespace ember::dist {

// The profiler's channel of the tensor-parallel all-reduces ("tp_all_reduce"): what the tensor
// group of a layout (make_layout_groups, `ember train --tp`) counts its traffic as.
extern const prof::Channel kTensorParallelChannel;

class Group : public ParallelGroup {
 public:
  Group() = default;  // size 1, no MPI
  ~Group() override;  // frees the MPI sub-communicator
  Group(Group&& other) noexcept;
  Group& operator=(Group&& other) noexcept;
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // In place, contiguous float32/float64, over the group's ranks (blocking, collective).
  void all_reduce_sum(const Tensor& t) const override;
  void all_reduce_max(const Tensor& t) const override;
  // Every all-reduce over more than one rank so far (a group of one moves nothing): calls,
  // payload bytes (elements x element size, the tensor reduced; not what MPI's algorithm
  // sends on the wire) and seconds inside the call.
  const prof::Traffic& all_reduce_traffic() const { return traffic_; }
  // Each all-reduce is also counted on the profiler's channel c (none before this call).
  void count_in_profile(prof::Channel c) { channel_ = c, profiled_ = true; }

  // Point to point with another group rank `peer`: the contiguous t (float32/64, int32/64) is
  // sent whole, or received into t, whose shape and dtype the receiver knows (a message of any
  // other element count is an error). Messages between two ranks with one tag (0 .. 32767) arrive
  // in order.
  void send(const Tensor& t, int peer, int tag = 0) const;
  void recv(const Tensor& t, int peer, int tag = 0) const;
  // Non-blocking: completed by wait / test (here or on the Communicator); t must stay alive
  // and, for isend, unchanged until then.
  Request isend(const Tensor& t, int peer, int tag = 0);
  Request irecv(const Tensor& t, int peer, int tag = 0);
  void wait(Request& request);
  bool test(Request& request);

 private:
  friend class Communicator;
  Group(Communicator* comm, int handle, int rank, int size)
      : comm_(comm), handle_(handle), rank_(rank), size_(size) {}
  void check_peer(const Tensor& t, int peer, int tag, const char* what) const;
  void all_reduce(const Tensor& t, ReduceOp op) const;

  Communicator* comm_ = nullptr;
  int handle_ = -1;  // the Communicator's sub-communicator; -1 without MPI
  int rank_ = 0, size_ = 1;
  mutable prof::Traffic traffic_;
  prof::Channel channel_;
  bool profiled_ = false;
};

// A rank's three groups in a layout: group ranks are the tensor index, the data index and the
// stage, so the previous and next stages are pipeline ranks stage - 1 and stage + 1.
struct LayoutGroups {
  Group tensor;    // same data index and stage: T ranks
  Group data;      // same tensor index and stage: D ranks
  Group pipeline;  // same tensor and data index: P ranks
};

// Collective: every rank calls it, in the same order among its other collectives. The layout's
// world must be the Communicator's.
LayoutGroups make_layout_groups(Communicator& comm, const ParallelLayout& layout);

}  // namespace ember::dist
