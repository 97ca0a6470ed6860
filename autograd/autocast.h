// Mixed precision (autocast), per thread, like torch.autocast. While the
// autocast dtype is BFloat16, matmul (autograd/ops/matmul.cpp, the one place
// that reads the switch) rounds float32 operands to bfloat16 and multiplies
// them on bfloat16 hardware with float32 accumulation and output; its
// backward does the same with the gradient rounded to bfloat16. Everything
// else (norms, softmax, attention, loss, optimizer) and all float64 work is
// untouched: weights, gradients and optimizer state stay float32.
//
// A leaf that requires grad (a parameter) is rounded once per autocast region
// and the copy reused by every matmul that reads it, forward and backward,
// until the region ends or the parameter is written (its version changes).
// Its writer may publish the rounded copy itself (AdamW rounds each weight the
// last region rounded in its update kernel): a published copy serves every
// later region while the parameter's version is unchanged, so a bf16 training
// step converts no weight at all.
//
//   { AutocastGuard bf16(DType::BFloat16); loss = model.loss(...); loss.total.backward(); }
//   opt.step(lr);   // outside: float32
#pragma once
#include <string>

#include "autograd/variable.h"
#include "core/dtype.h"

namespace ember {

// Float32 (off, the default) or BFloat16.
DType autocast_dtype();
// Sets the thread's autocast dtype (Float32 or BFloat16); turning it off drops
// the cached bfloat16 parameter copies.
void set_autocast_dtype(DType dtype);
// Parses "float32" / "bf16" / "bfloat16" (command-line --dtype); throws naming `option`.
DType parse_autocast_dtype(const std::string& name, const char* option = "--dtype");

// RAII: sets the autocast dtype for its scope, restoring the previous one after.
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype) : previous_(autocast_dtype()) { set_autocast_dtype(dtype); }
  ~AutocastGuard() { set_autocast_dtype(previous_); }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DType previous_;
};

// v's data (float32) rounded to bfloat16: cached for leaves that require grad
// while autocast is on, a fresh copy otherwise.
Tensor autocast_to_bfloat16(const Variable& v);
// Drops the cached and the published bfloat16 copy of t's data, if any (ZeRO-3 before it frees a parameter).
void autocast_forget(const Tensor& t);

// True when the latest bfloat16 autocast region of this thread (from when it
// was turned on) rounded t's data: a parameter some bf16 matmul reads.
bool autocast_rounded(const Tensor& t);
// Publishes copy (bfloat16, contiguous, t's shape: t's data rounded) as t's at t's
// current version: autocast_to_bfloat16 returns it on this thread, in any later
// region, until t's version changes. The caller keeps copy's values right.
void publish_bfloat16_copy(const Tensor& t, const Tensor& copy);
// Drops t's published copy (its writer is gone).
void forget_bfloat16_copy(const Tensor& t);

}  // namespace ember
