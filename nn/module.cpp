// Module tree: registration, recursive name collection, train mode and its
// guard, state dicts.
#include "nn/module.h"

#include <set>

#include "autograd/grad_mode.h"

namespace ember::nn {

static void check_name(const std::string& name, const char* what) {
  EMBER_CHECK(!name.empty() && name.find('.') == std::string::npos, what, " name \"", name,
              "\" must be non-empty and contain no '.'");
}

Variable& Module::register_parameter(const std::string& name, const Tensor& init,
                                     bool requires_grad) {
  check_name(name, "parameter");
  for (const auto& [n, v] : parameters_) {
    EMBER_CHECK(n != name, "parameter \"", name, "\" is registered twice");
  }
  parameters_.emplace_back(name, Variable(init, requires_grad));
  return parameters_.back().second;
}

const Variable& Module::share_parameter(const std::string& name, const Variable& parameter) {
  check_name(name, "parameter");
  EMBER_CHECK(parameter.defined(), "parameter \"", name, "\" is undefined");
  for (const auto& [n, v] : parameters_) {
    EMBER_CHECK(n != name, "parameter \"", name, "\" is registered twice");
  }
  parameters_.emplace_back(name, parameter);
  return parameters_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, const Tensor& value) {
  check_name(name, "buffer");
  buffers_.emplace_back(name, value);
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_name(name, "module");
  EMBER_CHECK(module != nullptr, "module \"", name, "\" is null");
  for (const auto& [n, m] : children_) EMBER_CHECK(n != name, "module \"", name, "\" is registered twice");
  module->train(training_);
  children_.emplace_back(name, std::move(module));
}

void Module::unregister_module(const std::string& name) {
  const auto before = children_.size();
  std::erase_if(children_, [&](const auto& child) { return child.first == name; });
  EMBER_CHECK(children_.size() < before, "unregister_module: no child module \"", name, "\"");
  std::erase_if(replacers_, [&](const auto& slot) { return slot.first == name; });
}

void ModuleList::drop(size_t i) {
  EMBER_CHECK(i < items_.size() && items_[i], "ModuleList::drop: no item ", i);
  unregister_module(std::to_string(i));
  items_[i] = nullptr;
}

void Module::replace_module(const std::string& name, std::shared_ptr<Module> module) {
  EMBER_CHECK(module != nullptr, "replace_module: module \"", name, "\" is null");
  for (auto& [n, set_slot] : replacers_) {
    if (n != name) continue;
    set_slot(module);
    for (auto& [cn, child] : children_) {
      if (cn == name) child = module;
    }
    module->train(training_);
    return;
  }
  throw Error("replace_module: \"" + name + "\" is not a replaceable child of this module");
}

void Module::collect_parameters(const std::string& prefix,
                                std::vector<std::pair<std::string, Variable>>& out) const {
  for (const auto& [name, v] : parameters_) out.emplace_back(prefix + name, v);
  for (const auto& [name, child] : children_) child->collect_parameters(prefix + name + ".", out);
}

void Module::collect_buffers(const std::string& prefix,
                             std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [name, t] : buffers_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect_buffers(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Variable>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Variable>> out;
  collect_parameters("", out);
  return out;
}

std::vector<Variable> Module::parameters() const {
  std::vector<Variable> out;
  for (auto& [name, v] : named_parameters()) out.push_back(v);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect_buffers("", out);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

EvalModeGuard::EvalModeGuard(Module& module) : module_(module), was_training_(module.is_training()) {
  module.eval();
}

EvalModeGuard::~EvalModeGuard() { module_.train(was_training_); }

void Module::zero_grad() {
  for (auto& [name, v] : named_parameters()) v.zero_grad();
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> out;
  for (const auto& [name, v] : named_parameters()) out.emplace(name, v.data());
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
  const auto params = named_parameters();
  std::set<std::string> known;
  for (const auto& [name, v] : params) {
    known.insert(name);
    auto it = state.find(name);
    if (it == state.end()) {
      EMBER_CHECK(!strict, "load_state_dict: missing parameter \"", name, "\" of shape ",
                  shape_str(v.shape()));
      continue;
    }
    EMBER_CHECK(it->second.shape() == v.shape(), "load_state_dict: parameter \"", name,
                "\" has shape ", shape_str(it->second.shape()), " but the model expects ",
                shape_str(v.shape()));
  }
  if (strict) {
    for (const auto& [name, t] : state) {
      EMBER_CHECK(known.count(name), "load_state_dict: unexpected parameter \"", name, "\" of shape ",
                  shape_str(t.shape()));
    }
  }
  NoGradGuard no_grad;
  for (const auto& [name, v] : params) {
    auto it = state.find(name);
    if (it != state.end()) v.data().copy_(it->second);
  }
}

}  // namespace ember::nn
