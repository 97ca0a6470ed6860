// The ParallelGroup of every rank of the job, over the MPI tests' Communicator: what the
// tensor-parallel ops (autograd/parallel_ops.h) are tested over under mpirun. dist will
// implement the real groups over sub-communicators; this adapter only serves the tests.
#pragma once
#include "autograd/parallel_group.h"
#include "dist/communicator.h"

namespace ember::testing {

class WorldGroup final : public ParallelGroup {
 public:
  explicit WorldGroup(const dist::Communicator& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.world_size(); }
  void all_reduce_sum(const Tensor& t) const override { comm_.all_reduce(t, dist::ReduceOp::Sum); }
  void all_reduce_max(const Tensor& t) const override { comm_.all_reduce(t, dist::ReduceOp::Max); }

 private:
  const dist::Communicator& comm_;
};

}  // namespace ember::testing
