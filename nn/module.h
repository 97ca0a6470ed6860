// nn::Module: a tree of modules owning named parameters and buffers, as in
// PyTorch's C++ frontend. Names come from the tree ("model.layers.0.mlp.
// up_proj.weight"), so the names of docs/model.md#parameter-names are never kept by hand.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "core/error.h"
#include "core/tensor.h"

namespace ember::nn {

class Module {
 public:
  virtual ~Module() = default;

  // Parameters and buffers directly owned, then every child's, in registration order.
  std::vector<std::pair<std::string, Variable>> named_parameters() const;
  std::vector<Variable> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  // Direct children, in registration order.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }

  // Swaps the direct child `name` for `module`, keeping its name and position (so the
  // parameter names below it stay those of docs/model.md#parameter-names). Only a child added with
  // register_replaceable can be swapped, by a module of that slot's type (fine-tuning wraps
  // or quantizes projections this way: nn/adapters/adapters.h). Takes the new module's train mode.
  void replace_module(const std::string& name, std::shared_ptr<Module> module);

  // Removes the direct child `name` (and its replace_module slot): its parameters leave this
  // module's; the other children keep their names (a pipeline stage drops what it does not hold).
  void unregister_module(const std::string& name);

  // Training mode (dropout on) for this module and all below it.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Drops every parameter's gradient.
  void zero_grad();

  // name -> parameter data (shared, not copied).
  std::map<std::string, Tensor> state_dict() const;
  // Copies each named tensor into the matching parameter (casting the dtype).
  // Errors name a missing, unexpected or mis-shaped entry (strict: all three).
  void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);

 protected:
  Variable& register_parameter(const std::string& name, const Tensor& init, bool requires_grad = true);
  // Registers an existing Variable (shared, not copied: one tensor, one .grad).
  const Variable& share_parameter(const std::string& name, const Variable& parameter);
  Tensor& register_buffer(const std::string& name, const Tensor& value);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }
  // A child that replace_module may swap: `slot`, a member of this module that forward
  // reads, follows the swap. The module must live at a fixed address (held by shared_ptr).
  template <class M>
  void register_replaceable(const std::string& name, std::shared_ptr<M>& slot) {
    add_child(name, slot);
    replacers_.emplace_back(name, [&slot, name](const std::shared_ptr<Module>& m) {
      auto typed = std::dynamic_pointer_cast<M>(m);
      EMBER_CHECK(typed != nullptr, "replace_module: \"", name, "\" takes a module of its slot's type");
      slot = std::move(typed);
    });
  }

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect_parameters(const std::string& prefix,
                          std::vector<std::pair<std::string, Variable>>& out) const;
  void collect_buffers(const std::string& prefix,
                       std::vector<std::pair<std::string, Tensor>>& out) const;

  std::vector<std::pair<std::string, Variable>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<std::pair<std::string, std::function<void(const std::shared_ptr<Module>&)>>> replacers_;
  bool training_ = true;
};

// Eval mode (dropout off) for `module` and everything below it for the scope; its train mode
// before the guard (train(was_training), applied to the whole tree) restored at the end.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(Module& module);
  ~EvalModeGuard();
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

// A list of modules named "0", "1", ...
class ModuleList : public Module {
 public:
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    items_.push_back(module);
    return register_module(std::to_string(items_.size() - 1), std::move(module));
  }
  size_t size() const { return items_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const { return items_[i]; }
  // Removes item i; the others keep their names ("0", "1", ...) and indices, item i is null.
  void drop(size_t i);

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

}  // namespace ember::nn
