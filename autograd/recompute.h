// Activation recompute ("activation checkpointing", torch.utils.checkpoint reentrant style): a function
// runs without keeping its graph, saving only its inputs; backward recomputes it with grad on,
// replaying the same random draws and autocast dtype, and back-propagates through the recompute.
// Memory: the function's inputs and outputs instead of every tensor its backward would save.
#pragma once
#include <functional>
#include <vector>

#include "autograd/variable.h"
#include "core/rng.h"

namespace ember {

using RecomputeFn = std::function<std::vector<Variable>(const std::vector<Variable>& inputs)>;

struct RecomputeOptions {
  // What fn reads besides its inputs and trains (a block's parameters): the recompute's backward
  // accumulates their gradients into .grad as the plain run would (and fires their hooks). A
  // parameter must not also be used outside fn in the same graph.
  std::vector<Variable> params;
  // The generators fn draws from (dropout): the recompute starts each at the offset the forward
  // started at, and leaves it where it was.
  std::vector<Generator*> generators;
};

// fn(inputs) (one or more outputs) with no graph kept inside fn. outputs[0] carries one node whose
// backward recomputes fn over detached copies of the inputs (same generator offsets, same autocast
// dtype, grad on), back-propagates through the recompute the gradients that reached every output
// (outputs[0]'s and the others', e.g. auxiliary losses) in one pass, and returns the inputs'
// gradients. Each other output carries a node that hands its gradient over to that backward, so
// the gradients equal plain fn's bit for bit when fn is deterministic. When grad mode is off or
// nothing in inputs and params requires grad: fn(inputs) as is.
// Limit: an output other than outputs[0] is back-propagated only when outputs[0] gets a gradient.
std::vector<Variable> recompute(const RecomputeFn& fn, const std::vector<Variable>& inputs,
                                 const RecomputeOptions& options = {});

}  // namespace ember
