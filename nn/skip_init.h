// SkipInitGuard: while one lives on this thread, Linear and Embedding leave their weights
// uninitialized (Tensor::empty: pages never touched take no memory) for a loader to fill
// tensor by tensor, as PyTorch's skip_init / meta-device init. The init Generator still
// advances as if it had drawn them, so every later draw is unchanged.
#pragma once
#include "core/rng.h"
#include "core/tensor.h"

namespace ember::nn {

class SkipInitGuard {
 public:
  SkipInitGuard();
  ~SkipInitGuard();
  SkipInitGuard(const SkipInitGuard&) = delete;
  SkipInitGuard& operator=(const SkipInitGuard&) = delete;
  static bool active();

 private:
  bool previous_;
};

// normal(0, std) of shape drawn from gen; uninitialized (gen advanced alike) under a guard.
Tensor init_normal(const Shape& shape, Generator& gen, DType dtype, double std);

}  // namespace ember::nn
