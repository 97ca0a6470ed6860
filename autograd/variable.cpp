// Variable accessors; backward() lives in backward.cpp.
#include "autograd/variable.h"

#include "autograd/node.h"

namespace ember {

Variable::Variable(Tensor data, bool requires_grad) : impl_(std::make_shared<VariableImpl>()) {
  EMBER_CHECK(data.defined(), "Variable: data tensor is undefined");
  EMBER_CHECK(!requires_grad || is_floating(data.dtype()),
              "Variable: only float tensors can require grad, got ", dtype_name(data.dtype()));
  impl_->data = std::move(data);
  impl_->requires_grad = requires_grad;
}

static VariableImpl& checked(const std::shared_ptr<VariableImpl>& impl) {
  EMBER_CHECK(impl != nullptr, "Variable is undefined");
  return *impl;
}

const Tensor& Variable::data() const { return checked(impl_).data; }

void Variable::set_data(const Tensor& data) const {
  EMBER_CHECK(data.defined(), "Variable::set_data: data tensor is undefined");
  checked(impl_).data = data;
}

bool Variable::requires_grad() const { return checked(impl_).requires_grad; }

const Variable& Variable::set_requires_grad(bool requires_grad) const {
  VariableImpl& v = checked(impl_);
  EMBER_CHECK(v.grad_fn == nullptr,
              "set_requires_grad: only a leaf can change requires_grad (this variable was made by ",
              v.grad_fn->name, "); use detach()");
  EMBER_CHECK(!requires_grad || is_floating(v.data.dtype()),
              "set_requires_grad: only float tensors can require grad, got ",
              dtype_name(v.data.dtype()));
  v.requires_grad = requires_grad;
  return *this;
}

bool Variable::is_leaf() const { return checked(impl_).grad_fn == nullptr; }
const std::shared_ptr<Node>& Variable::grad_fn() const { return checked(impl_).grad_fn; }
const Tensor& Variable::grad() const { return checked(impl_).grad; }

void Variable::set_grad(const Tensor& grad) const {
  VariableImpl& v = checked(impl_);
  EMBER_CHECK(!grad.defined() || grad.shape() == v.data.shape(), "set_grad: gradient of shape ",
              shape_str(grad.shape()), " does not match data of shape ", shape_str(v.data.shape()));
  v.grad = grad;
}

void Variable::zero_grad() const { checked(impl_).grad = Tensor(); }

Variable Variable::detach() const { return Variable(data(), false); }

void Variable::register_post_accumulate_grad_hook(Hook hook) const {
  VariableImpl& v = checked(impl_);
  EMBER_CHECK(v.grad_fn == nullptr,
              "register_post_accumulate_grad_hook: only leaves accumulate gradients");
  v.post_accumulate_hooks.push_back(std::move(hook));
}

}  // namespace ember
