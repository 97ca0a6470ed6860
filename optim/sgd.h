// SGD as torch.optim.SGD: with weight decay wd (L2, added to the gradient),
// momentum mu and dampening 0:
//   g += wd p;  b = g (first step) or mu b + g;  g = g + mu b (Nesterov) or b;  p -= lr g
#pragma once
#include "optim/optimizer.h"

namespace ember::optim {

struct SGDOptions {
  double momentum = 0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, SGDOptions options = {});
  void step(double lr, double grad_scale = 1.0) override;
  std::map<std::string, Tensor> state_dict() const override;

 private:
  void load_tensors(const StateSource& get) override;

  SGDOptions options_;
  std::vector<std::vector<Tensor>> buf_;  // momentum buffers (undefined until first use)
};

}  // namespace ember::optim
