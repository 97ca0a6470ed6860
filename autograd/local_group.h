// The one-process ParallelGroup: rank 0 of a group of 1, where the sum and the maximum over
// the group are the tensor itself. Single-process code and gradchecks run the tensor-parallel
// ops (autograd/parallel_ops.h) over it; it checks the tensors as a real group would.
#pragma once
#include "autograd/parallel_group.h"
#include "core/error.h"

namespace ember {

class LocalGroup final : public ParallelGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(const Tensor& t) const override { check("all_reduce_sum", t); }
  void all_reduce_max(const Tensor& t) const override { check("all_reduce_max", t); }

 private:
  static void check(const char* op, const Tensor& t) {
    EMBER_CHECK(t.is_contiguous() && is_floating(t.dtype()), "LocalGroup::", op,
                ": expected a contiguous float32 or float64 tensor, got ", dtype_name(t.dtype()),
                t.is_contiguous() ? "" : " (not contiguous)");
  }
};

}  // namespace ember
