// on_backward: an identity node that calls a function when backward reaches it.
#include "autograd/backward_hook.h"

#include "autograd/node.h"

namespace ember {

Variable on_backward(const Variable& x, std::function<void()> fn) {
  return record("on_backward", {x}, x.data(), [fn = std::move(fn)](const Tensor& g) -> Grads {
    fn();
    return {g};
  });
}

}  // namespace ember
