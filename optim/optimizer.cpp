// Optimizer helpers shared by AdamW and SGD.
#include "optim/optimizer.h"

namespace ember::optim {

void Optimizer::zero_grad() {
  for (auto& g : groups_) {
    for (auto& p : g.params) p.zero_grad();
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
