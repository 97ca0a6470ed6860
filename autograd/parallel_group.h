// A group of processes that combine tensors element-wise: what the tensor-parallel autograd ops
// (docs/scaling.md) need from dist, which implements it over MPI sub-communicators, without
// autograd or nn depending on MPI. Every rank of the group calls the same methods in the same
// order (blocking collectives).
#pragma once
#include "core/tensor.h"

namespace ember {

class ParallelGroup {
 public:
  virtual ~ParallelGroup() = default;
  virtual int rank() const = 0;  // this process's index in the group, 0 .. size() - 1
  virtual int size() const = 0;
  // In place on a contiguous float32/float64 tensor: the element-wise sum over the group.
  virtual void all_reduce_sum(const Tensor& t) const = 0;
  // In place on a contiguous float32/float64 tensor: the element-wise maximum over the group.
  virtual void all_reduce_max(const Tensor& t) const = 0;
};

}  // namespace ember
