// Optimizer base with parameter groups, as torch.optim: each group has its
// own learning-rate multiplier and weight decay. step() reads each
// parameter's .grad and updates its data in place (under no-grad).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "autograd/variable.h"

namespace ember::optim {

struct ParamGroup {
  std::vector<Variable> params;
  std::vector<std::string> names;  // parallel to params ("" when unnamed)
  double lr_scale = 1.0;           // group lr = optimizer lr * lr_scale
  double weight_decay = 0.0;
};

class Optimizer {
 public:
  explicit Optimizer(std::vector<ParamGroup> groups) : groups_(std::move(groups)) {}
  virtual ~Optimizer() = default;

  // One update with learning rate lr (times each group's lr_scale), reading
  // every gradient as grad * grad_scale: gradient clipping fused into the
  // update (optim::clip_coefficient), so the gradients are not rewritten.
  virtual void step(double lr, double grad_scale = 1.0) = 0;
  // Drops every parameter's gradient.
  void zero_grad();

  const std::vector<ParamGroup>& groups() const { return groups_; }
  // Number of updates taken.
  int64_t steps() const { return step_; }

  // State as named tensors ("<param name>/exp_avg", ...) plus the step count,
  // for checkpoints; load_state_dict checks names and shapes.
  virtual std::map<std::string, Tensor> state_dict() const = 0;
  virtual void load_state_dict(const std::map<std::string, Tensor>& state, int64_t step) = 0;

 protected:
  std::vector<ParamGroup> groups_;
  int64_t step_ = 0;
};

// Splits named parameters into the two usual groups: weight decay on tensors
// of 2 or more dimensions (matrices, embeddings), none on vectors (norms, biases).
std::vector<ParamGroup> decay_groups(const std::vector<std::pair<std::string, Variable>>& named,
                                     double weight_decay);

}  // namespace ember::optim
