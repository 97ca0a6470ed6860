// Node: one recorded op in the graph. It keeps an edge per op input, the
// input shapes (so the engine can sum broadcast gradients back to them in one
// place) and the backward function, which owns whatever the op saved.
//
// Defining an op (see autograd/ops/*.cpp):
//   Tensor y = kernels::exp(x.data());
//   return record("exp", {x}, y, [y = SavedTensor(y)](const Tensor& g) -> Grads {
//     return {kernels::mul(g, y.get())};
//   });
// backward returns one gradient per input (undefined for an input that needs
// none); a gradient may have the broadcast output shape: the engine reduces it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/profile_families.h"
#include "autograd/variable.h"
#include "core/tensor.h"

namespace ember {

using Grads = std::vector<Tensor>;
using BackwardFn = std::function<Grads(const Tensor& grad_output)>;
// Adds an op's gradient for its only input into `slot`, a pending gradient the engine holds
// alone, in place; returns false (slot untouched) where it cannot, and backward runs instead.
using BackwardIntoFn = std::function<bool(const Tensor& grad_output, Tensor& slot)>;

// Where an input's gradient goes: the node that made it, or the leaf itself.
// Both empty: the input needs no gradient.
struct Edge {
  std::shared_ptr<Node> node;
  std::shared_ptr<VariableImpl> leaf;
  bool needed() const { return node != nullptr || leaf != nullptr; }
};

struct Node {
  std::string name;
  uint64_t sequence_nr = 0;  // creation order; later nodes run first in backward
  std::vector<Edge> inputs;
  std::vector<Shape> input_shapes;
  BackwardFn backward;  // reset when the graph is freed
  BackwardIntoFn backward_into;  // optional, one-input ops: skips a dense temporary
  prof::Family family = prof::kOtherFamily;  // the profiler family its forward ran under
};

// A tensor kept for backward, with the storage version it had when saved:
// get() throws if the tensor was modified in place since.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t) : tensor_(t), version_(t.version()) {}
  const Tensor& get() const;

 private:
  Tensor tensor_;
  uint64_t version_ = 0;
};

// Records an op: returns a Variable over `output` that, when grad mode is on
// and some input requires grad, carries a Node with `backward`.
Variable record(const char* name, const std::vector<Variable>& inputs, Tensor output,
                BackwardFn backward, BackwardIntoFn backward_into = nullptr);

// True when `v` takes part in autograd right now (grad mode on, requires grad).
bool needs_grad(const Variable& v);

}  // namespace ember
