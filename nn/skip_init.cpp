// The thread's skip-init flag and the weight init that honours it.
#include "nn/skip_init.h"

namespace ember::nn {
namespace {
thread_local bool skip_init = false;
}  // namespace

SkipInitGuard::SkipInitGuard() : previous_(skip_init) { skip_init = true; }
SkipInitGuard::~SkipInitGuard() { skip_init = previous_; }
bool SkipInitGuard::active() { return skip_init; }

Tensor init_normal(const Shape& shape, Generator& gen, DType dtype, double std) {
  if (!skip_init) return Tensor::randn(shape, gen, dtype, 0, std);
  gen.advance(static_cast<uint64_t>(shape_numel(shape)));
  return Tensor::empty(shape, dtype);
}

}  // namespace ember::nn
