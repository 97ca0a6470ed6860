// Optimizer base with parameter groups, as torch.optim: each group has its
// own learning-rate multiplier and weight decay. step() reads each
// parameter's .grad and updates its data in place (under no-grad); a
// parameter without .grad is skipped whole and its update count stays.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/profiler.h"

namespace ember::optim {

// The profiler family of the updates and gradient clipping (optim ranks
// 300-399 in the report).
extern const prof::Family kOptimizerFamily;

struct ParamGroup {
  std::vector<Variable> params;
  std::vector<std::string> names;  // parallel to params ("" when unnamed)
  double lr_scale = 1.0;           // group lr = optimizer lr * lr_scale
  double weight_decay = 0.0;
};

class Optimizer {
 public:
  explicit Optimizer(std::vector<ParamGroup> groups);
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
  // Updates parameter i of group g took: torch.optim's per-parameter
  // state['step'], which a step without that parameter's gradient does not
  // advance (AdamW's bias correction counts these). At most steps().
  int64_t param_step(size_t g, size_t i) const { return param_step_[g][i]; }
  // Every parameter's count, keyed by parameter name as state_dict.
  std::map<std::string, int64_t> param_steps() const;

  // State as named tensors ("<param name>/exp_avg", ...), for checkpoints.
  virtual std::map<std::string, Tensor> state_dict() const = 0;
  // The same tensors one at a time, sink(key, tensor) for each, so a checkpoint
  // writer stores each before the next is made. Rank 0 writes checkpoints: a
  // sharded optimizer (dist::ZeroAdamW) gathers each tensor to rank 0 and is
  // collective, every rank calls it and the others pass an empty sink. The
  // default hands out state_dict's tensors (nothing when sink is empty).
  using StateSink = std::function<void(const std::string& key, const Tensor& value)>;
  virtual void stream_state(const StateSink& sink) const;
  // Restores state_dict's tensors (names and shapes checked), the number of
  // updates taken, and param_steps' counts; a parameter missing from
  // param_steps (a state saved before per-parameter counts) took `step`.
  void load_state_dict(const std::map<std::string, Tensor>& state, int64_t step,
                       const std::map<std::string, int64_t>& param_steps = {});
  // The same from tensors fetched one at a time: get(key) returns state_dict's tensor of
  // that key, or an undefined Tensor when there is none (a checkpoint read tensor by
  // tensor, so the whole state is never held twice).
  using StateSource = std::function<Tensor(const std::string& key)>;
  void load_state(const StateSource& get, int64_t step,
                  const std::map<std::string, int64_t>& param_steps = {});

 protected:
  virtual void load_tensors(const StateSource& get) = 0;
  // Name of parameter i of group g in the state: its name, or "group<g>.<i>".
  std::string param_key(size_t g, size_t i) const;

  std::vector<ParamGroup> groups_;
  int64_t step_ = 0;
  std::vector<std::vector<int64_t>> param_step_;  // parallel to groups_[g].params
};

// Splits named parameters into the two usual groups: weight decay on tensors
// of 2 or more dimensions (matrices, embeddings), none on vectors (norms, biases).
std::vector<ParamGroup> decay_groups(const std::vector<std::pair<std::string, Variable>>& named,
                                     double weight_decay);

}  // namespace ember::optim
