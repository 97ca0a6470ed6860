// Megatron-LM's two conjugate communication operators of tensor parallelism: f before a
// column-parallel linear, g after a row-parallel one (docs/model.md#tensor-parallel-loss).
// Each sums over a ParallelGroup in one direction and is the identity in the other; the
// sum goes to a fresh contiguous tensor, never into the input or the incoming gradient.
#include "autograd/node.h"
#include "autograd/parallel_ops.h"

namespace ember {
namespace {

// A contiguous copy of t, summed in place over the group.
Tensor summed_over(const Tensor& t, const ParallelGroup& group) {
  Tensor out = t.clone();
  group.all_reduce_sum(out);
  return out;
}

void check_float(const char* op, const Variable& x) {
  EMBER_CHECK(is_floating(x.dtype()), op, ": expected a float32 or float64 tensor, got ",
              dtype_name(x.dtype()));
}

}  // namespace

// y = x:  dx = sum over the group of g
Variable copy_to_group(const Variable& x, const ParallelGroup& group) {
  check_float("copy_to_group", x);
  return record("copy_to_group", {x}, x.data(),
                [gp = &group](const Tensor& g) -> Grads { return {summed_over(g, *gp)}; });
}

// y = sum over the group of x:  dx = g
Variable reduce_from_group(const Variable& x, const ParallelGroup& group) {
  check_float("reduce_from_group", x);
  return record("reduce_from_group", {x}, summed_over(x.data(), group),
                [](const Tensor& g) -> Grads { return {g}; });
}

}  // namespace ember
