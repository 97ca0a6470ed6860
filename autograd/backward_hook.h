// on_backward(x, fn): the identity, whose backward first calls fn() and then
// passes the gradient through unchanged. A marker in the graph: fn runs when
// backward reaches this point (ZeRO-3 gathers a block's parameters before the
// block's backward and frees them after it, with one at each end of the block).
#pragma once
#include <functional>

#include "autograd/variable.h"

namespace ember {

// x itself (no node) when grad mode is off or x needs no gradient; fn then never runs.
Variable on_backward(const Variable& x, std::function<void()> fn);

}  // namespace ember
