// Optimizer helpers shared by AdamW and SGD: per-parameter update counts,
// state keys, loading, and the usual decay / no-decay split.
#include "optim/optimizer.h"

#include <set>

namespace ember::optim {

const prof::Family kOptimizerFamily = prof::register_family("optimizer", 300);

Optimizer::Optimizer(std::vector<ParamGroup> groups) : groups_(std::move(groups)) {
  for (const auto& g : groups_) param_step_.emplace_back(g.params.size(), 0);
}

void Optimizer::zero_grad() {
  for (auto& g : groups_) {
    for (auto& p : g.params) p.zero_grad();
  }
}

std::string Optimizer::param_key(size_t g, size_t i) const {
  const std::vector<std::string>& names = groups_[g].names;
  if (i < names.size() && !names[i].empty()) return names[i];
  return "group" + std::to_string(g) + "." + std::to_string(i);
}

std::map<std::string, int64_t> Optimizer::param_steps() const {
  std::map<std::string, int64_t> out;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (size_t i = 0; i < groups_[g].params.size(); ++i) out[param_key(g, i)] = param_step_[g][i];
  }
  return out;
}

void Optimizer::stream_state(const StateSink& sink) const {
  if (!sink) return;
  for (const auto& [key, value] : state_dict()) sink(key, value);
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state, int64_t step,
                                const std::map<std::string, int64_t>& param_steps) {
  load_state(
      [&state](const std::string& key) {
        auto it = state.find(key);
        return it == state.end() ? Tensor() : it->second;
      },
      step, param_steps);
}

void Optimizer::load_state(const StateSource& get, int64_t step,
                           const std::map<std::string, int64_t>& param_steps) {
  EMBER_CHECK(step >= 0, "optimizer state: step ", step, " is negative");
  std::set<std::string> known;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const std::string key = param_key(g, i);
      auto it = param_steps.find(key);
      EMBER_CHECK(it == param_steps.end() || (it->second >= 0 && it->second <= step),
                  "optimizer state: ", key, " has step ", it == param_steps.end() ? 0 : it->second,
                  ", expected 0 to the optimizer's step ", step);
      known.insert(key);
    }
  }
  for (const auto& [key, n] : param_steps) {
    EMBER_CHECK(known.count(key), "optimizer state: step of ", key, ", which is no parameter here");
  }
  load_tensors(get);
  step_ = step;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      auto it = param_steps.find(param_key(g, i));
      param_step_[g][i] = it == param_steps.end() ? step : it->second;
    }
  }
}

std::vector<ParamGroup> decay_groups(const std::vector<std::pair<std::string, Variable>>& named,
                                     double weight_decay) {
  ParamGroup decay, no_decay;
  decay.weight_decay = weight_decay;
  for (const auto& [name, v] : named) {
    ParamGroup& g = v.dim() >= 2 ? decay : no_decay;
    g.params.push_back(v);
    g.names.push_back(name);
  }
  return {decay, no_decay};
}

}  // namespace ember::optim
