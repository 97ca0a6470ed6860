// Variable: a Tensor plus what reverse-mode autograd needs: requires_grad,
// the accumulated .grad, the Node that produced it (grad_fn; none for a leaf)
// and hooks that fire once a leaf's gradient is final for a backward pass.
// Copies of a Variable share one identity (like torch.Tensor handles).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember {

struct Node;
struct VariableImpl;

class Variable {
 public:
  using Hook = std::function<void(Variable&)>;

  Variable() = default;
  // A leaf over data (data is shared, not copied).
  explicit Variable(Tensor data, bool requires_grad = false);

  bool defined() const { return impl_ != nullptr; }
  const Tensor& data() const;
  // Replaces the data of a leaf (e.g. when loading weights); shape may change.
  void set_data(const Tensor& data) const;

  bool requires_grad() const;
  // Only on leaves: turns gradient tracking on or off.
  const Variable& set_requires_grad(bool requires_grad) const;
  bool is_leaf() const;
  const std::shared_ptr<Node>& grad_fn() const;

  // The gradient accumulated by backward() (undefined until then).
  const Tensor& grad() const;
  void set_grad(const Tensor& grad) const;
  // Drops the gradient (set_to_none, PyTorch's default).
  void zero_grad() const;

  // Runs reverse-mode AD from this variable. grad defaults to 1 for a
  // one-element variable and is required otherwise. Without retain_graph
  // the graph's saved tensors are freed as it goes.
  void backward(const Tensor& grad = {}, bool retain_graph = false) const;

  // The same data with no history and no grad tracking.
  Variable detach() const;

  // Fires after backward() has accumulated this leaf's gradient for the
  // last time in that pass (every path into the leaf has been summed).
  void register_post_accumulate_grad_hook(Hook hook) const;

  // Shorthands for data().
  const Shape& shape() const { return data().shape(); }
  int64_t dim() const { return data().dim(); }
  int64_t size(int64_t d) const { return data().size(d); }
  int64_t numel() const { return data().numel(); }
  DType dtype() const { return data().dtype(); }
  double item() const { return data().item(); }

  bool same(const Variable& other) const { return impl_ == other.impl_; }
  const std::shared_ptr<VariableImpl>& impl() const { return impl_; }
  explicit Variable(std::shared_ptr<VariableImpl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<VariableImpl> impl_;
};

// One backward pass from several outputs at once, each seeded with its gradient (an undefined
// one: 1 for a one-element output): a node or leaf reached from several of them gets their
// contributions summed in the same order as if they were one graph's (latest node first).
void backward(const std::vector<Variable>& outputs, const std::vector<Tensor>& grads,
              bool retain_graph = false);

struct VariableImpl {
  Tensor data;
  Tensor grad;
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  std::vector<Variable::Hook> post_accumulate_hooks;
};

}  // namespace ember
